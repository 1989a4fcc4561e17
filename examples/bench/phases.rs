//! The phases of a full run: throughput, statement accounting, fan-out, replay, recovery and latency.

use std::time::{Duration, Instant};

use aiki::{Client, RunHandle, RunRecord, RunStatus, Worker, Workflow};
use anyhow::Context as _;
use indicatif::ProgressBar;
use serde_json::{Value, json};

use super::{
    Chain, FanOut, Nap, One, ReplayV1, ReplayV1Go, ReplayV2, TASK_LOOPS, Waiter, WaiterGo,
    WorkerProcess, now_ms,
};

/// Polls a run every millisecond until it is in `status` (failing if it ends otherwise).
pub(crate) async fn wait_for<W: Workflow>(
    handle: &RunHandle<W>,
    status: RunStatus,
) -> anyhow::Result<RunRecord> {
    wait_polling(handle, status, Duration::from_millis(1)).await
}

/// [`wait_for`], reading the run every `interval`.
pub(crate) async fn wait_polling<W: Workflow>(
    handle: &RunHandle<W>,
    status: RunStatus,
    interval: Duration,
) -> anyhow::Result<RunRecord> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let run = handle.record().await?;
        if run.status == status {
            return Ok(run);
        }
        anyhow::ensure!(
            !run.status.is_terminal(),
            "run {} ended {} ({:?}) instead of reaching {status}",
            run.id,
            run.status,
            run.error
        );
        anyhow::ensure!(
            Instant::now() < deadline,
            "run {} is still {} after 120 s",
            run.id,
            run.status
        );
        tokio::time::sleep(interval).await;
    }
}

/// Phase 2: `runs` runs of ten tasks on `workers` worker processes.
pub(crate) async fn throughput(url: &str, runs: u64, workers: usize) -> anyhow::Result<Value> {
    throughput_traced(url, runs, workers, false).await
}

/// [`throughput`], the worker processes recording at `info` if `traced`.
pub(crate) async fn throughput_traced(
    url: &str,
    runs: u64,
    workers: usize,
    traced: bool,
) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?; // migrates before the workers start
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let mut processes = Vec::new();
    for _ in 0..workers {
        processes.push(WorkerProcess::start_traced(url, traced).await?);
    }
    let bar = ProgressBar::new(runs).with_message(format!("{workers} worker(s)"));
    let t0 = now_ms();
    let clock = Instant::now();
    let handles = start_chains(&client, runs).await?;
    let started_in = clock.elapsed();
    let last = complete_chains(&handles, &bar).await?.max(t0);
    bar.finish_and_clear();
    for process in processes {
        process.stop().await;
    }
    let seconds = ((last - t0).max(1)) as f64 / 1000.0;
    Ok(json!({
        "workers": workers,
        "runs": runs,
        "seconds": seconds,
        "start_seconds": started_in.as_secs_f64(),
        "runs_per_s": runs as f64 / seconds,
        "steps_per_s": (runs * 10) as f64 / seconds,
    }))
}

/// Starts `runs` `Chain` runs (inputs 0, 100, 200, …), [`STARTS_IN_FLIGHT`] at a time, as
/// several clients would.
pub(crate) async fn start_chains(
    client: &Client,
    runs: u64,
) -> anyhow::Result<Vec<RunHandle<Chain>>> {
    use futures_util::{StreamExt as _, TryStreamExt as _};
    futures_util::stream::iter(0..runs)
        .map(|i| client.start::<Chain>(i * 100).into_future())
        .buffered(STARTS_IN_FLIGHT)
        .map_err(anyhow::Error::from)
        .try_collect()
        .await
}

/// How many starts the throughput rows have in flight at once.
pub(crate) const STARTS_IN_FLIGHT: usize = 16;

/// Waits until every run [`start_chains`] started has completed with its output; returns when
/// the last one completed (by the store's clock).
pub(crate) async fn complete_chains(
    handles: &[RunHandle<Chain>],
    bar: &ProgressBar,
) -> anyhow::Result<i64> {
    let mut last = 0;
    for (i, handle) in handles.iter().enumerate() {
        let run = handle
            .wait_for_status_timeout(RunStatus::Completed, Duration::from_secs(300))
            .await?;
        anyhow::ensure!(
            run.output == Some(json!(i as u64 * 100 + 10)),
            "wrong output {:?}",
            run.output
        );
        last = last.max(run.updated_at);
        bar.set_position(i as u64 + 1);
    }
    Ok(last)
}

/// Opens the store behind `url` with its statement counter readable.
pub(crate) async fn counted_store(
    url: &str,
) -> anyhow::Result<(aiki::BoxStore, Box<dyn Fn() -> u64 + Send + Sync>)> {
    use std::sync::Arc;
    if url.starts_with("sqlite:") {
        let store = Arc::new(aiki::store::sqlite::SqliteStore::connect(url).await?);
        let counter = store.clone();
        Ok((store, Box::new(move || counter.statements())))
    } else {
        let store = Arc::new(aiki::store::postgres::PostgresStore::connect(url).await?);
        let counter = store.clone();
        Ok((store, Box::new(move || counter.statements())))
    }
}

/// Where the statements go: `runs` ten-task runs on an in-process worker, counting every
/// statement the store sends (each `BEGIN` and `COMMIT` included), then an idle second.
pub(crate) async fn accounting_phase(url: &str, runs: u64) -> anyhow::Result<Value> {
    let (store, statements) = counted_store(url).await?;
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(5));
    let before = statements();
    let mut handles = Vec::new();
    for i in 0..runs {
        handles.push(client.start::<Chain>(i * 100).await?);
    }
    let after_starts = statements();
    let clock = Instant::now();
    let worker = Worker::builder(store).register(Chain).build()?.start();
    // Watched through another store, so that the status reads are not counted.
    let watcher =
        Client::new(aiki::store::connect(url).await?).with_poll_interval(Duration::from_millis(5));
    for handle in &handles {
        watcher
            .handle::<Chain>(handle.id())
            .wait_for_status_timeout(RunStatus::Completed, Duration::from_secs(300))
            .await?;
    }
    let after_runs = statements();
    let executing = clock.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = statements() - after_runs;
    worker.shutdown().await;
    Ok(json!({
        "runs": runs,
        "statements_per_start": (after_starts - before) as f64 / runs as f64,
        "statements_per_step_executing": (after_runs - after_starts) as f64 / (runs * 10) as f64,
        "idle_worker_statements_per_s": idle,
        "in_process_steps_per_s": (runs * 10) as f64 / executing.as_secs_f64(),
        "statements_per_s": (after_runs - after_starts) as f64 / executing.as_secs_f64(),
    }))
}

/// Phase 3: one run starting `n` concurrent tasks, on an in-process worker.
pub(crate) async fn fan_out_phase(url: &str, n: u64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let worker = Worker::builder(store.clone())
        .register(FanOut)
        .build()?
        .start();
    let client = Client::new(store);
    let clock = Instant::now();
    let handle = client.start::<FanOut>(n).await?;
    let run = wait_for(&handle, RunStatus::Completed).await?;
    let wall = clock.elapsed();
    worker.shutdown().await;
    anyhow::ensure!(run.output == Some(json!(n * (n + 1) / 2)), "wrong sum");
    Ok(json!({
        "tasks": n,
        "wall_ms": wall.as_secs_f64() * 1000.0,
        "tasks_per_s": n as f64 / wall.as_secs_f64(),
    }))
}

/// Records a `bench-replay` run of `n` steps with an in-process worker, leaving it suspended
/// on `go`. Returns its handle and the time the recording execution spent in its tasks.
pub(crate) async fn record_replay_run(
    store: &aiki::BoxStore,
    client: &Client,
    n: u64,
) -> anyhow::Result<(RunHandle<ReplayV1>, Duration)> {
    let worker = Worker::builder(store.clone())
        .register(ReplayV1)
        .build()?
        .start();
    let before = TASK_LOOPS.lock().expect("not poisoned").len();
    let bar = ProgressBar::new_spinner().with_message(format!("recording {n} tasks"));
    bar.enable_steady_tick(Duration::from_millis(100));
    let handle = client.start::<ReplayV1>(n).await?;
    wait_for(&handle, RunStatus::AwaitingEvent).await?;
    bar.finish_and_clear();
    worker.shutdown().await;
    let loops = TASK_LOOPS.lock().expect("not poisoned");
    anyhow::ensure!(loops.len() == before + 1, "one recording execution");
    Ok((handle, loops[before]))
}

/// Phase 4: replay of `n` recorded tasks on the memory store, with the same code (fast path)
/// or with the task's output type changed (validation).
pub(crate) async fn replay_phase(n: u64, changed: bool) -> anyhow::Result<Value> {
    let store = aiki::store::connect("memory:").await?;
    let client = Client::new(store.clone());
    let (handle, recorded) = record_replay_run(&store, &client, n).await?;
    let builder = Worker::builder(store.clone());
    let worker = if changed {
        builder.register(ReplayV2)
    } else {
        builder.register(ReplayV1)
    }
    .build()?
    .start();
    let before = TASK_LOOPS.lock().expect("not poisoned").len();
    handle.send::<ReplayV1Go>(()).await?;
    let done = wait_for(&handle, RunStatus::Completed).await?;
    let claimed = claimed_at(&store, &done).await?;
    worker.shutdown().await;
    anyhow::ensure!(done.output == Some(json!(n * (n - 1) / 2)), "wrong sum");
    let replayed = TASK_LOOPS.lock().expect("not poisoned")[before];
    Ok(json!({
        "tasks": n,
        "schema_changed": changed,
        "us_per_task": replayed.as_secs_f64() * 1e6 / n as f64,
        "replay_ms": replayed.as_secs_f64() * 1000.0,
        "claim_to_completed_ms": claimed.map(|at| done.updated_at - at),
        "recording_us_per_task": recorded.as_secs_f64() * 1e6 / n as f64,
    }))
}

/// When `run` was last claimed, by the store's clock (from its timeline, read once it has
/// ended, so that nothing polls the store while it runs); `None` if it never was.
pub(crate) async fn claimed_at(
    store: &aiki::BoxStore,
    run: &RunRecord,
) -> anyhow::Result<Option<i64>> {
    let timeline = store.timeline(run.id).await?;
    Ok(timeline
        .iter()
        .rev()
        .find(|change| change.to == RunStatus::Running)
        .map(|change| change.at))
}

/// Phase 5: a run with 1,000 recorded tasks, finished by a fresh worker process.
pub(crate) async fn recovery_phase(url: &str) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let client = Client::new(store.clone());
    let (handle, _) = record_replay_run(&store, &client, 1000).await?;
    handle.send::<ReplayV1Go>(()).await?;
    let spawned = now_ms();
    let process = WorkerProcess::start(url).await?;
    let ready = now_ms();
    // The figures are the store's times, so this process need not watch closely: read every
    // millisecond, it took a share of the two cores from the worker it measures.
    let done = wait_polling(&handle, RunStatus::Completed, Duration::from_millis(20)).await?;
    let claimed = claimed_at(&store, &done).await?;
    process.stop().await;
    Ok(json!({
        "tasks": 1000,
        "process_start_to_completed_ms": done.updated_at - spawned,
        "process_start_to_ready_ms": ready - spawned,
        "claim_to_completed_ms": claimed.map(|at| done.updated_at - at),
    }))
}

pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

pub(crate) fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// Phase 6: latencies on an in-process worker with the default settings.
pub(crate) async fn latency_phase(url: &str, runs: usize, wakes: usize) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let worker = Worker::builder(store.clone())
        .register(One)
        .register(Nap)
        .register(Waiter)
        .build()?
        .start();
    let client = Client::new(store);
    let bar = ProgressBar::new((runs + 2 * wakes) as u64).with_message("latency");
    let mut stored = Vec::new();
    let mut observed = Vec::new();
    for i in 0..runs {
        let clock = Instant::now();
        let handle = client.start::<One>(i as u64).await?;
        let run = wait_for(&handle, RunStatus::Completed).await?;
        observed.push(clock.elapsed().as_secs_f64() * 1000.0);
        stored.push((run.updated_at - run.created_at) as f64);
        bar.inc(1);
    }
    let mut timer = Vec::new();
    for i in 0..wakes {
        let handle = client.start::<Nap>(i as u64).await?;
        let sleeping = wait_for(&handle, RunStatus::Sleeping).await?;
        let due = sleeping.due_at.context("a sleeping run has a due time")?;
        let run = wait_for(&handle, RunStatus::Completed).await?;
        timer.push((run.updated_at - due) as f64);
        bar.inc(1);
    }
    let mut send = Vec::new();
    for i in 0..wakes {
        let handle = client.start::<Waiter>(i as u64).await?;
        wait_for(&handle, RunStatus::AwaitingEvent).await?;
        let sent = now_ms();
        handle.send::<WaiterGo>(()).await?;
        let run = wait_for(&handle, RunStatus::Completed).await?;
        send.push((run.updated_at - sent) as f64);
        bar.inc(1);
    }
    bar.finish_and_clear();
    worker.shutdown().await;
    let stored = sorted(stored);
    let observed = sorted(observed);
    Ok(json!({
        "runs": runs,
        "start_to_completed_p50_ms": percentile(&stored, 0.5),
        "start_to_completed_p99_ms": percentile(&stored, 0.99),
        "observed_p50_ms": percentile(&observed, 0.5),
        "observed_p99_ms": percentile(&observed, 0.99),
        "timer_wake_p50_ms": percentile(&sorted(timer), 0.5),
        "send_wake_p50_ms": percentile(&sorted(send), 0.5),
        "wake_runs": wakes,
    }))
}
