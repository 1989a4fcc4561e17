//! The `aiki` binary as a process, against SQLite and PostgreSQL stores holding runs in every
//! state an operator looks at: its table and JSON output, its actions, its exit codes, and
//! its one-line errors on bad input.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::process::Command;
use std::time::Duration;

use aiki::{Client, NoInput, Run, RunId, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::Backend;
use serde_json::Value;

#[aiki::task(name = "cli-step")]
async fn cli_step(n: u32) -> Result<u32, TaskError> {
    Ok(n + 1)
}

#[aiki::task(name = "cli-broken")]
async fn cli_broken() -> Result<u32, TaskError> {
    Err(TaskError::new("the provider said no"))
}

#[aiki::workflow(name = "cli-done", version = "1")]
async fn cli_done(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    CliStep.start(run, n).await
}

#[aiki::workflow(name = "cli-fails", version = "1")]
async fn cli_fails(run: &Run) -> Result<u32, WorkflowError> {
    CliBroken.start(run).await
}

#[aiki::workflow(name = "cli-sleeps", version = "1")]
async fn cli_sleeps(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    let n = CliStep.start(run, n).await?;
    run.sleep("cool-down", Duration::from_secs(3 * 3600))
        .await?;
    Ok(n)
}

#[aiki::workflow(name = "cli-waits", version = "1", events(payment_received = u32))]
async fn cli_waits(run: &Run) -> Result<u32, WorkflowError> {
    run.events().payment_received().wait().await
}

/// No worker serves it.
#[aiki::workflow(name = "cli-unserved", version = "1")]
async fn cli_unserved(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

#[aiki::workflow(name = "cli-parent", version = "1")]
async fn cli_parent(run: &Run) -> Result<(), WorkflowError> {
    run.child::<CliUnserved>(NoInput)
        .start()
        .await?
        .wait()
        .await
}

/// The runs of one store, by what they do.
struct Fixture {
    url: String,
    done: RunId,
    failed: RunId,
    sleeping: RunId,
    waiting: RunId,
    queued: RunId,
    parent: RunId,
}

async fn fixture(backend: Backend) -> Fixture {
    let url = backend.fresh_url().await;
    let store = aiki::connect(&url).await.expect("the store opens");
    let worker = Worker::builder(store.clone())
        .register(CliDone)
        .register(CliFails)
        .register(CliSleeps)
        .register(CliWaits)
        .register(CliParent)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let patience = Duration::from_secs(30);
    let done = client.start::<CliDone>(1).await.unwrap();
    done.wait_for_status_timeout(RunStatus::Completed, patience)
        .await
        .unwrap();
    let failed = client.start::<CliFails>(NoInput).await.unwrap();
    failed
        .wait_for_status_timeout(RunStatus::Failed, patience)
        .await
        .unwrap();
    let sleeping = client
        .start::<CliSleeps>(1)
        .reference_id("order-7")
        .await
        .unwrap();
    sleeping
        .wait_for_status_timeout(RunStatus::Sleeping, patience)
        .await
        .unwrap();
    let waiting = client.start::<CliWaits>(NoInput).await.unwrap();
    waiting
        .wait_for_status_timeout(RunStatus::AwaitingEvent, patience)
        .await
        .unwrap();
    let queued = client.start::<CliUnserved>(NoInput).await.unwrap();
    let parent = client.start::<CliParent>(NoInput).await.unwrap();
    parent
        .wait_for_status_timeout(RunStatus::AwaitingChildWorkflow, patience)
        .await
        .unwrap();
    worker.shutdown().await;
    Fixture {
        url,
        done: done.id(),
        failed: failed.id(),
        sleeping: sleeping.id(),
        waiting: waiting.id(),
        queued: queued.id(),
        parent: parent.id(),
    }
}

/// What a run of the binary printed, and its exit code.
struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Output {
    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }

    /// A failure: the code, and one line on standard error, no panic.
    fn failed(&self, code: i32) -> &str {
        assert_eq!(
            self.code, code,
            "stdout: {} stderr: {}",
            self.stdout, self.stderr
        );
        assert_eq!(self.stderr.lines().count(), 1, "one line: {}", self.stderr);
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
        self.stderr.trim_end()
    }
}

fn aiki(url: &str, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_aiki"))
        .env("AIKI_URL", url)
        .env_remove("RUST_BACKTRACE")
        .args(args)
        .output()
        .expect("the binary runs");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `aiki runs COMMAND ID -o FORMAT`.
fn on(url: &str, command: &str, id: RunId, format: &str) -> Output {
    aiki(url, &["runs", command, &id.to_string(), "-o", format])
}

fn ids(list: &Value) -> Vec<String> {
    list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["id"].as_str().unwrap().to_owned())
        .collect()
}

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
    let children = aiki(
        &f.url,
        &[
            "runs",
            "list",
            "--parent",
            &f.parent.to_string(),
            "-o",
            "json",
        ],
    )
    .json();
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
        waiting.stdout.contains("waiting on an event"),
        "{}",
        waiting.stdout
    );
    let parent = show(f.parent);
    println!("{}", parent.stdout);
    assert!(
        parent.stdout.contains("waiting on child runs:"),
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
            .contains("waiting for a worker serving cli-unserved@1 in pool `default`"),
        "{}",
        queued.stdout
    );
    let failed = on(&f.url, "show", f.failed, "json").json();
    assert_eq!(failed["run"]["status"], "failed");
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
        resumed.stdout.contains("is now scheduled"),
        "{}",
        resumed.stdout
    );
    let woken = on(&f.url, "wake", f.sleeping, "json").json();
    assert_eq!(woken["status"], "scheduled");
    let cancelled = on(&f.url, "cancel", f.parent, "json").json();
    assert_eq!(cancelled["status"], "cancelled");
    let children = aiki(
        &f.url,
        &[
            "runs",
            "list",
            "--parent",
            &f.parent.to_string(),
            "-o",
            "json",
        ],
    )
    .json();
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
    let nothing = Command::new(env!("CARGO_BIN_EXE_aiki"))
        .env_remove("AIKI_URL")
        .args(["workflows"])
        .output()
        .unwrap();
    assert_eq!(nothing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("AIKI_URL"));
    let unreachable = aiki("postgres://nobody@127.0.0.1:1/none", &["workflows"]);
    assert!(
        unreachable.failed(1).contains("unavailable"),
        "{}",
        unreachable.stderr
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
    let migrated = aiki(&url, &["migrate"]);
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
