//! `--scale`: what the work costs as the store grows (issue 25), each figure beside its
//! small-store baseline from the same run.
//!
//! * **a million finished runs**: the throughput row (N runs of 10 sequential tasks, one worker
//!   process; N = 1,000, 100 with `--quick`) and one-task start → completed latency (p50, p99,
//!   an in-process worker) on an empty store and on one seeded with 1,000,000 finished runs of
//!   another workflow (100,000 with `--quick`; see `seed.rs`: bulk SQL, every index kept, each
//!   run with its three timeline rows); the throughput rows interleaved, the median of three
//!   (one with `--quick`). Then reads on both: `list_runs`, a page of 50 newest first
//!   unfiltered and filtered by workflow version and status, and `changes_since`, a page of 100
//!   from the stream's start, from a cursor taken before the workload (`changes_since(start,
//!   0)`: a reader starting from now) and the page after that one (a reader following on).
//! * **sleeping runs** (see `sleepers.rs`): 100,000 runs (10,000) sleeping at once, one worker
//!   process: its memory, and the rate they are woken and completed when their timers come due.
//! * **retention** (see `retention.rs`): a purge of ended runs in batches of 500 while a worker
//!   process runs the throughput workload: runs purged per second, and its steps/s beside the
//!   same store's without the purge.

use std::time::Instant;

use aiki::RunStatus;
use aiki::store::{ChangeCursor, ListRuns, RunFilter};
use serde_json::{Value, json};

use super::{Backend, Options, Stores, f};

/// Samples per read figure.
const SAMPLES: usize = 100;

fn seeded_runs(options: &Options) -> i64 {
    if options.quick { 100_000 } else { 1_000_000 }
}

fn sleeping_runs(options: &Options) -> u64 {
    if options.quick { 10_000 } else { 100_000 }
}

fn purgeable_runs(options: &Options) -> i64 {
    if options.quick { 50_000 } else { 200_000 }
}

fn repetitions(options: &Options) -> usize {
    if options.quick { 1 } else { 3 }
}

/// Every row of `--scale` on one backend.
pub(crate) async fn measure(backend: Backend, options: &Options) -> anyhow::Result<Value> {
    let mut stores = Stores::new(backend)?;
    let result = rows(&mut stores, options).await;
    stores.cleanup().await?;
    let mut result = result?;
    result["backend"] = json!(backend.name());
    Ok(result)
}

async fn rows(stores: &mut Stores, options: &Options) -> anyhow::Result<Value> {
    let name = stores.backend.name();
    let seeded_count = seeded_runs(options);
    let empty = stores.fresh_url("scaleempty").await?;
    let seeded = stores.fresh_url("scaleseeded").await?;
    eprintln!("[{name}] scale: seeding {seeded_count} finished runs");
    let seeding = super::seed::seed(&seeded, seeded_count, 0).await?;
    // Migrated by the connection.
    let empty_cursor = end_of_stream(&empty).await?;
    let seeded_cursor = end_of_stream(&seeded).await?;
    let (mut empty_rows, mut seeded_rows) = (Vec::new(), Vec::new());
    for repetition in 0..repetitions(options) {
        // Interleaved, each store first in turn.
        let mut order = [
            (&empty, &mut empty_rows, "empty store"),
            (&seeded, &mut seeded_rows, "seeded store"),
        ];
        if repetition % 2 == 1 {
            order.reverse();
        }
        for (url, rows, what) in order {
            eprintln!(
                "[{name}] scale: throughput on the {what}, {} runs x 10 tasks ({})",
                options.runs(),
                repetition + 1
            );
            rows.push(super::throughput(url, options.runs(), 1).await?);
        }
    }
    let mut sides = Vec::new();
    for (url, rows, cursor, what) in [
        (&empty, empty_rows, &empty_cursor, "empty store"),
        (&seeded, seeded_rows, &seeded_cursor, "seeded store"),
    ] {
        eprintln!("[{name}] scale: latency and reads on the {what}");
        let latency = super::latency_phase(url, options.latency_runs(), 0).await?;
        let steps = super::sorted(rows.iter().map(|row| f(&row["steps_per_s"])).collect());
        sides.push(json!({
            "steps_per_s": super::percentile(&steps, 0.5),
            "throughput": rows,
            "start_to_completed_p50_ms": latency["start_to_completed_p50_ms"],
            "start_to_completed_p99_ms": latency["start_to_completed_p99_ms"],
            "latency_runs": latency["runs"],
            "reads": reads(url, cursor).await?,
        }));
    }
    let [empty_side, seeded_side] = <[Value; 2]>::try_from(sides).expect("two sides");
    let ratio = |key: &str| f(&seeded_side[key]) / f(&empty_side[key]);
    let ratios = json!({
        "steps_per_s": ratio("steps_per_s"),
        "start_to_completed_p50_ms": ratio("start_to_completed_p50_ms"),
        "start_to_completed_p99_ms": ratio("start_to_completed_p99_ms"),
    });
    let url = stores.fresh_url("sleepers").await?;
    let count = sleeping_runs(options);
    eprintln!("[{name}] scale: {count} runs sleeping at once");
    let sleepers = super::sleepers::measure(&url, count).await?;
    let url = stores.fresh_url("retention").await?;
    eprintln!("[{name}] scale: retention");
    let retention = super::retention::measure(
        &url,
        options.runs(),
        purgeable_runs(options),
        if options.quick { 1.0 } else { 3.0 },
    )
    .await?;
    Ok(json!({
        "runs": options.runs(),
        "repetitions": repetitions(options),
        "seeding": seeding,
        "empty": empty_side,
        "seeded": seeded_side,
        "ratios": ratios,
        "sleepers": sleepers,
        "retention": retention,
    }))
}

/// A cursor at the end of the change stream now.
async fn end_of_stream(url: &str) -> anyhow::Result<ChangeCursor> {
    let store = aiki::store::connect(url).await?;
    Ok(store.changes_since(&ChangeCursor::start(), 0).await?.next)
}

/// p50 and p99, in ms, of `SAMPLES` calls of `call`.
async fn sample<T>(
    mut call: impl AsyncFnMut() -> Result<T, aiki::StoreError>,
) -> anyhow::Result<Value> {
    let mut ms = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let clock = Instant::now();
        call().await?;
        ms.push(clock.elapsed().as_secs_f64() * 1000.0);
    }
    let ms = super::sorted(ms);
    Ok(json!({
        "p50_ms": super::percentile(&ms, 0.5),
        "p99_ms": super::percentile(&ms, 0.99),
    }))
}

/// The reads: `list_runs` and `changes_since` pages.
async fn reads(url: &str, cursor: &ChangeCursor) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let newest = ListRuns::new(RunFilter::default(), 50);
    let chains = ListRuns::new(
        RunFilter::default()
            .workflow("bench-chain")
            .version("1")
            .status(RunStatus::Completed),
        50,
    );
    let start = ChangeCursor::start();
    let page = store.list_runs(chains.clone()).await?;
    anyhow::ensure!(page.runs.len() == 50, "a short page of bench-chain runs");
    let first = store.changes_since(cursor, 100).await?;
    anyhow::ensure!(first.changes.len() == 100, "a short page of changes");
    // Where a reader following the stream stands after that page.
    let next = first.next;
    anyhow::ensure!(
        !store.changes_since(&next, 100).await?.changes.is_empty(),
        "no second page of changes"
    );
    Ok(json!({
        "list_newest": sample(async || store.list_runs(newest.clone()).await).await?,
        "list_version_status": sample(async || store.list_runs(chains.clone()).await).await?,
        "changes_from_start": sample(async || store.changes_since(&start, 100).await).await?,
        "changes_after_cursor": sample(async || store.changes_since(cursor, 100).await).await?,
        "changes_next_page": sample(async || store.changes_since(&next, 100).await).await?,
    }))
}

fn ms(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0} ms"))
}

/// Prints one backend's rows.
pub(crate) fn print(backend: &str, result: &Value) {
    let (empty, seeded, ratios) = (&result["empty"], &result["seeded"], &result["ratios"]);
    let seeding = &result["seeding"];
    println!(
        "  {backend:<8} seeded {} finished runs (3 timeline rows each) by bulk SQL in {:.1} s \
         ({:.0} runs/s); store {:.0} MB",
        seeding["runs"],
        f(&seeding["seconds"]),
        f(&seeding["runs_per_s"]),
        f(&seeding["store_bytes"]) / 1e6,
    );
    println!(
        "  {backend:<8} throughput, 1 worker process, {} runs × 10 tasks (median of {}): empty \
         store {:.0} steps/s; with {} finished runs {:.0} steps/s: {:.2} × (target ≥ 0.90)",
        result["runs"],
        result["repetitions"],
        f(&empty["steps_per_s"]),
        seeding["runs"],
        f(&seeded["steps_per_s"]),
        f(&ratios["steps_per_s"]),
    );
    println!(
        "  {backend:<8} one-task start → completed ({} runs), empty / seeded: p50 {} / {} \
         ({:.2} ×), p99 {} / {} ({:.2} ×)",
        empty["latency_runs"],
        ms(&empty["start_to_completed_p50_ms"]),
        ms(&seeded["start_to_completed_p50_ms"]),
        f(&ratios["start_to_completed_p50_ms"]),
        ms(&empty["start_to_completed_p99_ms"]),
        ms(&seeded["start_to_completed_p99_ms"]),
        f(&ratios["start_to_completed_p99_ms"]),
    );
    for (what, key) in [
        ("list_runs, 50 newest", "list_newest"),
        ("list_runs, 50 of a version + status", "list_version_status"),
        ("changes_since, 100 from the start", "changes_from_start"),
        (
            "changes_since, 100 after a limit-0 cursor",
            "changes_after_cursor",
        ),
        ("changes_since, the next 100", "changes_next_page"),
    ] {
        let (e, s) = (&empty["reads"][key], &seeded["reads"][key]);
        println!(
            "  {backend:<8} {what:<42} empty / seeded: p50 {:.2} / {:.2} ms, p99 {:.2} / {:.2} ms",
            f(&e["p50_ms"]),
            f(&s["p50_ms"]),
            f(&e["p99_ms"]),
            f(&s["p99_ms"]),
        );
    }
    super::sleepers::print(backend, &result["sleepers"]);
    super::retention::print(backend, &result["retention"]);
}
