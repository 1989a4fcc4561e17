//! The parsers of flag values: each refuses a bad value with a message that says what a good
//! one looks like (clap prints it as a usage error, exit 2).

use std::time::Duration;

use aiki::RunId;
use serde_json::Value;

use super::WorkflowArg;

/// Who acts (`--actor`): a name of at most 200 characters, none of them a control character.
pub(super) fn parse_actor(text: &str) -> Result<String, String> {
    let name = text.trim();
    if name.is_empty() {
        return Err("the actor must not be empty: give a name such as `ana@ops`".to_owned());
    }
    if name.chars().any(char::is_control) {
        return Err("the actor must not hold control characters".to_owned());
    }
    if name.chars().count() > 200 {
        return Err("the actor is longer than 200 characters".to_owned());
    }
    Ok(name.to_owned())
}

/// Text to look for: not empty (which would match everything).
pub(super) fn parse_text(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("must not be empty".to_owned());
    }
    Ok(text.to_owned())
}

/// A run id: a UUID.
pub(crate) fn parse_run_id(text: &str) -> Result<RunId, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not a run id (a UUID such as 1b4e28ba-2fa1-41d2-883f-0016d3cca427)")
    })
}

/// `NAME@VERSION` or `NAME`.
pub(super) fn parse_workflow(text: &str) -> Result<WorkflowArg, String> {
    let bad = || format!("`{text}` is not a workflow version such as order-processing@1.0.0");
    let (name, version) = match text.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (text, None),
    };
    if name.is_empty() || version.is_some_and(|v| v.is_empty() || v.contains('@')) {
        return Err(bad());
    }
    Ok(WorkflowArg {
        name: name.to_owned(),
        version: version.map(str::to_owned),
    })
}

/// JSON, or `@FILE` naming a file of JSON.
pub(super) fn parse_json(text: &str) -> Result<Value, String> {
    let (source, json) = match text.strip_prefix('@') {
        Some(path) => (
            format!("file `{path}`"),
            std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?,
        ),
        None => (format!("`{text}`"), text.to_owned()),
    };
    serde_json::from_str(&json).map_err(|e| format!("{source} is not JSON: {e}"))
}

/// A runtime configuration key, by its name.
pub(crate) fn config_key(text: &str) -> Result<aiki::ConfigKey, String> {
    text.parse().map_err(|error: aiki::StoreError| match error {
        aiki::StoreError::Invalid { message } => message,
        other => other.to_string(),
    })
}

/// A Redis URL (`redis://host:port/db`, `rediss://`, `unix://`).
#[cfg(feature = "redis")]
pub(crate) fn redis_url(text: &str) -> Result<String, String> {
    aiki::redis::RedisSubscriber::new(text)
        .map(|_| text.to_owned())
        .map_err(|error| {
            format!("`{text}` is not a Redis URL such as redis://127.0.0.1:6379/ ({error})")
        })
}

/// `30s`, `5m`, `2h`, `1d` (a number and a unit).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration such as 30s, 5m, 2h or 1d");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    // At most a century: further back than any run, and far from overflowing.
    number
        .checked_mul(seconds)
        .filter(|seconds| *seconds <= 100 * 365 * 86_400)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

/// A workflow version, `NAME@VERSION`.
pub(crate) fn namespace(text: &str) -> Result<aiki::store::Namespace, String> {
    match text.split_once('@') {
        Some((name, version)) if !name.is_empty() && !version.is_empty() => {
            Ok(aiki::store::Namespace::new(name, version))
        }
        _ => Err(format!(
            "`{text}` is not a workflow version: give NAME@VERSION, e.g. orders@1.0.0"
        )),
    }
}

/// An endpoint's URL: `http://` or `https://`, a host, no spaces.
#[cfg(feature = "server")]
pub(crate) fn endpoint_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    match rest {
        Some(rest)
            if !rest.is_empty()
                && !rest.starts_with('/')
                && !text.chars().any(|c| c.is_whitespace() || c.is_control()) =>
        {
            Ok(text.to_owned())
        }
        _ => Err(format!(
            "`{text}` is not an endpoint URL: give http(s)://host[:port]/path"
        )),
    }
}

/// An execution budget: a duration from 1 s to 1 h.
#[cfg(feature = "server")]
pub(crate) fn endpoint_budget(text: &str) -> Result<Duration, String> {
    let budget = parse_duration(text)?;
    if budget < Duration::from_secs(1) || budget > Duration::from_secs(3600) {
        return Err(format!(
            "a budget of {text} is out of range: give 1s to 1h (the platform's request timeout)"
        ));
    }
    Ok(budget)
}

/// A schedule's interval (`--every`): a duration of at least 1 s.
pub(super) fn schedule_every(text: &str) -> Result<Duration, String> {
    if text.starts_with('-') {
        return Err(format!(
            "an interval of {text} is negative: give at least 1s, e.g. --every 15m"
        ));
    }
    let every = parse_duration(text)?;
    let shortest = Duration::from_millis(aiki::store::schedule::MIN_EVERY_MS.unsigned_abs());
    if every < shortest {
        return Err(format!(
            "an interval of {text} is too short: give at least 1s, e.g. --every 15m"
        ));
    }
    Ok(every)
}

/// A schedule's catch-up window (`--catchup`): a duration from 1 s to 7 days.
pub(super) fn schedule_catchup(text: &str) -> Result<Duration, String> {
    let window = parse_duration(text)?;
    let longest = Duration::from_millis(aiki::store::MAX_CATCHUP_WINDOW_MS.unsigned_abs());
    if window.is_zero() || window > longest {
        return Err(format!(
            "a catch-up window of {text} is out of range: give 1s to 7d"
        ));
    }
    Ok(window)
}

/// A schedule's jitter (`--jitter`): a duration up to 1 hour (`0s`: none).
pub(super) fn schedule_jitter(text: &str) -> Result<Duration, String> {
    let jitter = parse_duration(text)?;
    if jitter > Duration::from_millis(aiki::store::MAX_JITTER_MS.unsigned_abs()) {
        return Err(format!("a jitter of {text} is out of range: give 0s to 1h"));
    }
    Ok(jitter)
}

/// An overlap policy: `skip`, `allow`, `cancel_previous` or `buffer_one`.
pub(super) fn schedule_overlap(text: &str) -> Result<aiki::store::OverlapPolicy, String> {
    text.parse()
}

/// An instant in RFC 3339 (`2026-03-01T09:00:00Z`, `2026-03-01T10:00:00+01:00`), as ms since
/// the epoch.
pub(crate) fn parse_time(text: &str) -> Result<aiki::Millis, String> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|at| at.timestamp_millis())
        .map_err(|_| {
            format!(
                "`{text}` is not an RFC 3339 time: give one such as 2026-03-01T09:00:00Z or \
                 2026-03-01T10:00:00+01:00"
            )
        })
}

/// A key scope: `executor`, `operator` or `read`.
#[cfg(feature = "server")]
pub(crate) fn scope(text: &str) -> Result<aiki::store::Scope, String> {
    text.parse().map_err(|error: aiki::StoreError| match error {
        aiki::StoreError::Invalid { message } => message,
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflows_are_a_name_and_maybe_a_version() {
        assert_eq!(
            parse_workflow("orders@1.2"),
            Ok(WorkflowArg {
                name: "orders".into(),
                version: Some("1.2".into())
            })
        );
        assert_eq!(parse_workflow("orders").unwrap().version, None);
        for bad in ["", "@1", "orders@", "a@b@c"] {
            let error = parse_workflow(bad).unwrap_err();
            assert!(error.contains("not a workflow version"), "{bad}: {error}");
        }
    }

    #[test]
    fn json_is_given_inline_or_from_a_file() {
        assert_eq!(parse_json(r#"{"n": 1}"#), Ok(serde_json::json!({"n": 1})));
        let error = parse_json("{n: 1}").unwrap_err();
        assert!(error.starts_with("`{n: 1}` is not JSON"), "{error}");
        let error = parse_json("@/nonexistent/input.json").unwrap_err();
        assert!(
            error.starts_with("cannot read `/nonexistent/input.json`"),
            "{error}"
        );
        let file = std::env::temp_dir().join(format!("aiki-cli-{}.json", std::process::id()));
        std::fs::write(&file, "[1, 2").unwrap();
        let error = parse_json(&format!("@{}", file.display())).unwrap_err();
        assert!(error.contains("is not JSON"), "{error}");
        std::fs::write(&file, "[1, 2]").unwrap();
        assert_eq!(
            parse_json(&format!("@{}", file.display())),
            Ok(serde_json::json!([1, 2]))
        );
        std::fs::remove_file(file).unwrap();
    }

    #[test]
    fn durations_have_a_number_and_a_unit() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in [
            "",
            "5",
            "m",
            "5w",
            "-5m",
            "1.5h",
            "99999999999999999999d",
            "36501d",
        ] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.contains("not a duration"), "{bad}: {error}");
        }
    }

    #[test]
    fn schedule_values_say_their_range() {
        assert_eq!(schedule_every("15m"), Ok(Duration::from_secs(900)));
        for (parser, bad, says) in [
            (
                schedule_every as fn(&str) -> Result<Duration, String>,
                "0s",
                "at least 1s",
            ),
            (schedule_every, "-1m", "is negative"),
            (schedule_catchup, "-1m", "not a duration"),
            (schedule_catchup, "0s", "1s to 7d"),
            (schedule_catchup, "8d", "1s to 7d"),
            (schedule_jitter, "2h", "0s to 1h"),
        ] {
            let error = parser(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
        assert_eq!(schedule_jitter("0s"), Ok(Duration::ZERO));
        assert_eq!(
            schedule_overlap("cancel-previous"),
            Ok(aiki::store::OverlapPolicy::CancelPrevious)
        );
        assert!(
            schedule_overlap("never")
                .unwrap_err()
                .contains("buffer_one")
        );
        assert_eq!(parse_time("1970-01-01T00:00:01Z"), Ok(1_000));
        assert_eq!(parse_time("1970-01-01T01:00:01.5+01:00"), Ok(1_500));
        assert!(parse_time("yesterday").unwrap_err().contains("RFC 3339"));
    }

    #[test]
    fn actors_are_printable_names() {
        assert_eq!(parse_actor(" ana@ops "), Ok("ana@ops".to_owned()));
        for bad in ["", "  ", "a\u{1}b", &"x".repeat(201)] {
            assert!(parse_actor(bad).is_err(), "{bad:?}");
        }
        assert!(parse_text("").is_err());
        assert_eq!(parse_text(" x"), Ok(" x".to_owned()));
    }
}
