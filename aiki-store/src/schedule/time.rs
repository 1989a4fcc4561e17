//! When a schedule's occurrences are, and the checks of a definition.

use std::str::FromStr;

use chrono::{DateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

use super::MIN_EVERY_MS;
use crate::{
    MAX_CATCHUP_WINDOW_MS, MAX_JITTER_MS, Millis, ScheduleDefinition, ScheduleRecord, ScheduleSpec,
    StoreError,
};

/// A spec made ready to compute with.
enum Parsed {
    Cron(Box<Cron>, Tz),
    Every(Millis),
}

fn invalid(message: String) -> StoreError {
    StoreError::Invalid { message }
}

fn parse(spec: &ScheduleSpec) -> Result<Parsed, StoreError> {
    match spec {
        ScheduleSpec::Cron {
            expression,
            timezone,
        } => {
            let fields = expression.split_whitespace().count();
            if !(5..=6).contains(&fields) {
                return Err(invalid(format!(
                    "the cron expression `{expression}` has {fields} fields; write 5 (minute hour \
                     day-of-month month day-of-week) or 6 (seconds first)"
                )));
            }
            let cron = Cron::from_str(expression).map_err(|error| {
                invalid(format!(
                    "the cron expression `{expression}` is not valid: {error}; write 5 fields \
                     (minute hour day-of-month month day-of-week) or 6 (seconds first), e.g. \
                     `0 9 * * MON-FRI`"
                ))
            })?;
            let tz = Tz::from_str(timezone).map_err(|_| {
                invalid(format!(
                    "`{timezone}` is not an IANA time zone; name one such as `UTC`, \
                     `Europe/Berlin` or `America/New_York`"
                ))
            })?;
            Ok(Parsed::Cron(Box::new(cron), tz))
        }
        ScheduleSpec::Every { every_ms } => {
            if *every_ms < MIN_EVERY_MS {
                return Err(invalid(format!(
                    "an interval of {every_ms} ms is too short: a schedule fires at most every \
                     {MIN_EVERY_MS} ms (give a positive interval of at least 1 s)"
                )));
            }
            Ok(Parsed::Every(*every_ms))
        }
    }
}

/// Checks a schedule's name and definition: [`StoreError::Invalid`] saying what is wrong.
pub fn check(name: &str, definition: &ScheduleDefinition) -> Result<(), StoreError> {
    if name.trim().is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
        return Err(invalid(format!(
            "the schedule name {name:?} is not valid: give 1 to 200 characters, no control \
             characters"
        )));
    }
    if definition.namespace.workflow.is_empty() || definition.namespace.version.is_empty() {
        return Err(invalid(
            "a schedule names the workflow version it starts (`name@version`)".to_owned(),
        ));
    }
    parse(&definition.spec)?;
    if let Some(window) = definition.catchup_window_ms
        && !(1..=MAX_CATCHUP_WINDOW_MS).contains(&window)
    {
        return Err(invalid(format!(
            "a catch-up window of {window} ms is out of range: give 1 ms to 7 days"
        )));
    }
    if !(0..=MAX_JITTER_MS).contains(&definition.jitter_ms) {
        return Err(invalid(format!(
            "a jitter of {} ms is out of range: give 0 to 1 hour",
            definition.jitter_ms
        )));
    }
    Ok(())
}

/// The first occurrence of `spec` strictly after `after` (an `every` schedule counts its
/// intervals from `anchor`, its creation); `None` when there is none (a cron expression whose
/// dates never come again).
pub fn next_after(
    spec: &ScheduleSpec,
    after: Millis,
    anchor: Millis,
) -> Result<Option<Millis>, StoreError> {
    Ok(match parse(spec)? {
        Parsed::Every(every) => {
            // The first anchor + k * every above `after`, k of either sign.
            let steps = (after - anchor).div_euclid(every) + 1;
            Some(anchor.saturating_add(steps.saturating_mul(every)))
        }
        Parsed::Cron(cron, tz) => {
            let ScheduleSpec::Cron { expression, .. } = spec else {
                unreachable!("a cron spec parses to a cron")
            };
            cron_next(&cron, expression, tz, after)
        }
    })
}

fn cron_next(cron: &Cron, expression: &str, tz: Tz, after: Millis) -> Option<Millis> {
    let next = croner_next(cron, tz, after)?;
    if !absolute_hours(expression) {
        return Some(next);
    }
    // croner walks local time, so it never gives the second instance of a local time that
    // repeats after a fall-back; a wildcard or stepped hour follows absolute time and fires
    // there too. Between `after` and `next` the offset drops only across a fall-back.
    let offset = |at: Millis| {
        Utc.timestamp_millis_opt(at)
            .single()
            .map(|t| t.with_timezone(&tz).offset().fix().local_minus_utc())
    };
    if offset(after)? <= offset(next)? {
        return Some(next);
    }
    // The change: the first instant with the later offset (ms precision).
    let (mut low, mut high) = (after, next);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if offset(mid)? == offset(after)? {
            low = mid;
        } else {
            high = mid;
        }
    }
    // The first matching local time from the change on (croner resolves a repeated one to its
    // first instance, before the change: only its local time is wanted here).
    let change: DateTime<Tz> = Utc.timestamp_millis_opt(high).single()?.with_timezone(&tz);
    let local = cron.find_next_occurrence(&change, true).ok()?.naive_local();
    let second = match tz.from_local_datetime(&local) {
        chrono::LocalResult::Ambiguous(_, second) => second.timestamp_millis(),
        chrono::LocalResult::Single(only) => only.timestamp_millis(),
        chrono::LocalResult::None => return Some(next),
    };
    Some(if second > after && second < next {
        second
    } else {
        next
    })
}

/// Whether a cron expression's hour field is a wildcard or a step (`*`, `*/2`, `1-23/2`):
/// such an expression follows absolute time across daylight-saving changes.
fn absolute_hours(expression: &str) -> bool {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let hour = if fields.len() == 6 {
        fields[2]
    } else {
        fields[1]
    };
    hour.split(',')
        .any(|part| part == "*" || part.contains('/'))
}

/// croner's next occurrence strictly after `after`, in ms.
fn croner_next(cron: &Cron, tz: Tz, after: Millis) -> Option<Millis> {
    // croner counts in whole seconds: start from the second `after` is in, and step past
    // any answer not strictly later.
    let mut from = after.div_euclid(1000) * 1000;
    for _ in 0..4 {
        let start: DateTime<Tz> = Utc.timestamp_millis_opt(from).single()?.with_timezone(&tz);
        let at = cron
            .find_next_occurrence(&start, false)
            .ok()?
            .timestamp_millis();
        if at > after {
            return Some(at);
        }
        from = at;
    }
    None
}

/// The occurrences of `record` in `[from, to]`, at most `max` (a backfill's, or the next
/// ones shown to an operator).
pub fn occurrences(
    record: &ScheduleRecord,
    from: Millis,
    to: Millis,
    max: usize,
) -> Result<Vec<Millis>, StoreError> {
    let spec = &record.definition.spec;
    let mut found = Vec::new();
    let mut at = next_after(spec, from.saturating_sub(1), record.created_at)?;
    while let Some(t) = at {
        if t > to || found.len() >= max {
            break;
        }
        found.push(t);
        at = next_after(spec, t, record.created_at)?;
    }
    Ok(found)
}

/// How late the occurrence at `at` may still start: the definition's window, or one interval
/// (for a cron schedule the time to the occurrence after `at`), at most 7 days.
pub fn catchup_window(record: &ScheduleRecord, at: Millis) -> Millis {
    let definition = &record.definition;
    if let Some(window) = definition.catchup_window_ms {
        return window;
    }
    let interval = match &definition.spec {
        ScheduleSpec::Every { every_ms } => *every_ms,
        spec => next_after(spec, at, record.created_at)
            .ok()
            .flatten()
            .map_or(MAX_CATCHUP_WINDOW_MS, |next| next - at),
    };
    interval.clamp(1, MAX_CATCHUP_WINDOW_MS)
}

/// The schedule's fixed jitter: how much later than each occurrence's time the sweep takes it
/// (derived from its name, so every process agrees; at most its `jitter_ms`).
pub fn jitter_offset(record: &ScheduleRecord) -> Millis {
    let jitter = record.definition.jitter_ms;
    if jitter <= 0 {
        return 0;
    }
    // FNV-1a: stable across releases and platforms, unlike std's hasher.
    let hash = record
        .name
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    i64::try_from(hash % (jitter as u64 + 1)).unwrap_or(0)
}

/// A duration in words: `90 s`, `15 min`, `2 h`, `1 d`, `1500 ms`.
pub fn words(ms: Millis) -> String {
    const UNITS: [(Millis, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1_000, "s"),
    ];
    UNITS
        .iter()
        .find(|(unit, _)| ms != 0 && ms % unit == 0)
        .map_or_else(
            || format!("{ms} ms"),
            |(unit, name)| format!("{} {name}", ms / unit),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expression: &str, timezone: &str) -> ScheduleSpec {
        ScheduleSpec::Cron {
            expression: expression.to_owned(),
            timezone: timezone.to_owned(),
        }
    }

    fn utc(text: &str) -> Millis {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn every_counts_from_its_anchor() {
        let spec = ScheduleSpec::Every { every_ms: 60_000 };
        assert_eq!(next_after(&spec, 1_000, 1_000).unwrap(), Some(61_000));
        assert_eq!(next_after(&spec, 60_999, 1_000).unwrap(), Some(61_000));
        assert_eq!(next_after(&spec, 61_000, 1_000).unwrap(), Some(121_000));
        assert_eq!(next_after(&spec, 0, 1_000).unwrap(), Some(1_000));
        assert_eq!(
            next_after(&spec, -59_000, 1_000).unwrap(),
            Some(-59_000 + 60_000)
        );
        assert_eq!(
            next_after(&spec, -60_000, 1_000).unwrap(),
            Some(1_000 - 60_000)
        );
    }

    #[test]
    fn cron_is_strictly_after_even_within_a_second() {
        let spec = cron("0 9 * * *", "UTC");
        let nine = utc("2026-03-02T09:00:00Z");
        assert_eq!(next_after(&spec, nine - 1, 0).unwrap(), Some(nine));
        assert_eq!(
            next_after(&spec, nine + 500, 0).unwrap(),
            Some(nine + 86_400_000)
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, says) in [
            (cron("0 9 * *", "UTC"), "4 fields"),
            (cron("0 0 9 * * * 2026", "UTC"), "7 fields"),
            (cron("61 9 * * *", "UTC"), "not valid"),
            (cron("0 9 * * *", "Mars/Olympus"), "IANA"),
            (ScheduleSpec::Every { every_ms: 0 }, "too short"),
            (ScheduleSpec::Every { every_ms: -5 }, "too short"),
        ] {
            let error = parse(&spec).err().expect("refused").to_string();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn words_pick_the_largest_whole_unit() {
        assert_eq!(words(900_000), "15 min");
        assert_eq!(words(3_600_000), "1 h");
        assert_eq!(words(1_500), "1500 ms");
        assert_eq!(words(90_000), "90 s");
    }
}
