//! The worker processes the bench starts: this program re-executed with a mode.

use std::process::Stdio;
use std::time::Duration;

use aiki::{Worker, WorkerHandle};
use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use super::{Chain, ReplayV1, tracing_cost};

/// `--worker <url>`: serves the bench workflows until stdin closes.
pub(crate) async fn worker_process(url: String) -> anyhow::Result<()> {
    tracing_cost::install_if_asked();
    let store = aiki::store::connect(&url).await?;
    let worker = Worker::builder(store)
        .register(Chain)
        .register(ReplayV1)
        .poll_interval(Duration::from_millis(10))
        .build()?
        .start();
    serve(worker).await;
    Ok(())
}

/// Says `ready` and serves with `worker` until stdin closes (the parent says stop, or dies).
pub(crate) async fn serve(worker: WorkerHandle) {
    println!("ready");
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    worker.shutdown().await;
}

/// A worker process started by the bench.
pub(crate) struct WorkerProcess {
    pub(crate) child: tokio::process::Child,
    /// What it prints after `ready`.
    pub(crate) lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl WorkerProcess {
    /// Starts one and waits until it serves.
    pub(crate) async fn start(url: &str) -> anyhow::Result<WorkerProcess> {
        Self::start_traced(url, false).await
    }

    /// Starts one, with a subscriber recording at `info` if `traced`.
    pub(crate) async fn start_traced(url: &str, traced: bool) -> anyhow::Result<WorkerProcess> {
        Self::start_with(&["--worker", url], traced).await
    }

    /// Starts one with `args` (a mode, `--worker`, `--idle-worker` or `--remote-worker`, and
    /// its arguments).
    pub(crate) async fn start_with(args: &[&str], traced: bool) -> anyhow::Result<WorkerProcess> {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .args(args)
            .env(
                tracing_cost::TRACING_ENV,
                if traced { "info" } else { "none" },
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("worker stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
            Ok(Ok(Some(line))) if line == "ready" => Ok(WorkerProcess { child, lines }),
            other => anyhow::bail!("worker process did not get ready: {other:?}"),
        }
    }

    /// Closes its stdin and waits for it to shut down (killing it after 10 s).
    pub(crate) async fn stop(mut self) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
