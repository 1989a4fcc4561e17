//! Bulk actions a Ctrl-C cannot make silent: each outcome printed as it happens, SIGINT stops
//! the action between runs (those in flight finish), and a summary always says how many were
//! done, skipped, failed and not attempted, as the store has them. A store that refuses every
//! write (a read-only role) is reported once, not once per run.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::Duration;

use aiki::{Client, NoInput};
use aiki_tests::Backend;
use serde_json::Value;

use crate::support::{CliUnserved, aiki, command, ids};

/// How many runs the interrupted actions work on.
const RUNS: usize = 300;

/// What an interrupted run of the binary printed.
struct Interrupted {
    code: Option<i32>,
    lines: Vec<String>,
    stderr: String,
}

/// Runs `aiki ARGS`, and sends it SIGINT once it has printed `lines` lines and `acting` says
/// it acts (for `-o json`, which prints nothing before it ends).
fn interrupt(url: &str, args: &[&str], lines: usize, acting: impl Fn() -> bool) -> Interrupted {
    let mut child = command(url)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut printed = Vec::new();
    for _ in 0..lines {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "{printed:?}");
        printed.push(line.trim_end().to_owned());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !acting() {
        assert!(std::time::Instant::now() < deadline, "it never acted");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    for line in stdout.lines() {
        printed.push(line.unwrap());
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let code = child.wait().unwrap().code();
    Interrupted {
        code,
        lines: printed,
        stderr,
    }
}

/// The ids of the runs of `cli-unserved` in `status`.
fn in_status(url: &str, status: &str) -> HashSet<String> {
    let listed = aiki(
        url,
        &[
            "runs",
            "list",
            "--workflow",
            "cli-unserved",
            "--status",
            status,
            "--limit",
            "1000",
            "-o",
            "json",
        ],
    );
    ids(&listed.json()).into_iter().collect()
}

/// `RUNS` queued runs no worker serves.
async fn queued(backend: Backend, runs: usize) -> String {
    let url = backend.fresh_url().await;
    let client = Client::new(aiki::store::connect(&url).await.unwrap());
    for _ in 0..runs {
        client.start::<CliUnserved>(NoInput).await.unwrap();
    }
    url
}

async fn a_ctrl_c_stops_a_bulk_action_between_runs(backend: Backend) {
    let url = queued(backend, RUNS).await;
    let all = ["runs", "cancel", "--workflow", "cli-unserved", "--yes"];
    let cancel = [&all[..], &["--rate", "50"]].concat();

    // JSON lines: one per outcome as it happens, then the summary.
    let jsonl = interrupt(&url, &[&cancel[..], &["-o", "jsonl"]].concat(), 5, || true);
    assert_eq!(jsonl.code, Some(130), "{}", jsonl.stderr);
    assert_eq!(jsonl.stderr.lines().count(), 1, "{}", jsonl.stderr);
    assert!(jsonl.stderr.contains("interrupted: "), "{}", jsonl.stderr);
    let lines: Vec<Value> = jsonl
        .lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (summary, rows) = lines.split_last().unwrap();
    assert_eq!(summary["interrupted"], true, "{summary}");
    let done: HashSet<String> = rows
        .iter()
        .map(|row| {
            assert_eq!(
                (&row["outcome"], &row["status"]),
                (&"done".into(), &"cancelled".into())
            );
            row["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let not_attempted = summary["not_attempted"].as_u64().unwrap() as usize;
    assert_eq!(
        summary["done"].as_u64(),
        Some(done.len() as u64),
        "{summary}"
    );
    assert_eq!(
        (summary["skipped"].as_u64(), summary["failed"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(done.len() >= 5 && not_attempted > 0, "{summary}");
    assert_eq!(done.len() + not_attempted, RUNS, "{summary}");
    assert_eq!(
        in_status(&url, "cancelled"),
        done,
        "what was printed is what the store has"
    );
    assert_eq!(in_status(&url, "queued").len(), not_attempted);

    // A table: a row per outcome as it happens, and the summary line.
    let table = interrupt(&url, &[&cancel[..], &["-o", "table"]].concat(), 4, || true);
    assert_eq!(table.code, Some(130), "{}", table.stderr);
    let (last, rows) = table.lines.split_last().unwrap();
    assert!(
        rows[0].starts_with("ID") && rows[0].contains("OUTCOME"),
        "{:?}",
        table.lines
    );
    let rows = &rows[1..];
    assert!(
        rows.iter()
            .all(|row| row.contains(" done ") && row.ends_with("cancelled")),
        "{rows:?}"
    );
    let left = RUNS - done.len() - rows.len();
    assert_eq!(
        last,
        &format!(
            "cancel: {} done, 0 skipped, 0 failed, {left} not attempted (interrupted)",
            rows.len()
        )
    );
    assert!(left > 0);
    assert_eq!(in_status(&url, "cancelled").len(), done.len() + rows.len());

    // One document at the end, even when interrupted.
    let before = in_status(&url, "cancelled").len();
    let json = interrupt(
        &url,
        &[&cancel[..], &["-o", "json"]].concat(),
        0,
        // Once it has cancelled one more run, it listens for SIGINT.
        || in_status(&url, "cancelled").len() > before,
    );
    assert_eq!(json.code, Some(130), "{}", json.stderr);
    let document: Value = serde_json::from_str(&json.lines.join("\n")).unwrap();
    let results = document["results"].as_array().unwrap();
    assert_eq!(
        document["done"].as_u64(),
        Some(results.len() as u64),
        "{document}"
    );
    assert!(document["not_attempted"].as_u64() > Some(0), "{document}");
    assert_eq!(document["interrupted"], true);
    let cancelled = in_status(&url, "cancelled");
    assert!(
        results
            .iter()
            .all(|r| cancelled.contains(r["id"].as_str().unwrap()))
    );

    // Uninterrupted, the rest: every run, exit 0.
    let rest = aiki(
        &url,
        &[
            "runs",
            "cancel",
            "--workflow",
            "cli-unserved",
            "--yes",
            "-o",
            "jsonl",
        ],
    );
    assert_eq!(rest.code, 0, "{}", rest.stderr);
    let summary: Value = serde_json::from_str(rest.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        (
            summary["not_attempted"].as_u64(),
            summary["interrupted"].as_bool()
        ),
        (Some(0), Some(false))
    );
    assert_eq!(in_status(&url, "cancelled").len(), RUNS);

    // Bad input: one line, exit 2.
    for (args, says) in [
        ([&all[..], &["--rate", "0"]].concat(), "invalid value '0'"),
        (
            [&all[..4], &["--rate", "fast"]].concat(),
            "invalid value 'fast'",
        ),
    ] {
        let refused = aiki(&url, &args);
        assert!(
            refused.failed(2).contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
    let one = in_status(&url, "cancelled").into_iter().next().unwrap();
    let single = aiki(&url, &["runs", "cancel", &one, "--rate", "5"]);
    assert!(
        single.failed(2).contains("`--rate` paces"),
        "{}",
        single.stderr
    );
}

/// A role that may only read: the first write fails, the action stops there, and says why
/// once.
async fn a_store_that_refuses_every_write_is_reported_once() {
    let url = queued(Backend::Postgres, 30).await;
    let (reader, role) = aiki_tests::read_only_role(&url).await;
    let cancel = ["runs", "cancel", "--workflow", "cli-unserved", "--yes"];
    let table = aiki(&reader, &[&cancel[..], &["-o", "table"]].concat());
    println!("{}{}", table.stdout, table.stderr);
    let line = table.failed(1);
    assert!(
        line.contains("permission denied") && line.contains("29 run(s) not attempted"),
        "{line}"
    );
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "a header, one run, the summary: {lines:?}");
    assert!(
        lines[1].contains(" failed ") && !lines[1].contains("permission"),
        "{lines:?}"
    );
    assert_eq!(
        lines[2],
        "cancel: 0 done, 0 skipped, 1 failed, 29 not attempted (stopped at a failure of the \
         store, below)"
    );
    let jsonl = aiki(&reader, &[&cancel[..], &["-o", "jsonl"]].concat());
    jsonl.failed(1);
    let summary: Value = serde_json::from_str(jsonl.stdout.lines().last().unwrap()).unwrap();
    assert!(
        summary["error"]
            .as_str()
            .unwrap()
            .contains("permission denied"),
        "{summary}"
    );
    assert_eq!(jsonl.stdout.lines().count(), 2, "{}", jsonl.stdout);
    assert_eq!(in_status(&url, "queued").len(), 30, "nothing changed");
    aiki_tests::drop_role(&role).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_store_that_refuses_every_write_is_reported_once() {
    if aiki_tests::postgres_available().await {
        aiki_tests::bounded(a_store_that_refuses_every_write_is_reported_once()).await
    }
}

aiki_tests::on_sql_backends!(a_ctrl_c_stops_a_bulk_action_between_runs);
