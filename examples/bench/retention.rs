//! `--scale`, retention: a store seeded with ended runs (200,000; 50,000 with `--quick`), each
//! with ten task entries and three timeline rows, ended between 30 days and 2 h ago (see
//! `seed.rs`). The throughput workload (N runs of 10 sequential tasks, one worker process) is
//! timed without a purge; then the purge alone for a few seconds or half of the seeded runs,
//! whichever ends first (the other half is left for the next part); then the workload again
//! with this process purging meanwhile, as `aiki runs purge` does: `Sweeper::purge_runs` under
//! a lease of its own (`bench-purge`), batches of 500 runs ended before now (so at least an hour
//! ago, the store's minimum age), each followed by a pause as long as it took (back to back,
//! the batches kept SQLite's one writer from the workload's writes past their busy timeout),
//! until the workload's last run completed.
//! Runs purged per second (and each batch's p50 and p99), and the worker's steps/s beside the
//! same store's without the purge.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aiki::store::PurgeRuns;
use aiki::{BoxStore, Client};
use anyhow::Context as _;
use serde_json::{Value, json};

/// The purge's lease, renewed when half of it is left.
const LEASE_TTL_MS: i64 = 60_000;
/// Runs per purge batch.
const BATCH: u32 = 500;
/// Task entries per seeded run.
const ENTRIES: i64 = 10;

/// Purges batch after batch until `stop` is set, `budget` ran out, `cap` runs are purged or
/// nothing is left; `paced`, with a pause as long as each batch took after it, as `aiki runs
/// purge` does.
async fn purge(
    store: BoxStore,
    stop: Arc<AtomicBool>,
    budget: Option<Duration>,
    cap: Option<usize>,
    paced: bool,
) -> anyhow::Result<Value> {
    let holder = "bench";
    let mut lease = store
        .acquire_lease("bench-purge", holder, LEASE_TTL_MS, super::now_ms())
        .await?;
    anyhow::ensure!(
        lease.holder == holder,
        "the purge lease is held by {}",
        lease.holder
    );
    let clock = Instant::now();
    let (mut purged, mut batches, mut exhausted, mut busy) = (0, Vec::new(), false, 0u64);
    while !stop.load(Ordering::Relaxed)
        && budget.is_none_or(|budget| clock.elapsed() < budget)
        && cap.is_none_or(|cap| purged < cap)
    {
        let now = super::now_ms();
        if lease.expires_at - now < LEASE_TTL_MS / 2 {
            lease = store
                .acquire_lease("bench-purge", holder, LEASE_TTL_MS, now)
                .await?;
            anyhow::ensure!(lease.holder == holder, "the purge lease was lost");
        }
        let batch = Instant::now();
        let ids = match store
            .purge_runs(&lease, now, PurgeRuns::new(now).limit(limit(purged, cap)))
            .await
        {
            Ok(ids) => ids,
            // SQLite's write lock not had within the busy timeout (the workers hold it in
            // turn): the daemons try again at their next pass; so does this loop.
            Err(error) if error.is_transient() => {
                busy += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        let took = batch.elapsed();
        batches.push(took.as_secs_f64() * 1000.0);
        purged += ids.len();
        if ids.is_empty() {
            exhausted = true;
            break;
        }
        if paced {
            tokio::time::sleep(took).await;
        }
    }
    let seconds = clock.elapsed().as_secs_f64();
    store.release_lease(&lease, super::now_ms()).await?;
    let batches = super::sorted(batches);
    Ok(json!({
        "runs": purged,
        "seconds": seconds,
        "runs_per_s": purged as f64 / seconds,
        "batches": batches.len(),
        "batch_p50_ms": super::percentile(&batches, 0.5),
        "batch_p99_ms": super::percentile(&batches, 0.99),
        "exhausted": exhausted,
        "capped": cap.is_some_and(|cap| purged >= cap),
        "busy": busy,
    }))
}

/// The next batch's size: [`BATCH`], or what is left of `cap`.
fn limit(purged: usize, cap: Option<usize>) -> u32 {
    cap.map_or(BATCH, |cap| {
        u32::try_from(cap.saturating_sub(purged)).map_or(BATCH, |left| left.min(BATCH))
    })
}

/// The throughput workload (one worker process), with this process purging meanwhile if
/// `purging`: the row, with the purge's figures under `purge`.
async fn workload(url: &str, runs: u64, purging: bool) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let process = super::WorkerProcess::start(url).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let purger = if purging {
        let store = aiki::store::connect(url).await?;
        Some(tokio::spawn(purge(store, stop.clone(), None, None, true)))
    } else {
        None
    };
    let bar = indicatif::ProgressBar::new(runs).with_message(if purging {
        "purging meanwhile"
    } else {
        "no purge"
    });
    let t0 = super::now_ms();
    let result = async {
        let handles = super::start_chains(&client, runs).await?;
        super::complete_chains(&handles, &bar).await
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    bar.finish_and_clear();
    let purged = match purger {
        Some(purger) => purger.await??,
        None => Value::Null,
    };
    process.stop().await;
    let seconds = ((result?.max(t0) - t0).max(1)) as f64 / 1000.0;
    Ok(json!({
        "runs": runs,
        "seconds": seconds,
        "steps_per_s": (runs * 10) as f64 / seconds,
        "purge": purged,
    }))
}

/// The measure on the fresh store behind `url`: `runs` runs of the workload, `seeded` ended
/// runs to purge, the purge alone for `alone` seconds and at most half of them, so that the
/// purge beside the workload has runs left to purge.
pub(crate) async fn measure(
    url: &str,
    runs: u64,
    seeded: i64,
    alone: f64,
) -> anyhow::Result<Value> {
    let seeding = super::seed::seed(url, seeded, ENTRIES).await?;
    let without = workload(url, runs, false)
        .await
        .context("the workload without a purge")?;
    let store = aiki::store::connect(url).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let half = usize::try_from(seeded / 2)?;
    let purge_alone = purge(
        store,
        stop,
        Some(Duration::from_secs_f64(alone)),
        Some(half),
        false,
    )
    .await?;
    let with = workload(url, runs, true)
        .await
        .context("the workload while purging")?;
    let during = with["purge"].clone();
    Ok(json!({
        "seeding": seeding,
        "workload_runs": runs,
        "without_purge_steps_per_s": without["steps_per_s"],
        "with_purge_steps_per_s": with["steps_per_s"],
        "steps_ratio": super::f(&with["steps_per_s"]) / super::f(&without["steps_per_s"]),
        "workload_seconds": with["seconds"],
        "purge_alone": purge_alone,
        "purge_during": during,
    }))
}

/// Prints the row.
pub(crate) fn print(backend: &str, result: &Value) {
    let f = super::f;
    let (alone, during) = (&result["purge_alone"], &result["purge_during"]);
    let exhausted = |purge: &Value| {
        if purge["exhausted"] == json!(true) {
            " (ran out of ended runs)"
        } else if purge["capped"] == json!(true) {
            " (stopped at half of them)"
        } else {
            ""
        }
    };
    println!(
        "  {backend:<8} retention, {} ended runs of {ENTRIES} entries: purge in batches of \
         {BATCH} alone {:.0} runs/s (batch p50 {:.0} ms, p99 {:.0} ms){}; paced (a pause as \
         long as each batch) while 1 worker process runs {} runs × 10 tasks {:.0} runs/s (batch p50 {:.0} ms, p99 {:.0} ms, {} \
         runs in {:.1} s, {} batches refused as busy){}",
        result["seeding"]["runs"],
        f(&alone["runs_per_s"]),
        f(&alone["batch_p50_ms"]),
        f(&alone["batch_p99_ms"]),
        exhausted(alone),
        result["workload_runs"],
        f(&during["runs_per_s"]),
        f(&during["batch_p50_ms"]),
        f(&during["batch_p99_ms"]),
        during["runs"],
        f(&during["seconds"]),
        during["busy"],
        exhausted(during),
    );
    println!(
        "  {backend:<8} retention: the worker meanwhile {:.0} steps/s, without the purge {:.0} \
         steps/s: {:.2} ×",
        f(&result["with_purge_steps_per_s"]),
        f(&result["without_purge_steps_per_s"]),
        f(&result["steps_ratio"]),
    );
}
