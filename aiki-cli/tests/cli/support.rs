//! The stores the CLI tests look at (runs in every state an operator meets) and running the
//! `aiki` binary as a process.

use std::process::Command;
use std::time::Duration;

use aiki::{Client, NoInput, Run, RunId, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::Backend;
use serde_json::Value;

#[aiki::task(name = "cli-step")]
pub(crate) async fn cli_step(n: u32) -> Result<u32, TaskError> {
    Ok(n + 1)
}

/// Its error holds what an outside system may send: a newline, and terminal escapes (a colour,
/// and a window title set by OSC ... BEL).
#[aiki::task(name = "cli-broken")]
async fn cli_broken() -> Result<u32, TaskError> {
    Err(TaskError::new(
        "the provider said no\n\x1b[31mHTTP 503\x1b[0m\x1b]0;pwned\x07",
    ))
}

#[aiki::workflow(name = "cli-done", version = "1")]
pub(crate) async fn cli_done(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    CliStep.start(run, n).await
}

#[aiki::workflow(name = "cli-fails", version = "1")]
pub(crate) async fn cli_fails(run: &Run) -> Result<u32, WorkflowError> {
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
pub(crate) async fn cli_waits(run: &Run) -> Result<u32, WorkflowError> {
    run.events().payment_received().wait().await
}

/// No worker serves it.
#[aiki::workflow(name = "cli-unserved", version = "1")]
pub(crate) async fn cli_unserved(_run: &Run) -> Result<(), WorkflowError> {
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
pub(crate) struct Fixture {
    pub(crate) url: String,
    pub(crate) done: RunId,
    pub(crate) failed: RunId,
    pub(crate) sleeping: RunId,
    pub(crate) waiting: RunId,
    pub(crate) queued: RunId,
    pub(crate) parent: RunId,
}

pub(crate) async fn fixture(backend: Backend) -> Fixture {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
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
pub(crate) struct Output {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Output {
    pub(crate) fn json(&self) -> Value {
        assert_eq!(self.code, 0, "stderr: {}", self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }

    /// A failure: the code, and one line on standard error, no panic.
    pub(crate) fn failed(&self, code: i32) -> &str {
        assert_eq!(
            self.code, code,
            "stdout: {} stderr: {}",
            self.stdout, self.stderr
        );
        assert_eq!(self.stderr.lines().count(), 1, "one line: {}", self.stderr);
        assert!(!self.stderr.contains("panicked at"), "{}", self.stderr);
        self.stderr.trim_end()
    }
}

/// `aiki ARGS` on the store at `url`, acting as `USER@HOST` of this machine (no `AIKI_ACTOR`).
pub(crate) fn aiki(url: &str, args: &[&str]) -> Output {
    aiki_with(url, args, &[])
}

/// The `aiki` binary on the store at `url`, without `AIKI_ACTOR` from the test's environment.
pub(crate) fn command(url: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_aiki"));
    command
        .env("AIKI_URL", url)
        .env_remove("RUST_BACKTRACE")
        .env_remove("AIKI_ACTOR");
    command
}

/// `aiki ARGS` with these environment variables set.
pub(crate) fn aiki_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = command(url);
    command.args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("the binary runs");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Whether `text` would make a terminal act (a control character other than a line's end).
pub(crate) fn has_control(text: &str) -> bool {
    text.chars().any(|c| c.is_control() && c != '\n')
}

/// `aiki runs COMMAND ID -o FORMAT`.
pub(crate) fn on(url: &str, command: &str, id: RunId, format: &str) -> Output {
    aiki(url, &["runs", command, &id.to_string(), "-o", format])
}

/// `aiki runs list --parent PARENT -o json`.
pub(crate) fn children_of(url: &str, parent: RunId) -> Value {
    aiki(
        url,
        &[
            "runs",
            "list",
            "--parent",
            &parent.to_string(),
            "-o",
            "json",
        ],
    )
    .json()
}

pub(crate) fn ids(list: &Value) -> Vec<String> {
    list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The version of workflow `name` in `aiki workflows -o json`.
pub(crate) fn workflow<'a>(workflows: &'a Value, name: &str) -> &'a Value {
    workflows
        .as_array()
        .expect("a list of versions")
        .iter()
        .find(|version| version["workflow"] == name)
        .unwrap_or_else(|| panic!("{name} in {workflows}"))
}
