//! The `aiki` binary as a process, against SQLite and PostgreSQL stores holding runs in every
//! state an operator looks at: its table and JSON output, its actions, its exit codes, and
//! its one-line errors on bad input.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod actor;
mod bulk;
mod catalog;
mod config;
mod endpoints;
mod filters;
mod migrate;
mod outage;
mod purge;
mod push_dispatch;
mod recovery;
mod release;
mod scenes;
mod schedules;
mod server;
mod show;
mod support;
mod workers;

use std::process::Command;

use aiki::RunId;
use aiki_tests::Backend;
use serde_json::Value;
use support::{aiki, children_of, fixture, ids, on};

async fn lists_filters_and_pages(backend: Backend) {
    let f = fixture(backend).await;
    let all = aiki(&f.url, &["runs", "list", "-o", "json"]).json();
    // Newest first, by creation time and then id (runs started in the same millisecond).
    assert_eq!(ids(&all).len(), 7, "{all}");
    let keys: Vec<(i64, String)> = all["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            let id = run["id"].as_str().unwrap().to_owned();
            (run["created_at"].as_i64().unwrap(), id)
        })
        .collect();
    let mut newest_first = keys.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(keys, newest_first);
    assert_eq!(all["next"], Value::Null);
    let failed = aiki(
        &f.url,
        &["runs", "list", "--status", "failed", "-o", "json"],
    )
    .json();
    assert_eq!(ids(&failed), [f.failed.to_string()]);
    assert_eq!(failed["runs"][0]["error"]["kind"], "task_failed");
    let waiting = aiki(
        &f.url,
        &[
            "runs",
            "list",
            "--status",
            "sleeping,awaiting_event",
            "-o",
            "json",
        ],
    )
    .json();
    let mut both = ids(&waiting);
    both.sort();
    let mut expected = vec![f.waiting.to_string(), f.sleeping.to_string()];
    expected.sort();
    assert_eq!(both, expected);
    let by_reference = aiki(
        &f.url,
        &["runs", "list", "--reference-id", "order-7", "-o", "json"],
    )
    .json();
    assert_eq!(ids(&by_reference), [f.sleeping.to_string()]);
    let children = children_of(&f.url, f.parent);
    assert_eq!(children["runs"][0]["namespace"]["workflow"], "cli-unserved");
    // Pages of two, joined: the same seven, in the same order.
    let mut paged = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut args = vec!["runs", "list", "--limit", "2", "-o", "json"];
        if let Some(cursor) = &after {
            args.extend(["--after", cursor.as_str()]);
        }
        let page = aiki(&f.url, &args).json();
        paged.extend(ids(&page));
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(paged, ids(&all));
    // Lines, and payloads left out.
    let lines = aiki(
        &f.url,
        &[
            "runs",
            "list",
            "--limit",
            "3",
            "-o",
            "jsonl",
            "--no-payloads",
        ],
    );
    let lines: Vec<Value> = lines
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "three runs and the next cursor");
    assert!(lines[0].get("input").is_none());
    assert!(lines[3]["next"].is_string());
    // The table for people.
    let table = aiki(&f.url, &["runs", "list", "-o", "table"]);
    assert_eq!(table.code, 0);
    let header = table.stdout.lines().next().unwrap();
    assert!(
        header.starts_with("ID") && header.contains("STATUS"),
        "{header}"
    );
    assert!(table.stdout.contains("cli-fails") && table.stdout.contains("task_failed"));
}

async fn shows_what_each_run_does(backend: Backend) {
    let f = fixture(backend).await;
    let show = |id: RunId| aiki(&f.url, &["runs", "show", &id.to_string(), "-o", "table"]);
    let sleeping = show(f.sleeping);
    assert_eq!(sleeping.code, 0, "{}", sleeping.stderr);
    println!("{}", sleeping.stdout);
    assert!(
        sleeping
            .stdout
            .contains("sleeping (`cool-down`), wakes in 2 h 59 min"),
        "{}",
        sleeping.stdout
    );
    assert!(sleeping.stdout.contains("cli-step:"), "the manifest entry");
    assert!(sleeping.stdout.contains("reference order-7"));
    let waiting = show(f.waiting);
    println!("{}", waiting.stdout);
    assert!(
        waiting
            .stdout
            .contains("waiting on event `payment_received`"),
        "the wait set in words: {}",
        waiting.stdout
    );
    assert!(
        waiting.stdout.contains("running → awaiting_event") && waiting.stdout.contains("suspended"),
        "the timeline: {}",
        waiting.stdout
    );
    let parent = show(f.parent);
    println!("{}", parent.stdout);
    assert!(
        parent.stdout.contains("waiting on child run ") && parent.stdout.contains("(queued)"),
        "{}",
        parent.stdout
    );
    assert!(
        parent.stdout.contains(&f.queued.to_string()) || parent.stdout.contains("cli-unserved")
    );
    let queued = show(f.queued);
    println!("{}", queued.stdout);
    assert!(
        queued
            .stdout
            .contains("no live worker serves cli-unserved@1 in pool `default`"),
        "{}",
        queued.stdout
    );
    let sleeping = on(&f.url, "show", f.sleeping, "json").json();
    assert_eq!(
        sleeping["serving_workers"],
        serde_json::json!([]),
        "the fixture's worker has stopped: {sleeping}"
    );
    let workers = aiki(&f.url, &["workers", "-o", "json"]).json();
    let workers = workers.as_array().expect("a list of workers");
    assert_eq!(workers.len(), 1, "{workers:?}");
    assert_eq!(
        workers[0]["pid"],
        std::process::id(),
        "the test process runs the worker"
    );
    assert_eq!(
        workers[0]["liveness"]["state"], "stopped",
        "it said so when it shut down: {workers:?}"
    );
    assert!(
        workers[0]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["workflow"] == "cli-sleeps"),
        "{workers:?}"
    );
    let table = aiki(&f.url, &["workers", "-o", "table"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(table.stdout.contains("cli-sleeps@1 ("), "{}", table.stdout);
    assert!(table.stdout.contains("stopped "), "{}", table.stdout);
    let failed = on(&f.url, "show", f.failed, "json").json();
    assert_eq!(failed["run"]["status"], "failed");
    let timeline = failed["timeline"].as_array().expect("a timeline");
    let steps: Vec<(&str, &str)> = timeline
        .iter()
        .map(|c| (c["to"].as_str().unwrap(), c["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(steps.first(), Some(&("queued", "started")), "{steps:?}");
    assert!(steps.contains(&("running", "claimed")), "{steps:?}");
    assert_eq!(steps.last().map(|s| s.0), Some("failed"), "{steps:?}");
    assert!(steps.last().unwrap().1.starts_with("failed: "), "{steps:?}");
    assert_eq!(failed["entries"][0]["status"], "failed");
    assert!(
        failed["run"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the provider said no")
    );
    let without = aiki(
        &f.url,
        &[
            "runs",
            "show",
            &f.done.to_string(),
            "-o",
            "json",
            "--no-payloads",
        ],
    )
    .json();
    assert!(without["run"].get("output").is_none());
    assert!(without["entries"][0].get("output").is_none());
}

async fn acts_waits_and_says_how_runs_ended(backend: Backend) {
    let f = fixture(backend).await;
    let result = on(&f.url, "result", f.done, "json");
    assert_eq!(result.json(), Value::from(2));
    let failed = aiki(&f.url, &["runs", "result", &f.failed.to_string()]);
    assert!(
        failed.failed(3).contains("ended `failed`: task_failed"),
        "{}",
        failed.stderr
    );
    let pending = aiki(
        &f.url,
        &["runs", "result", &f.queued.to_string(), "--timeout", "1s"],
    );
    assert!(
        pending.failed(5).contains("still `queued`"),
        "{}",
        pending.stderr
    );
    // Actions print the run afterwards.
    let paused = on(&f.url, "pause", f.waiting, "json").json();
    assert_eq!(paused["status"], "paused");
    let resumed = on(&f.url, "resume", f.waiting, "table");
    assert_eq!(resumed.code, 0);
    assert!(
        resumed.stdout.contains("is now queued"),
        "{}",
        resumed.stdout
    );
    let woken = on(&f.url, "wake", f.sleeping, "json").json();
    assert_eq!(woken["status"], "queued");
    let cancelled = on(&f.url, "cancel", f.parent, "json").json();
    assert_eq!(cancelled["status"], "cancelled");
    let children = children_of(&f.url, f.parent);
    assert_eq!(
        children["runs"][0]["status"], "cancelled",
        "the child went with its parent"
    );
    let cancelled = aiki(&f.url, &["runs", "result", &f.parent.to_string()]);
    assert!(cancelled.failed(4).contains("ended `cancelled`"));
    // An action the run's status does not allow.
    let refused = aiki(&f.url, &["runs", "requeue", &f.done.to_string()]);
    let line = refused.failed(1);
    assert!(
        line.starts_with("error: ") && line.contains("requeue"),
        "{line}"
    );
    // Counts by status per version.
    let workflows = aiki(&f.url, &["workflows", "-o", "json"]).json();
    let done = workflows
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["workflow"] == "cli-done")
        .expect("cli-done is listed");
    assert_eq!(done["by_status"]["completed"], 1);
}

async fn bad_input_gets_one_line_and_an_exit_code(backend: Backend) {
    let f = fixture(backend).await;
    let malformed = aiki(&f.url, &["runs", "show", "not-a-run"]);
    assert!(malformed.failed(2).contains("`not-a-run` is not a run id"));
    let unknown = aiki(&f.url, &["runs", "show", &RunId::new().to_string()]);
    assert!(
        unknown.failed(1).contains("not found"),
        "{}",
        unknown.stderr
    );
    let status = aiki(&f.url, &["runs", "list", "--status", "sleepy"]);
    assert!(status.failed(2).contains("unknown run status `sleepy`"));
    let cursor = aiki(&f.url, &["runs", "list", "--after", "yesterday"]);
    assert!(cursor.failed(2).contains("is not a page cursor"));
    let duration = aiki(&f.url, &["runs", "list", "--since", "a while"]);
    assert!(duration.failed(2).contains("is not a duration"));
    let flag = aiki(&f.url, &["runs", "list", "--colour"]);
    flag.failed(2);
    for (args, says) in [
        (&["runs", "list", "-o", "xml"][..], "invalid value 'xml'"),
        (
            &["runs", "list", "--limit", "0"][..],
            "0 is not in 1..=1000",
        ),
        (
            &["runs", "list", "--limit", "lots"][..],
            "invalid value 'lots'",
        ),
        (
            &["runs", "list", "--parent", "mom"][..],
            "`mom` is not a run id",
        ),
        (
            &["runs", "result", &f.done.to_string(), "--timeout", "soon"][..],
            "is not a duration",
        ),
    ] {
        let refused = aiki(&f.url, args);
        assert!(
            refused.failed(2).contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
    let none = aiki(&f.url, &[]);
    assert!(
        none.failed(2).contains("requires a subcommand"),
        "{}",
        none.stderr
    );
    let half = aiki(&f.url, &["runs"]);
    assert!(
        half.failed(2).contains("requires a subcommand"),
        "{}",
        half.stderr
    );
    let secret = aiki(
        "postgres://app:s3cr3t@127.0.0.1:1/x?aiki_nonsense=1",
        &["workflows"],
    );
    let line = secret.failed(1);
    assert!(
        line.contains("aiki_nonsense") && !line.contains("s3cr3t"),
        "{line}"
    );
    // A password given in the query, and one in the listen URL a parameter carries.
    let in_the_query = aiki(
        "postgres://app@127.0.0.1:1/x?password=s3cr3t&aiki_listen_url=\
         postgres%3A%2F%2Fapp%3Al1st3n%40127.0.0.1%3A1%2Fx&aiki_nonsense=1",
        &["workflows"],
    );
    let line = in_the_query.failed(1);
    assert!(
        line.contains("aiki_nonsense")
            && line.contains("password=***")
            && !line.contains("s3cr3t")
            && !line.contains("l1st3n"),
        "{line}"
    );
    let nothing = Command::new(env!("CARGO_BIN_EXE_aiki"))
        .env_remove("AIKI_URL")
        .args(["workflows"])
        .output()
        .unwrap();
    assert_eq!(nothing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("AIKI_URL"));
    // A store that does not answer has its own exit code: trying again later may work.
    let unreachable = aiki("postgres://nobody@127.0.0.1:1/none", &["workflows"]);
    assert!(
        unreachable.failed(7).contains("unavailable"),
        "{}",
        unreachable.stderr
    );
    // An aiki server that does not answer is named as such, not as a database.
    let server_down = aiki("http://127.0.0.1:1", &["runs", "list"]);
    let line = server_down.failed(7);
    assert!(
        line.contains("the aiki server at http://127.0.0.1:1 did not answer")
            && !line.contains("database"),
        "{line}"
    );
    let missing = aiki("sqlite:///nonexistent-folder/x.db", &["runs", "list"]);
    missing.failed(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_creates_the_schema_that_check_mode_needs() {
    let dir = std::env::temp_dir().join(format!("aiki-cli-{}", RunId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("fresh.db").display());
    let before = aiki(&url, &["runs", "list"]);
    assert!(
        before.failed(1).contains("aiki migrate"),
        "{}",
        before.stderr
    );
    let migrated = aiki(&url, &["migrate", "-o", "table"]);
    assert_eq!(migrated.code, 0, "{}", migrated.stderr);
    assert!(migrated.stdout.contains("up to date"));
    let after = aiki(&url, &["runs", "list", "-o", "json"]).json();
    assert_eq!(after["runs"], serde_json::json!([]));
    let _ = std::fs::remove_dir_all(dir);
}

aiki_tests::on_sql_backends!(
    lists_filters_and_pages,
    shows_what_each_run_does,
    acts_waits_and_says_how_runs_ended,
    bad_input_gets_one_line_and_an_exit_code,
);
