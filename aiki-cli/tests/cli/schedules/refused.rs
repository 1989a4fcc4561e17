//! `aiki schedules` refusing bad input: each a usage error (exit 2) in one line saying what is
//! wrong and what to do, with nothing stored.

use aiki_tests::Backend;
use serde_json::json;

use super::{schedules, store_with_catalog};
use crate::support::{aiki, ids};

async fn bad_input_is_a_usage_error_and_stores_nothing(backend: Backend) {
    let url = store_with_catalog(backend).await;
    let url = url.as_str();
    let create = |rest: &[&str]| {
        let mut args = vec!["schedules", "create", "job", "cli-done@1"];
        args.extend(rest);
        aiki(url, &args)
    };
    for (rest, says) in [
        (&["--cron", "61 9 * * *"][..], "is not valid"),
        (&["--cron", "0 9 * *"][..], "has 4 fields"),
        (
            &["--cron", "0 9 * * *", "--timezone", "Mars/Olympus"][..],
            "IANA",
        ),
        (&["--every", "0s"][..], "too short"),
        (&["--every", "-5m"][..], "is negative"),
        (&["--every", "soon"][..], "not a duration"),
        (
            &["--every", "1m", "--cron", "* * * * *"][..],
            "cannot be used with",
        ),
        (
            &["--every", "1m", "--timezone", "UTC"][..],
            "cannot be used with",
        ),
        (&[][..], "say when the schedule fires"),
        (&["--timezone", "UTC"][..], "say when the schedule fires"),
        (
            &["--every", "1m", "--overlap", "never"][..],
            "not an overlap policy",
        ),
        (&["--every", "1m", "--catchup", "8d"][..], "1s to 7d"),
        (&["--every", "1m", "--jitter", "2h"][..], "0s to 1h"),
        (&["--every", "1m", "--input", "{oops"][..], "is not JSON"),
        (
            &["--every", "1m", "--input", "\"four\""][..],
            "invalid input of cli-done@1",
        ),
    ] {
        let refused = create(rest);
        assert!(
            refused.failed(2).contains(says),
            "{rest:?}: {}",
            refused.stderr
        );
        assert!(refused.stdout.is_empty(), "{rest:?}: {}", refused.stdout);
    }
    let unknown = aiki(
        url,
        &[
            "schedules",
            "create",
            "job",
            "cli-done@9",
            "--every",
            "1m",
            "--input",
            "1",
        ],
    );
    let line = unknown.failed(2);
    assert!(
        line.contains("cli-done@9 is not in the catalog") && line.contains("start a worker"),
        "{line}"
    );
    let versionless = aiki(
        url,
        &["schedules", "create", "job", "cli-done", "--every", "1m"],
    );
    assert!(versionless.failed(2).contains("NAME@VERSION"));
    let nameless = aiki(
        url,
        &["schedules", "create", "", "cli-done@1", "--every", "1m"],
    );
    assert!(nameless.failed(2).contains("schedule name"));
    for action in [
        &["show", "ghost"][..],
        &["pause", "ghost"],
        &["resume", "ghost"],
        &["trigger", "ghost"],
        &["delete", "ghost"],
        &[
            "backfill",
            "ghost",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-02T00:00:00Z",
        ],
    ] {
        let refused = aiki(url, &[&["schedules"][..], action].concat());
        let line = refused.failed(2);
        assert!(
            line.contains("no schedule named `ghost`") && line.contains("schedules list"),
            "{action:?}: {line}"
        );
    }
    let backwards = aiki(
        url,
        &[
            "schedules",
            "backfill",
            "ghost",
            "--from",
            "2026-01-02T00:00:00Z",
            "--to",
            "2026-01-01T00:00:00Z",
        ],
    );
    assert!(
        backwards.failed(2).contains("is after --to"),
        "{}",
        backwards.stderr
    );
    let when = aiki(
        url,
        &[
            "schedules",
            "backfill",
            "ghost",
            "--from",
            "yesterday",
            "--to",
            "2026-01-01T00:00:00Z",
        ],
    );
    assert!(when.failed(2).contains("RFC 3339"), "{}", when.stderr);
    assert_eq!(
        schedules(url, &["list", "-o", "json"], &[]).json(),
        json!([])
    );
    assert_eq!(
        ids(&aiki(url, &["runs", "list", "-o", "json"]).json()).len(),
        0
    );
}

aiki_tests::on_sql_backends!(bad_input_is_a_usage_error_and_stores_nothing);
