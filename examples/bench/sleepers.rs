//! `--scale`, sleeping runs: N runs (100,000; 10,000 with `--quick`) started by the client, each
//! a workflow sleeping an hour, with one worker process (`--sleep-worker <url>`, the default
//! settings). Its resident memory (`VmRSS` in `/proc/<pid>/status`) idle before any run,
//! then once every run sleeps; then that process stops and a fresh one starts with the N runs
//! asleep in the store (what suspended runs cost a worker that did not suspend them itself,
//! its allocator holding nothing back from the work). Then their timers come due at once: the
//! bench moves every sleep's recorded end (`aiki_sleeps.wake_at`) and its run's `due_at` to now
//! in one transaction, as if the clock had reached them, and the fresh worker's daemons wake
//! them; the rate from the first wake (the first `sleeping` → `queued` in the timeline) to the
//! last completion, both by the store's times, and the worker's peak memory (`VmHWM`) by then.
//! The first wake's delay is given from the due time and from the update's commit, since the
//! update of 100,000 rows takes seconds of its own.

use std::time::{Duration, Instant};

use aiki::{Client, Namespace, Run, RunStatus, Worker, WorkflowError};
use serde_json::{Value, json};

/// How long each run sleeps: longer than the bench, which brings the timers due itself.
const NAP: Duration = Duration::from_secs(3600);

/// Starts in flight at once.
const STARTS_IN_FLIGHT: usize = 16;

/// Sleeps an hour.
#[aiki::workflow(name = "bench-doze", version = "1")]
async fn doze(run: &Run, _x: u64) -> Result<(), WorkflowError> {
    run.sleep("doze", NAP).await?;
    Ok(())
}

/// `--sleep-worker <url>`: serves `bench-doze` until stdin closes.
pub(crate) async fn worker_process(url: String) -> anyhow::Result<()> {
    let store = aiki::store::connect(&url).await?;
    let worker = Worker::builder(store).register(Doze).build()?.start();
    super::serve(worker).await;
    Ok(())
}

/// A line of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
fn memory(process: &super::WorkerProcess, key: &str) -> Option<u64> {
    let pid = process.child.id()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// How many `bench-doze` runs are in `status`; fails if any failed.
async fn count(store: &aiki::BoxStore, status: RunStatus) -> anyhow::Result<u64> {
    let namespace = Namespace::new("bench-doze", "1");
    let counts = store.run_counts().await?;
    let Some(counts) = counts.iter().find(|c| c.namespace == namespace) else {
        return Ok(0);
    };
    let of = |wanted: RunStatus| {
        counts
            .by_status
            .iter()
            .find(|(status, _)| *status == wanted)
            .map_or(0, |(_, n)| *n)
    };
    anyhow::ensure!(of(RunStatus::Failed) == 0, "bench-doze runs failed");
    Ok(of(status))
}

/// Waits until `n` runs are in `status`, looking every `every`; returns when it saw them.
async fn until_all(
    store: &aiki::BoxStore,
    status: RunStatus,
    n: u64,
    every: Duration,
) -> anyhow::Result<Instant> {
    let bar = indicatif::ProgressBar::new(n).with_message(format!("{status}"));
    let deadline = Instant::now() + Duration::from_secs(3600);
    loop {
        let seen = count(store, status).await?;
        bar.set_position(seen);
        if seen >= n {
            bar.finish_and_clear();
            return Ok(Instant::now());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{seen} of {n} runs {status} after an hour"
        );
        tokio::time::sleep(every).await;
    }
}

/// The measure on the fresh store behind `url`, with `n` sleeping runs.
pub(crate) async fn measure(url: &str, n: u64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let settle = Duration::from_secs(2);
    let worker = super::WorkerProcess::start_with(&["--sleep-worker", url], false).await?;
    tokio::time::sleep(settle).await;
    let idle = memory(&worker, "VmRSS:");
    let client = Client::new(store.clone());
    let clock = Instant::now();
    let ids: Vec<u64> = (0..n).collect();
    for chunk in ids.chunks(STARTS_IN_FLIGHT) {
        let starts = chunk.iter().map(|&i| client.start::<Doze>(i).into_future());
        for started in futures_util::future::join_all(starts).await {
            started?;
        }
    }
    let started = clock.elapsed();
    let asleep = until_all(&store, RunStatus::Sleeping, n, Duration::from_millis(500)).await?;
    let suspended_in = asleep - clock;
    tokio::time::sleep(settle).await;
    let after_suspending = memory(&worker, "VmRSS:");
    worker.stop().await;
    let fresh = super::WorkerProcess::start_with(&["--sleep-worker", url], false).await?;
    tokio::time::sleep(settle).await;
    let fresh_asleep = memory(&fresh, "VmRSS:");
    // The timers come due: now, for every sleep at once.
    let due = super::now_ms();
    let mut raw = super::seed::Raw::open(url).await?;
    let touched = raw
        .transaction(&[
            format!(
                "UPDATE aiki_sleeps SET wake_at = {due} WHERE run_id IN \
                 (SELECT id FROM aiki_runs WHERE status = 'sleeping')"
            ),
            format!("UPDATE aiki_runs SET due_at = {due} WHERE status = 'sleeping'"),
        ])
        .await?;
    let committed = super::now_ms();
    let moved = touched.last().copied().unwrap_or(0);
    anyhow::ensure!(moved == n, "{moved} of {n} runs brought due");
    until_all(&store, RunStatus::Completed, n, Duration::from_millis(100)).await?;
    let peak = memory(&fresh, "VmHWM:");
    let after_waking = memory(&fresh, "VmRSS:");
    fresh.stop().await;
    let first_wake = raw
        .scalar("SELECT min(at) FROM aiki_timeline WHERE from_status = 'sleeping'")
        .await?
        .unwrap_or(due);
    let last = raw
        .scalar("SELECT max(updated_at) FROM aiki_runs WHERE status = 'completed'")
        .await?
        .unwrap_or(due);
    raw.close().await;
    let seconds = (last - first_wake).max(1) as f64 / 1000.0;
    Ok(json!({
        "runs": n,
        "starts_per_s": n as f64 / started.as_secs_f64(),
        "suspended_per_s": n as f64 / suspended_in.as_secs_f64(),
        "idle_rss_bytes": idle,
        "rss_after_suspending_bytes": after_suspending,
        "fresh_worker_rss_bytes": fresh_asleep,
        "fresh_worker_peak_rss_bytes": peak,
        "fresh_worker_rss_after_waking_bytes": after_waking,
        "bring_due_ms": committed - due,
        "due_to_first_wake_ms": first_wake - due,
        "committed_to_first_wake_ms": first_wake - committed,
        "wake_seconds": seconds,
        "woken_and_completed_per_s": n as f64 / seconds,
    }))
}

/// Prints the row.
pub(crate) fn print(backend: &str, result: &Value) {
    let mb = |key: &str| {
        result[key]
            .as_f64()
            .map_or_else(|| "n/a".to_owned(), |b| format!("{:.1} MB", b / 1e6))
    };
    let f = |key: &str| result[key].as_f64().unwrap_or(f64::NAN);
    println!(
        "  {backend:<8} {} runs sleeping at once, 1 worker process: RSS idle {}, once all sleep {} \
         (the process that suspended them), a fresh process with them all asleep {} (peak {} \
         while waking them, {} after); started {:.0}/s, all asleep at {:.0}/s",
        result["runs"],
        mb("idle_rss_bytes"),
        mb("rss_after_suspending_bytes"),
        mb("fresh_worker_rss_bytes"),
        mb("fresh_worker_peak_rss_bytes"),
        mb("fresh_worker_rss_after_waking_bytes"),
        f("starts_per_s"),
        f("suspended_per_s"),
    );
    println!(
        "  {backend:<8} their timers due at once: woken and completed {:.0} runs/s (first wake \
         {:.0} ms after due: the bench's update bringing them due took {:.0} ms, the first wake \
         came {:.0} ms after it committed; last completion {:.1} s after the first wake)",
        f("woken_and_completed_per_s"),
        f("due_to_first_wake_ms"),
        f("bring_due_ms"),
        f("committed_to_first_wake_ms"),
        f("wake_seconds"),
    );
}
