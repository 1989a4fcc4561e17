//! `--actor` (and `AIKI_ACTOR`, and `USER@HOST` by default): who acts is recorded on the
//! timeline of every run a command starts or acts on, and with every event it sends; `runs
//! show` says who made each change and who sent each event.

use aiki_tests::Backend;
use serde_json::Value;

use crate::support::{aiki, aiki_with, command, fixture, has_control, on};

/// The actor of the timeline change with this reason (the last one).
fn actor_of(shown: &Value, reason: &str) -> Value {
    shown["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|change| change["reason"] == reason)
        .unwrap_or_else(|| panic!("no `{reason}` in {shown}"))["actor"]
        .clone()
}

async fn who_acts_is_recorded_and_shown(backend: Backend) {
    let f = fixture(backend).await;
    let url = f.url.as_str();
    // A start, by flag.
    let started = aiki(
        url,
        &[
            "runs",
            "start",
            "cli-done@1",
            "--input",
            "4",
            "--actor",
            "ana@ops",
            "-o",
            "json",
        ],
    )
    .json();
    let id: aiki::RunId = started["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        actor_of(&on(url, "show", id, "json").json(), "started"),
        "ana@ops"
    );

    // An event, by environment: on the event and on the change it made.
    let waiting = f.waiting.to_string();
    let sent = aiki_with(
        url,
        &[
            "runs",
            "send",
            &waiting,
            "payment_received",
            "--payload",
            "5",
        ],
        &[("AIKI_ACTOR", "bo@billing")],
    );
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    // A pause and a resume, by default: USER (else LOGNAME) @ HOSTNAME.
    let paused = aiki_with(
        url,
        &["runs", "pause", &waiting],
        &[("USER", "carol"), ("HOSTNAME", "desk-1")],
    );
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    let resumed = command(url)
        .args(["runs", "resume", &waiting])
        .env_remove("USER")
        .env("LOGNAME", "dave")
        .env("HOSTNAME", "desk-2")
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0));

    let shown = on(url, "show", f.waiting, "json").json();
    assert_eq!(shown["events"][0]["sent_by"], "bo@billing", "{shown}");
    assert_eq!(actor_of(&shown, "an event arrived"), "bo@billing");
    assert_eq!(actor_of(&shown, "paused"), "carol@desk-1");
    assert_eq!(actor_of(&shown, "resumed"), "dave@desk-2");
    let table = aiki(url, &["runs", "show", &waiting, "-o", "table"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    println!("{}", table.stdout);
    let row = |reason: &str| {
        table
            .stdout
            .lines()
            .find(|line| line.contains(reason))
            .unwrap_or_else(|| panic!("no `{reason}` row: {}", table.stdout))
            .to_owned()
    };
    assert!(
        row("an event arrived").ends_with("bo@billing"),
        "{}",
        table.stdout
    );
    assert!(row("paused").ends_with("carol@desk-1"), "{}", table.stdout);
    assert!(row("resumed").ends_with("dave@desk-2"), "{}", table.stdout);
    assert!(
        table.stdout.contains("SENT BY") && row("payment_received").ends_with("bo@billing"),
        "{}",
        table.stdout
    );

    // The bulk forms and the other actions record it too.
    let cancelled = aiki(
        url,
        &[
            "runs",
            "cancel",
            "--workflow",
            "cli-unserved",
            "--yes",
            "--actor",
            "eve@ops",
            "-o",
            "json",
        ],
    )
    .json();
    assert_eq!(cancelled["done"], 2, "{cancelled}");
    let queued = on(url, "show", f.queued, "json").json();
    assert_eq!(actor_of(&queued, "cancelled"), "eve@ops");
    let retried = aiki(
        url,
        &["runs", "retry", &f.failed.to_string(), "--actor", "fay@ops"],
    );
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert_eq!(
        actor_of(&on(url, "show", f.failed, "json").json(), "retried"),
        "fay@ops"
    );
    let forked = aiki(
        url,
        &[
            "runs",
            "fork",
            &f.done.to_string(),
            "--actor",
            "gus@ops",
            "-o",
            "json",
        ],
    )
    .json();
    let fork: aiki::RunId = forked["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        actor_of(&on(url, "show", fork, "json").json(), "started"),
        "gus@ops"
    );

    // Bad input: one line, exit 2, nothing printed that a terminal would act on.
    let empty = aiki(url, &["runs", "pause", &waiting, "--actor", ""]);
    assert!(
        empty.failed(2).contains("must not be empty"),
        "{}",
        empty.stderr
    );
    let control = aiki_with(
        url,
        &["runs", "pause", &waiting],
        &[("AIKI_ACTOR", "a\u{1b}[2Jb")],
    );
    let line = control.failed(2);
    assert!(
        line.contains("control characters") && !has_control(line),
        "{line:?}"
    );
    let long = "x".repeat(201);
    let refused = aiki(url, &["workflows", "--actor", &long]);
    assert!(
        refused.failed(2).contains("longer than 200"),
        "{}",
        refused.stderr
    );
}

aiki_tests::on_sql_backends!(who_acts_is_recorded_and_shown);
