//! `--impact`: the pre-deploy impact check over 10,000 in-flight runs of 10 recorded tasks each
//! (500 with `--quick`), runs checked per second, beside the store's own read rate of the same
//! histories (`ExecutorStore::load_history` for every run, as concurrently as the check reads them):
//! the check reads each history once and replays it, so the read rate is its ceiling.

use std::time::{Duration, Instant};

use aiki::impact::{CheckOptions, Verdict};
use aiki::{Client, Run, RunStatus, TaskError, Worker, WorkflowError};
use serde_json::{Value, json};

/// Returns its input + 1.
#[aiki::task(name = "impact-bench-step")]
async fn step(i: u64) -> Result<u64, TaskError> {
    Ok(i + 1)
}

/// Ten recorded tasks, then a wait: what the check finds in flight.
#[aiki::workflow(name = "impact-bench", version = "1", events(proceed))]
async fn ten_then_wait(run: &Run, start: u64) -> Result<u64, WorkflowError> {
    let mut value = start;
    for _ in 0..10 {
        value = Step.start(run, value).await?;
    }
    run.events().proceed().wait().await?;
    Ok(value)
}

/// Runs checked at once, and histories read at once for the raw rate.
const CONCURRENCY: usize = 16;

pub(crate) async fn measure(url: &str, runs: u64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let client = Client::new(store.clone());
    let filling = Instant::now();
    let worker = Worker::builder(store.clone())
        .register(TenThenWait)
        .max_concurrent_runs(200)
        .build()?
        .start();
    let mut ids = Vec::with_capacity(runs as usize);
    for i in 0..runs {
        ids.push(client.start::<TenThenWait>(i).await?.id());
    }
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let counts = store.run_counts().await?;
        let waiting: u64 = counts
            .iter()
            .flat_map(|c| c.by_status.iter())
            .filter(|(status, _)| *status == RunStatus::AwaitingEvent)
            .map(|(_, n)| *n)
            .sum();
        if waiting >= runs {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the runs never all waited");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    worker.shutdown().await;
    let fill_seconds = filling.elapsed().as_secs_f64();

    // The store's read rate of the same histories.
    let reading = Instant::now();
    for chunk in ids.chunks(CONCURRENCY) {
        let read =
            futures_util::future::join_all(chunk.iter().map(|id| store.load_history(*id))).await;
        for history in read {
            anyhow::ensure!(history?.entries.len() == 10, "a run without its 10 entries");
        }
    }
    let read_seconds = reading.elapsed().as_secs_f64();

    // The check, against the same build: every run is safe (it replays its ten tasks, then
    // looks past the wait and completes).
    let build = aiki::Registry::builder().register(TenThenWait).build()?;
    let client = aiki::Client::new(store.clone());
    let checking = Instant::now();
    let options = CheckOptions::default().concurrency(CONCURRENCY);
    let report = aiki::impact::check(&build, &client, &options).await?;
    let check_seconds = checking.elapsed().as_secs_f64();
    anyhow::ensure!(report.runs.len() as u64 == runs, "the check missed runs");
    anyhow::ensure!(
        report.runs.iter().all(|run| run.verdict == Verdict::Safe),
        "an unchanged build found unsafe"
    );
    Ok(json!({
        "runs": runs,
        "tasks_per_run": 10,
        "fill_seconds": fill_seconds,
        "check_runs_per_second": runs as f64 / check_seconds,
        "load_history_per_second": runs as f64 / read_seconds,
        "check_seconds": check_seconds,
        "read_seconds": read_seconds,
    }))
}

pub(crate) fn print(backend: &str, result: &Value) {
    println!(
        "  {backend:<8} impact check of {} runs x {} recorded tasks: {:>8.0} runs/s  \
         (the store's load_history: {:>8.0} histories/s; check / read = {:.2}; filled in {:.1} s)",
        result["runs"],
        result["tasks_per_run"],
        result["check_runs_per_second"].as_f64().unwrap_or(0.0),
        result["load_history_per_second"].as_f64().unwrap_or(0.0),
        result["check_runs_per_second"].as_f64().unwrap_or(0.0)
            / result["load_history_per_second"].as_f64().unwrap_or(1.0),
        result["fill_seconds"].as_f64().unwrap_or(0.0),
    );
}
