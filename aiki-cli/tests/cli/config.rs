//! `aiki config`: the store's runtime configuration shown with its defaults, one key set and
//! read back by every later command; an unknown key, a value out of range or not a number is
//! refused in one line that says what is accepted, and changes nothing.

use aiki_tests::Backend;

use crate::support::aiki;

const IDLE: &str = "daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs";

async fn the_runtime_configuration_is_shown_and_set(backend: Backend) {
    let url = backend.fresh_url().await;
    assert_eq!(aiki(&url, &["migrate"]).code, 0);
    let shown = aiki(&url, &["config", "-o", "json"]).json();
    assert_eq!(shown[IDLE], 90_000, "{shown}");
    assert_eq!(shown["daemons.limit"], 500, "{shown}");

    let set = aiki(&url, &["config", "set", IDLE, "120000", "-o", "json"]).json();
    assert_eq!(set[IDLE], 120_000, "{set}");
    let table = aiki(&url, &["config", "show", "-o", "table"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    println!("{}", table.stdout);
    let line = table
        .stdout
        .lines()
        .find(|line| line.starts_with(IDLE))
        .expect("the key's row");
    assert!(
        line.contains("120000 (changed)") && line.contains("90000"),
        "{line}"
    );
    let lines = aiki(&url, &["config", "-o", "jsonl"]);
    assert_eq!(
        lines.stdout.lines().count(),
        aiki::ConfigKey::ALL.len(),
        "{}",
        lines.stdout
    );

    let unknown = aiki(&url, &["config", "set", "daemons.claimIdleTimeout", "5"]);
    let unknown = unknown.failed(2);
    assert!(unknown.contains(IDLE), "the keys are listed: {unknown}");
    let low = aiki(&url, &["config", "set", IDLE, "10"]);
    let low = low.failed(1);
    assert!(low.contains("from 1000 to 86400000"), "{low}");
    let negative = aiki(&url, &["config", "set", "daemons.limit", "-3"]);
    let negative = negative.failed(1);
    assert!(negative.contains("daemons.limit"), "{negative}");
    let retention = "daemons.purgeEndedRuns.retentionMs";
    let short = aiki(&url, &["config", "set", retention, "60000"]);
    let short = short.failed(1);
    assert!(
        short.contains("below 3600000 ms") && short.contains("--allow-short-retention"),
        "{short}"
    );
    let tiny = aiki(
        &url,
        &["config", "set", retention, "999", "--allow-short-retention"],
    );
    assert!(
        tiny.failed(1).contains("or 0: keep ended runs for ever"),
        "{}",
        tiny.stderr
    );
    let other = aiki(
        &url,
        &["config", "set", IDLE, "120000", "--allow-short-retention"],
    );
    assert!(
        other.failed(2).contains("`--allow-short-retention` sets"),
        "{}",
        other.stderr
    );
    aiki(&url, &["config", "set", IDLE, "2m"]).failed(2);
    aiki(&url, &["config", "set", IDLE]).failed(2);
    let after = aiki(&url, &["config", "-o", "json"]).json();
    assert_eq!(after, set, "nothing refused was written");
}

/// A run retention below an hour, for a trial: set when asked for explicitly, shown as set,
/// and followed by the daemons of every process (read back as stored).
async fn a_short_retention_is_set_when_asked_for(backend: Backend) {
    let url = backend.fresh_url().await;
    assert_eq!(aiki(&url, &["migrate"]).code, 0);
    let retention = "daemons.purgeEndedRuns.retentionMs";
    let set = aiki(
        &url,
        &[
            "config",
            "set",
            retention,
            "60000",
            "--allow-short-retention",
            "-o",
            "json",
        ],
    )
    .json();
    assert_eq!(set[retention], 60_000, "{set}");
    let shown = aiki(&url, &["config", "-o", "json"]).json();
    assert_eq!(shown[retention], 60_000, "{shown}");
    let table = aiki(&url, &["config", "-o", "table"]);
    let line = table
        .stdout
        .lines()
        .find(|line| line.starts_with(retention))
        .expect("the key's row");
    assert!(
        line.contains("60000 (changed)")
            && line.contains("(from 1000 with --allow-short-retention)"),
        "{line}"
    );
    let store = aiki::store::connect(&url).await.unwrap();
    assert_eq!(
        store.runtime_config().await.unwrap().run_retention_ms,
        60_000
    );
    // Back to an hour or more, and off, without the flag.
    for value in ["3600000", "0"] {
        let back = aiki(&url, &["config", "set", retention, value, "-o", "json"]).json();
        assert_eq!(back[retention].to_string(), value, "{back}");
    }
}

aiki_tests::on_sql_backends!(
    the_runtime_configuration_is_shown_and_set,
    a_short_retention_is_set_when_asked_for
);
