//! `aiki schedules`: create (idempotent, checked against the catalog), list, show (the next
//! occurrences, the policy, the log with its missed gaps, an overdue occurrence), trigger,
//! pause, resume, backfill and delete, on the database and through an aiki server; bad input
//! (`refused`) is a usage error and stores nothing.

use std::time::Duration;

use aiki::{Client, Worker};
use aiki_tests::Backend;
use serde_json::{Value, json};

mod refused;

use crate::server::{Server, create_key};
use crate::support::{CliDone, Output, aiki, aiki_with, ids};

const DAY_MS: i64 = 86_400_000;

/// A fresh store whose catalog holds `cli-done@1` (its input: a number), published by a worker
/// that has stopped since: no daemons sweep the schedules, so nothing fires by itself.
async fn store_with_catalog(backend: Backend) -> String {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let worker = Worker::builder(store.clone())
        .register(CliDone)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while client.catalog().await.unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker publishes its catalog"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.shutdown().await;
    url
}

/// `aiki schedules ARGS` (as `ana@ops`, with `env`), expected to succeed.
fn schedules(url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["schedules"];
    all.extend(args);
    let mut env = env.to_vec();
    env.push(("AIKI_ACTOR", "ana@ops"));
    let output = aiki_with(url, &all, &env);
    assert_eq!(output.code, 0, "{args:?}: {}", output.stderr);
    output
}

/// The last row of the log `schedules show NAME -o json` prints.
fn last_row(shown: &Value) -> &Value {
    shown["log"]
        .as_array()
        .and_then(|log| log.last())
        .unwrap_or_else(|| panic!("a log: {shown}"))
}

async fn schedules_are_created_shown_acted_on_and_deleted(backend: Backend) {
    let url = store_with_catalog(backend).await;
    let url = url.as_str();
    let nightly = [
        "create",
        "nightly",
        "cli-done@1",
        "--cron",
        "0 9 * * *",
        "--input",
        "4",
    ];
    let created = schedules(url, &[&nightly[..], &["-o", "json"]].concat(), &[]).json();
    assert_eq!(created["outcome"], "created", "{created}");
    let schedule = &created["schedule"];
    assert_eq!(
        schedule["definition"]["spec"],
        json!({"kind": "cron", "expression": "0 9 * * *", "timezone": "UTC"})
    );
    assert_eq!(schedule["status"], "active");
    assert_eq!(schedule["origin"], "client");
    // Created again, the same: nothing changes; another definition under its name: refused.
    let again = schedules(url, &[&nightly[..], &["-o", "table"]].concat(), &[]);
    assert!(
        again.stdout.contains("exists (same definition)"),
        "{}",
        again.stdout
    );
    let again = schedules(url, &[&nightly[..], &["-o", "json"]].concat(), &[]).json();
    assert_eq!(again["outcome"], "existing", "{again}");
    assert_eq!(again["schedule"], created["schedule"]);
    let other = aiki(
        url,
        &[
            "schedules",
            "create",
            "nightly",
            "cli-done@1",
            "--every",
            "1h",
            "--input",
            "4",
        ],
    );
    let line = other.failed(1);
    assert!(
        line.contains("already exists") && line.contains("another definition"),
        "{line}"
    );
    let table = schedules(
        url,
        &[
            "create",
            "quarter",
            "cli-done@1",
            "--every",
            "15m",
            "--input",
            "1",
            "--overlap",
            "allow",
            "--catchup",
            "1h",
            "--jitter",
            "30s",
            "-o",
            "table",
        ],
        &[],
    );
    assert!(
        table
            .stdout
            .starts_with("created schedule `quarter`: every 15 min"),
        "{}",
        table.stdout
    );

    // The list: one line each, the spec, the policy, the window in words, the next time.
    let listed = schedules(url, &["list", "-o", "table"], &[]).stdout;
    let line = |name: &str| {
        listed
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in {listed}"))
            .to_owned()
    };
    let nightly_line = line("nightly");
    for says in [
        "active",
        "cron `0 9 * * *` (UTC)",
        "cli-done@1",
        "skip",
        "one interval",
    ] {
        assert!(nightly_line.contains(says), "{says}: {nightly_line}");
    }
    assert!(nightly_line.contains("T09:00:00Z"), "{nightly_line}");
    let quarter_line = line("quarter");
    for says in ["every 15 min", "allow", "1 h"] {
        assert!(quarter_line.contains(says), "{says}: {quarter_line}");
    }
    let all = schedules(url, &["list", "-o", "json"], &[]).json();
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nightly", "quarter"], "{all}");

    // Show: the next 5 occurrences (09:00 UTC, a day apart), the policy, the log.
    let shown = schedules(url, &["show", "nightly", "-o", "json"], &[]).json();
    let next: Vec<i64> = shown["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|at| at.as_i64().unwrap())
        .collect();
    assert_eq!(next.len(), 5, "{shown}");
    assert!(
        next.iter().all(|at| at % DAY_MS == 9 * 3_600_000),
        "{next:?}"
    );
    assert!(next.windows(2).all(|pair| pair[1] - pair[0] == DAY_MS));
    assert_eq!(shown["catchup_window_ms"], DAY_MS);
    assert_eq!(last_row(&shown)["reason"], "created");
    assert_eq!(last_row(&shown)["actor"], "ana@ops");
    let table = schedules(url, &["show", "nightly", "-o", "table"], &[]).stdout;
    for says in [
        "overlap   skip",
        "catch-up  one interval (now 1 d)",
        "time zone UTC",
        "input     4",
        "status: active",
    ] {
        assert!(table.contains(says), "{says}: {table}");
    }
    assert_eq!(table.matches("T09:00:00Z").count(), 5, "{table}");

    // Trigger: a run of the schedule's version and input, listed with the others.
    let triggered = schedules(url, &["trigger", "nightly", "-o", "json"], &[]).json();
    let run = triggered["runs"][0].as_str().expect("a run").to_owned();
    let runs = aiki(url, &["runs", "list", "-o", "json"]).json();
    assert_eq!(ids(&runs), std::slice::from_ref(&run));
    assert_eq!(runs["runs"][0]["input"], 4);
    let table = schedules(url, &["show", "nightly", "-o", "table"], &[]).stdout;
    assert!(table.contains(&format!("last run  {run}")), "{table}");

    // Pause and resume: the status changes, in the log with who and why.
    let paused = schedules(
        url,
        &["pause", "nightly", "--reason", "maintenance", "-o", "table"],
        &[],
    );
    assert!(
        paused
            .stdout
            .contains("paused schedule `nightly` (maintenance)"),
        "{}",
        paused.stdout
    );
    let shown = schedules(url, &["show", "nightly", "-o", "json"], &[]).json();
    assert_eq!(shown["schedule"]["status"], "paused");
    let row = last_row(&shown);
    assert_eq!(
        (&row["kind"], &row["status"], &row["reason"], &row["actor"]),
        (
            &json!("status"),
            &json!("paused"),
            &json!("maintenance"),
            &json!("ana@ops")
        ),
        "{row}"
    );
    let twice = aiki(url, &["schedules", "pause", "nightly"]);
    assert!(twice.failed(1).contains("is paused"), "{}", twice.stderr);
    schedules(url, &["resume", "nightly"], &[]);
    let shown = schedules(url, &["show", "nightly", "-o", "json"], &[]).json();
    assert_eq!(shown["schedule"]["status"], "active");
    assert_eq!(last_row(&shown)["reason"], "resumed");

    // Backfill: the triggered run is still queued, so told `skip` every occurrence is
    // skipped; by default each starts a run.
    let range = [
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-03T09:00:00+00:00",
    ];
    let skipped = schedules(
        url,
        &[
            &["backfill", "nightly"][..],
            &range,
            &["--overlap", "skip", "-o", "json"],
        ]
        .concat(),
        &[],
    )
    .json();
    assert_eq!(
        (skipped["started"].as_u64(), skipped["skipped"].as_u64()),
        (Some(0), Some(3))
    );
    let started = schedules(
        url,
        &[&["backfill", "nightly"][..], &range, &["-o", "table"]].concat(),
        &[],
    )
    .stdout;
    assert!(started.contains("started 3 runs, skipped 0"), "{started}");
    assert!(
        started.contains("2026-01-02T09:00:00Z  backfilled"),
        "{started}"
    );
    let runs = aiki(url, &["runs", "list", "-o", "json"]).json();
    assert_eq!(ids(&runs).len(), 4, "{runs}");
    // `runs list --schedule`: the schedule's runs, not a run started by hand.
    let by_hand = aiki(
        url,
        &["runs", "start", "cli-done@1", "--input", "5", "-o", "json"],
    )
    .json();
    let listed = aiki(
        url,
        &["runs", "list", "--schedule", "nightly", "-o", "json"],
    )
    .json();
    let listed = ids(&listed);
    assert_eq!(listed.len(), 4, "{listed:?}");
    assert!(!listed.contains(&by_hand["id"].as_str().unwrap().to_owned()));
    let unknown = aiki(url, &["runs", "list", "--schedule", "weekly"]);
    assert!(
        unknown
            .failed(2)
            .contains("no schedule is named `weekly`; `aiki schedules list` shows them"),
        "{}",
        unknown.stderr
    );
    let shown = schedules(url, &["show", "nightly", "-o", "table"], &[]).stdout;
    assert!(
        shown.contains("skipped") && shown.contains("backfilled"),
        "{shown}"
    );

    // Delete: gone, its runs stay.
    let deleted = schedules(url, &["delete", "nightly", "-o", "table"], &[]);
    assert!(
        deleted.stdout.contains("deleted schedule `nightly`"),
        "{}",
        deleted.stdout
    );
    let gone = aiki(url, &["schedules", "show", "nightly"]);
    assert!(gone.failed(2).contains("no schedule named `nightly`"));
    schedules(url, &["delete", "quarter"], &[]);
    assert_eq!(
        schedules(url, &["list", "-o", "json"], &[]).json(),
        json!([])
    );
    assert_eq!(
        ids(&aiki(url, &["runs", "list", "-o", "json"]).json()).len(),
        5
    );
}

async fn missed_and_overdue_occurrences_are_shown(backend: Backend) {
    let url = store_with_catalog(backend).await;
    let created = schedules(
        &url,
        &[
            "create",
            "often",
            "cli-done@1",
            "--every",
            "1s",
            "--catchup",
            "1s",
            "--input",
            "1",
            "-o",
            "json",
        ],
        &[],
    )
    .json();
    let start = created["schedule"]["created_at"].as_i64().unwrap();
    // A sweep 10.5 s on: the occurrences more than 1 s late are one missed gap, the last one
    // fires.
    let store = aiki::store::connect(&url).await.unwrap();
    let lease = store
        .acquire_lease("cli-test-sweep", "cli-test", 365 * DAY_MS, start)
        .await
        .unwrap();
    let fired = aiki::store::schedule::fire_due(&*store, &lease, start + 10_500, 100)
        .await
        .unwrap();
    assert!(fired.missed > 0 && fired.runs == 1, "{fired:?}");
    let shown = schedules(&url, &["show", "often", "-o", "json"], &[]).json();
    let missed = shown["log"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["kind"] == "missed")
        .unwrap_or_else(|| panic!("a missed gap: {shown}"));
    assert_eq!(missed["count"].as_u64(), Some(fired.missed), "{missed}");
    assert_eq!(
        missed["nominal_at"].as_i64(),
        Some(start + 1_000),
        "{missed}"
    );
    let last = missed["last_at"]
        .as_i64()
        .expect("the gap's last occurrence");
    let table = schedules(&url, &["show", "often", "-o", "table"], &[]).stdout;
    let row = table
        .lines()
        .find(|line| line.contains(" missed "))
        .unwrap_or_else(|| panic!("the gap in the table: {table}"));
    assert!(
        row.contains(&format!("  {}  ", fired.missed))
            && row.contains(&aiki::ops::timestamp(last))
            && row.contains(&aiki::ops::timestamp(start + 1_000)),
        "{row}"
    );
    let fired_row = table
        .lines()
        .find(|line| line.contains(" fired "))
        .unwrap_or_else(|| panic!("the occurrence that fired: {table}"));
    let run = shown["schedule"]["last_run"].as_str().expect("its run");
    assert!(fired_row.contains(run), "{fired_row}");
    // A schedule whose occurrence no sweep took (no daemons run here) says so.
    let definition: aiki::store::ScheduleDefinition =
        serde_json::from_value(created["schedule"]["definition"].clone()).unwrap();
    let past = start - 3_600_000;
    let stale = aiki::store::ScheduleRecord::new(
        "stale",
        definition,
        aiki::store::ScheduleOrigin::Client,
        1,
        past,
    )
    .unwrap();
    store.create_schedule(stale, None).await.unwrap();
    let table = schedules(&url, &["show", "stale", "-o", "table"], &[]).stdout;
    let due = aiki::ops::timestamp(past + 1_000);
    assert!(
        table.contains(&format!(
            "overdue   the occurrence at {due} was due at {due}"
        )) && table.contains("daemons"),
        "{table}"
    );
}

async fn schedules_work_through_a_server(backend: Backend) {
    let url = store_with_catalog(backend).await;
    let key = create_key(&url, "operator");
    let server = Server::start(&url, "127.0.0.1:0");
    let remote = server.address.as_str();
    let with_key = [("AIKI_API_KEY", key.as_str())];
    let create = [
        "create",
        "hourly",
        "cli-done@1",
        "--every",
        "1h",
        "--input",
        "2",
        "-o",
        "json",
    ];
    let created = schedules(remote, &create, &with_key).json();
    assert_eq!(created["outcome"], "created", "{created}");
    let again = schedules(remote, &create, &with_key).json();
    assert_eq!(again["outcome"], "existing", "{again}");
    let other = aiki_with(
        remote,
        &[
            "schedules",
            "create",
            "hourly",
            "cli-done@1",
            "--every",
            "2h",
            "--input",
            "2",
        ],
        &with_key,
    );
    assert!(
        other.failed(1).contains("another definition"),
        "{}",
        other.stderr
    );
    let direct = schedules(&url, &["list", "-o", "json"], &[]).json();
    assert_eq!(
        direct[0]["name"], "hourly",
        "written to the store: {direct}"
    );
    let shown = schedules(remote, &["show", "hourly", "-o", "json"], &with_key).json();
    let next = shown["next"].as_array().unwrap();
    assert_eq!(next.len(), 5, "{shown}");
    assert_eq!(
        next[1].as_i64().unwrap() - next[0].as_i64().unwrap(),
        3_600_000
    );
    let triggered = schedules(remote, &["trigger", "hourly", "-o", "json"], &with_key).json();
    let run = triggered["runs"][0].as_str().expect("a run").to_owned();
    let runs = aiki(&url, &["runs", "list", "-o", "json"]).json();
    assert_eq!(ids(&runs), [run]);
    schedules(remote, &["pause", "hourly"], &with_key);
    let shown = schedules(remote, &["show", "hourly", "-o", "json"], &with_key).json();
    assert_eq!(shown["schedule"]["status"], "paused");
    let key_id = key.split('_').nth(1).unwrap();
    let actor = last_row(&shown)["actor"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(actor.contains(key_id), "the key is who acted: {actor}");
    schedules(remote, &["resume", "hourly"], &with_key);
    let unknown = aiki_with(remote, &["schedules", "show", "ghost"], &with_key);
    assert!(unknown.failed(2).contains("no schedule named `ghost`"));
    let uncataloged = aiki_with(
        remote,
        &[
            "schedules",
            "create",
            "other",
            "cli-done@9",
            "--every",
            "1h",
        ],
        &with_key,
    );
    assert!(uncataloged.failed(2).contains("not in the catalog"));
    schedules(remote, &["delete", "hourly"], &with_key);
    assert_eq!(
        schedules(&url, &["list", "-o", "json"], &[]).json(),
        json!([])
    );
    drop(server);
}

aiki_tests::on_sql_backends!(
    schedules_are_created_shown_acted_on_and_deleted,
    missed_and_overdue_occurrences_are_shown,
    schedules_work_through_a_server,
);
