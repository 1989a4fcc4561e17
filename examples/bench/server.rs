//! The server rows: the same work as the direct rows, through one in-process `aiki-server` on
//! the same store, with an API key: steps/s with 1 and 2 remote worker processes (executor role
//! over HTTP, long-polling claims), one-task start → completed p50/p99 with a remote worker,
//! and the long-poll wake-up (a run's start → its claim by a worker waiting on the server).

use std::sync::Arc;
use std::time::Duration;

use aiki::store::http::HttpStore;
use aiki::{Client, RunStatus, Worker, WorkerStore};
use anyhow::Context as _;
use serde_json::{Value, json};

use super::{Chain, One, WorkerProcess, now_ms, percentile, sorted, wait_for};

/// How long a remote worker's claim waits on the server for work.
const LONG_POLL: Duration = Duration::from_secs(5);

/// `--remote-worker <server url> <key>`: serves the bench workflows through the server until
/// stdin closes.
pub(crate) async fn worker_process(url: String, key: String) -> anyhow::Result<()> {
    let store = HttpStore::new(&url)?.with_key(key).long_poll(LONG_POLL);
    let worker = Worker::builder(WorkerStore::executor(Arc::new(store)))
        .register(Chain)
        .register(One)
        .poll_interval(Duration::from_millis(10))
        .build()?
        .start();
    super::serve(worker).await;
    Ok(())
}

async fn start_remote_worker(server: &str, key: &str) -> anyhow::Result<WorkerProcess> {
    WorkerProcess::start_with(&["--remote-worker", server, key], false).await
}

struct Served {
    url: String,
    key: String,
    task: tokio::task::JoinHandle<()>,
}

impl Served {
    async fn start(url: &str) -> anyhow::Result<Served> {
        let store = aiki::store::connect(url).await?;
        let key = aiki_server::keys::generate(
            "bench",
            vec![aiki::store::Scope::Executor, aiki::store::Scope::Operator],
            now_ms(),
        );
        store.create_key(key.record.clone()).await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let serving = aiki_server::serve(
            listener,
            store,
            aiki_server::ServerConfig::default(),
            std::future::pending(),
        );
        let task = tokio::spawn(async move {
            if let Err(error) = serving.await {
                eprintln!("the bench's server stopped: {error}");
            }
        });
        Ok(Served {
            url: format!("http://{address}"),
            key: key.token,
            task,
        })
    }

    /// A client through the server.
    fn client(&self) -> anyhow::Result<Client> {
        let store = HttpStore::new(&self.url)?.with_key(self.key.clone());
        Ok(Client::new(Arc::new(store)).with_poll_interval(Duration::from_millis(5)))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `runs` runs of ten tasks, started through the server, on `workers` remote worker
/// processes.
pub(crate) async fn throughput(url: &str, runs: u64, workers: usize) -> anyhow::Result<Value> {
    let served = Served::start(url).await?;
    let client = served.client()?;
    let mut processes = Vec::new();
    for _ in 0..workers {
        processes.push(start_remote_worker(&served.url, &served.key).await?);
    }
    let t0 = now_ms();
    let handles = super::start_chains(&client, runs).await?;
    let started = now_ms();
    let last = super::complete_chains(&handles, &indicatif::ProgressBar::hidden())
        .await?
        .max(t0);
    for process in processes {
        process.stop().await;
    }
    let seconds = ((last - t0).max(1)) as f64 / 1000.0;
    Ok(json!({
        "workers": workers,
        "runs": runs,
        "seconds": seconds,
        "steps_per_s": (runs * 10) as f64 / seconds,
        "start_seconds": (started - t0) as f64 / 1000.0,
    }))
}

/// One-task runs started through the server, one at a time, on a remote worker that waits on
/// the server for work: start → completed (stored times) and start → claimed (the long-poll
/// wake-up), p50 and p99.
pub(crate) async fn latency(url: &str, runs: usize) -> anyhow::Result<Value> {
    let served = Served::start(url).await?;
    let client = served.client()?;
    let process = start_remote_worker(&served.url, &served.key).await?;
    let mut completed = Vec::new();
    let mut claimed = Vec::new();
    for i in 0..runs {
        let handle = client.start::<One>(i as u64).await?;
        let run = wait_for(&handle, RunStatus::Completed).await?;
        completed.push((run.updated_at - run.created_at) as f64);
        let timeline = client.store().timeline(run.id).await?;
        let claim = timeline
            .iter()
            .find(|change| change.to == RunStatus::Running)
            .context("a completed run was claimed")?;
        claimed.push((claim.at - run.created_at) as f64);
    }
    process.stop().await;
    let (completed, claimed) = (sorted(completed), sorted(claimed));
    Ok(json!({
        "runs": runs,
        "start_to_completed_p50_ms": percentile(&completed, 0.5),
        "start_to_completed_p99_ms": percentile(&completed, 0.99),
        "start_to_claimed_p50_ms": percentile(&claimed, 0.5),
        "start_to_claimed_p99_ms": percentile(&claimed, 0.99),
    }))
}
