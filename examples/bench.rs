//! The benchmark of issue 6: Aiki's throughput, fan-out, replay, recovery and latency on SQLite
//! and PostgreSQL, each throughput figure printed with its ratio to the database engine's own
//! commit rates measured in the same run, and the costs that grow with the store (issue 25).
//!
//! ```sh
//! cargo run --release -p aiki-examples --example bench -- [--quick] [--json out.json] [--backends sqlite,postgres]
//! ```
//!
//! * **limits** (see `bench/engine.rs`): single-row `INSERT` transactions per second with the
//!   store's durability settings (SQLite: a file in a temp folder, WAL, `synchronous=NORMAL`;
//!   PostgreSQL: the server's `synchronous_commit`). The yardsticks:
//!   - SQLite: the C library in process through `rusqlite`, sequential, on a blocking thread
//!     (no driver thread hop), and one `sqlx` connection (the old limit row: every statement
//!     pays sqlx-sqlite's hand-off to its worker thread);
//!   - PostgreSQL: 1 and 16 concurrent `sqlx` connections, each a loop of autocommit `INSERT`s
//!     into a fresh table, total commits/s; the old one-connection row is printed beside them.
//!
//!   Every throughput row prints its ratio to both yardsticks of its backend. The JSON keeps
//!   the old figures (`raw_commits_per_s`, each row's `ratio_to_raw`) and adds `limits` (the
//!   yardsticks, `key` and `commits_per_s`) and each row's `ratios` (`{ key: ratio }`).
//! * **throughput**: N runs of 10 sequential tasks (each returns its input + 1), executed by 1
//!   and by 2 worker *processes* (this program re-executed with `--worker <url>`): runs/s,
//!   steps/s and steps/s ÷ each yardstick. N = 1,000 (100 with `--quick`), started 16 at a
//!   time, as several clients would (one client's round trips, one after another, bounded the
//!   rows through the server).
//! * **bytes per task entry** (see `bench/footprint.rs`): how much the store grew while the
//!   one-worker throughput row wrote its N × 10 task entries, per entry: `aiki_entries` with its
//!   indexes (SQLite: its pages in `dbstat`; PostgreSQL: `pg_total_relation_size`, dead row
//!   versions included until a vacuum), and the whole store (SQLite: `page_count × page_size`,
//!   WAL frames and free pages included; PostgreSQL: `pg_total_relation_size` summed over the
//!   schema's tables).
//! * **per-step cost as a run grows** (see `bench/long_run.rs`): one run of 10,000 sequential
//!   tasks (1,000 with `--quick`) on an in-process worker, each step timed inside the workflow;
//!   mean and median of steps 1–100 beside the last 100, and late ÷ early.
//! * **fan-out**: one run starting 1,000 concurrent tasks (100 with `--quick`).
//! * **replay** (memory store): µs per recorded task when a run of 10,000 recorded tasks (1,000
//!   with `--quick`) is replayed, (a) with the same output schema (fast path) and (b) with a
//!   new code version whose task output type gained an `Option` field (every recorded output
//!   validated).
//! * **recovery**: a run with 1,000 recorded tasks picked up by a fresh worker process; its
//!   claim time read from the run's timeline once it has completed, so that nothing polls the
//!   store while the worker recovers it but a look every millisecond for its end.
//! * **latency**: start → completed of one-task runs (p50, p99), and the wake-up latency of a
//!   sleeping run after its timer and of a waiting run after `send` (p50).
//!
//! * **listing** (`--list`, instead of the phases above): a page of 50 of 100,000 runs (10,000
//!   with `--quick`) filtered by workflow version and status, p50 and p99, beside the same
//!   query sent raw; and the query plans (see `bench/listing.rs`).
//! * **gather** (`--gather`, instead of the phases above): a parent gathering 1,000 child runs
//!   (100 with `--quick`) with `run.join_all` over their waits and with `run.join_children`:
//!   parent executions, history rows read, ms (see `bench/gather.rs`).
//! * **impact check** (`--impact`, instead of the phases above): the pre-deploy check over
//!   10,000 in-flight runs of 10 recorded tasks each (500 with `--quick`), runs/s beside the
//!   store's `load_history` rate of the same histories (see `bench/impact.rs`).
//! * **idle fleet** (`--idle-fleet`, instead of the phases above): eight idle worker processes
//!   (two with `--quick`) for 60 s (3 s), the statements per second they send, the claim polls
//!   and heartbeats apart from the daemons' (see `bench/idle.rs`).
//! * **wake-up** (`--wake`, instead of the phases above; then throughput with four worker
//!   processes fed each way): how soon a worker process hears of a
//!   start, an event sent and a timer due, polling every 50 ms and with ready hints (on
//!   PostgreSQL, `NOTIFY`), p50 and p99 of 50 each (5 with `--quick`; see `bench/wake.rs`).
//! * **recovery, repeated** (`--recovery`, instead of the phases above): the recovery phase ten
//!   times (three with `--quick`), each on a fresh store; every figure, and their median (see
//!   `bench/recovery.rs`).
//! * **tracing cost** (`--tracing-cost`, instead of the phases above): the throughput row with
//!   one worker process, five times with a subscriber recording at `info` and five times with
//!   none, interleaved; median and spread of each (see `bench/tracing_cost.rs`).
//! * **cost as the work grows** (`--scale`, instead of the phases above; see `bench/scale.rs`),
//!   each figure beside its small-store baseline from the same run:
//!   - the throughput row (one worker process) and one-task start → completed latency (p50,
//!     p99) on an empty store and on one holding 1,000,000 finished runs (100,000 with
//!     `--quick`) seeded by bulk SQL with every index in place (`bench/seed.rs`), and the ratio
//!     (target: within 10 %); `list_runs` and `changes_since` pages on both;
//!   - 100,000 runs sleeping at once (10,000 with `--quick`), one worker process: its memory
//!     idle, with them all asleep, and fresh with them all asleep; then their timers brought due
//!     at once and the rate they are woken and completed (`bench/sleepers.rs`);
//!   - retention: ended runs purged in batches of 500 (`Sweeper::purge_runs`) while a worker
//!     process runs the throughput workload: runs purged per second, and its steps/s beside the
//!     same store's without the purge (`bench/retention.rs`).
//!
//! PostgreSQL: `AIKI_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`);
//! every phase gets a fresh schema, dropped at the end. When no server answers, the backend is
//! skipped. The benchmark asserts nothing about speed.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use aiki::{Run, TaskError, WorkflowError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[path = "bench/engine.rs"]
mod engine;
#[path = "bench/footprint.rs"]
mod footprint;
#[path = "bench/gather.rs"]
mod gather;
#[path = "bench/idle.rs"]
mod idle;
#[path = "bench/impact.rs"]
mod impact;
#[path = "bench/listing.rs"]
mod listing;
#[path = "bench/long_run.rs"]
mod long_run;
#[path = "bench/options.rs"]
mod options;
#[path = "bench/phases.rs"]
mod phases;
#[path = "bench/process.rs"]
mod process;
#[path = "bench/recovery.rs"]
mod recovery;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/retention.rs"]
mod retention;
#[path = "bench/scale.rs"]
mod scale;
#[path = "bench/seed.rs"]
mod seed;
#[path = "bench/server.rs"]
mod server;
#[path = "bench/sleepers.rs"]
mod sleepers;
#[path = "bench/stores.rs"]
mod stores;
#[path = "bench/tracing_cost.rs"]
mod tracing_cost;
#[path = "bench/wake.rs"]
mod wake;

use options::{Backend, Mode, Options, parse_args};
use phases::{
    accounting_phase, complete_chains, counted_store, fan_out_phase, latency_phase, percentile,
    recovery_phase, replay_phase, sorted, start_chains, throughput, throughput_traced, wait_for,
};
use process::{WorkerProcess, serve, worker_process};
use report::{f, print_report};
use stores::{Stores, now_ms, postgres_answers, postgres_url};

// ---------------------------------------------------------------------------------------------
// Workflows and tasks
// ---------------------------------------------------------------------------------------------

/// The unit of work: returns its input + 1.
#[aiki::task(name = "bench-inc")]
async fn inc(x: u64) -> Result<u64, TaskError> {
    Ok(x + 1)
}

/// Ten sequential tasks.
#[aiki::workflow(name = "bench-chain", version = "1")]
async fn chain(run: &Run, start: u64) -> Result<u64, WorkflowError> {
    let mut x = start;
    for _ in 0..10 {
        x = Inc.start(run, x).await?;
    }
    Ok(x)
}

/// Starts `n` tasks at once and sums their outputs: the calls borrow the run and are joined with
/// `Run::join_all`; the runtime runs each `#[task]` attempt on a tokio task of its own.
#[aiki::workflow(name = "bench-fan-out", version = "1")]
async fn fan_out(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let outputs = run.join_all((0..n).map(|i| Inc.start(run, i))).await?;
    Ok(outputs.into_iter().sum())
}

/// A replayed task's output (first code version).
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Out {
    v: u64,
}

/// The same output in a later code version: a compatible schema with another fingerprint.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct OutV2 {
    v: u64,
    note: Option<String>,
}

/// One recorded step of the replay and recovery runs.
#[aiki::task(name = "bench-replay-step")]
async fn replay_step(i: u64) -> Result<Out, TaskError> {
    Ok(Out { v: i })
}

/// The same task (same name, same input, so the same addresses) with the new output type.
#[aiki::task(name = "bench-replay-step")]
async fn replay_step_v2(i: u64) -> Result<OutV2, TaskError> {
    Ok(OutV2 { v: i, note: None })
}

/// How long each execution of a replay workflow took to get through its tasks, in order.
static TASK_LOOPS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

fn note_task_loop(elapsed: Duration) {
    TASK_LOOPS.lock().expect("not poisoned").push(elapsed);
}

/// `n` recorded steps, then a wait for `go`: the first execution records and suspends; the
/// second (after `go` is sent) replays every step.
#[aiki::workflow(name = "bench-replay", version = "1", events(go))]
async fn replay_v1(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let started = Instant::now();
    let mut sum = 0;
    for i in 0..n {
        sum += ReplayStep.start(run, i).await?.v;
    }
    note_task_loop(started.elapsed());
    run.events().go().wait().await?;
    Ok(sum)
}

/// `bench-replay@1` deployed again with the task's new output type.
#[aiki::workflow(name = "bench-replay", version = "1", events(go))]
async fn replay_v2(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let started = Instant::now();
    let mut sum = 0;
    for i in 0..n {
        sum += ReplayStepV2.start(run, i).await?.v;
    }
    note_task_loop(started.elapsed());
    run.events().go().wait().await?;
    Ok(sum)
}

/// One task.
#[aiki::workflow(name = "bench-one", version = "1")]
async fn one(run: &Run, x: u64) -> Result<u64, WorkflowError> {
    Inc.start(run, x).await
}

/// A durable 50 ms sleep.
#[aiki::workflow(name = "bench-nap", version = "1")]
async fn nap(run: &Run, _x: u64) -> Result<(), WorkflowError> {
    run.sleep("nap", Duration::from_millis(50)).await?;
    Ok(())
}

/// Waits for `go`.
#[aiki::workflow(name = "bench-waiter", version = "1", events(go))]
async fn waiter(run: &Run, _x: u64) -> Result<(), WorkflowError> {
    run.events().go().wait().await?;
    Ok(())
}

/// `--tracing-cost` on one backend.
async fn tracing_cost_backend(backend: Backend, options: &Options) -> anyhow::Result<Value> {
    let mut stores = Stores::new(backend)?;
    let result = async {
        eprintln!("[{}] raw commits", backend.name());
        let raw = engine::raw_commits(&mut stores, options.raw_seconds()).await?;
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for repetition in 0..tracing_cost::REPETITIONS {
            for traced in tracing_cost::order(repetition) {
                eprintln!(
                    "[{}] throughput, {} runs x 10 tasks, subscriber: {}",
                    backend.name(),
                    options.runs(),
                    if traced { "info" } else { "none" }
                );
                let url = stores.fresh_url("tracing").await?;
                let row = throughput_traced(&url, options.runs(), 1, traced).await?;
                if traced { &mut with } else { &mut without }.push(f(&row["steps_per_s"]));
            }
        }
        let mut cost = tracing_cost::report(raw, without, with);
        cost["backend"] = json!(backend.name());
        anyhow::Ok(cost)
    }
    .await;
    stores.cleanup().await?;
    result
}

/// Every phase on one backend.
async fn bench_backend(backend: Backend, options: &Options) -> anyhow::Result<Value> {
    let mut stores = Stores::new(backend)?;
    let result = async {
        eprintln!("[{}] raw commits", backend.name());
        let raw = engine::raw_commits(&mut stores, options.raw_seconds()).await?;
        let pool_tested =
            engine::pool_commits(&mut stores, options.raw_seconds() / 2.0, true).await?;
        let pool_untested =
            engine::pool_commits(&mut stores, options.raw_seconds() / 2.0, false).await?;
        eprintln!("[{}] the engine's own commit rates", backend.name());
        let limits = engine::measure(&mut stores, options.raw_seconds(), raw).await?;
        let mut throughputs = Vec::new();
        let mut footprint = Value::Null;
        for workers in [1, 2] {
            eprintln!(
                "[{}] throughput: {} runs x 10 tasks, {workers} worker process(es)",
                backend.name(),
                options.runs()
            );
            let url = stores.fresh_url(&format!("throughput{workers}")).await?;
            let empty = if workers == 1 {
                Some(footprint::empty(&url).await?)
            } else {
                None
            };
            let mut result = throughput(&url, options.runs(), workers).await?;
            if let Some(empty) = empty {
                footprint = footprint::per_entry(&url, empty).await?;
            }
            let ratio = result["steps_per_s"].as_f64().unwrap_or(0.0) / raw;
            result["ratio_to_raw"] = json!(ratio);
            result["ratios"] = engine::ratios(&limits, f(&result["steps_per_s"]));
            throughputs.push(result);
        }
        eprintln!("[{}] statement accounting", backend.name());
        let url = stores.fresh_url("accounting").await?;
        let mut accounting = accounting_phase(&url, options.runs() / 5).await?;
        accounting["ratios"] = engine::ratios(&limits, f(&accounting["in_process_steps_per_s"]));
        eprintln!("[{}] fan-out: {} tasks", backend.name(), options.fan_out());
        let url = stores.fresh_url("fanout").await?;
        let mut fan_out = fan_out_phase(&url, options.fan_out()).await?;
        let ratio = fan_out["tasks_per_s"].as_f64().unwrap_or(0.0) / raw;
        fan_out["ratio_to_raw"] = json!(ratio);
        fan_out["ratios"] = engine::ratios(&limits, f(&fan_out["tasks_per_s"]));
        eprintln!(
            "[{}] long run: one run of {} sequential tasks",
            backend.name(),
            options.long_run()
        );
        let url = stores.fresh_url("longrun").await?;
        let long_run = long_run::measure(&url, options.long_run()).await?;
        eprintln!("[{}] recovery: 1000 recorded tasks", backend.name());
        let url = stores.fresh_url("recovery").await?;
        let recovery = recovery_phase(&url).await?;
        eprintln!("[{}] latency", backend.name());
        let url = stores.fresh_url("latency").await?;
        let latency = latency_phase(&url, options.latency_runs(), options.wake_runs()).await?;
        let mut served = Vec::new();
        for (workers, direct) in [1, 2].into_iter().zip(&throughputs) {
            eprintln!(
                "[{}] through a server: {} runs x 10 tasks, {workers} remote worker process(es)",
                backend.name(),
                options.runs()
            );
            let url = stores.fresh_url(&format!("served{workers}")).await?;
            let mut result = server::throughput(&url, options.runs(), workers).await?;
            let ratio = f(&result["steps_per_s"]) / f(&direct["steps_per_s"]);
            result["ratio_to_direct"] = json!(ratio);
            result["ratios"] = engine::ratios(&limits, f(&result["steps_per_s"]));
            served.push(result);
        }
        eprintln!("[{}] latency through a server", backend.name());
        let url = stores.fresh_url("servedlatency").await?;
        let served_latency = server::latency(&url, options.latency_runs()).await?;
        anyhow::Ok(json!({
            "server": { "throughput": served, "latency": served_latency },
            "backend": backend.name(),
            "raw_commits_per_s": raw,
            "pool_commits_per_s": pool_tested,
            "pool_without_test_before_acquire_commits_per_s": pool_untested,
            "limits": limits,
            "throughput": throughputs,
            "bytes_per_entry": footprint,
            "long_run": long_run,
            "fan_out": fan_out,
            "recovery": recovery,
            "latency": latency,
            "accounting": accounting,
        }))
    }
    .await;
    stores.cleanup().await?;
    result
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = match parse_args()? {
        Mode::Worker(url) => return worker_process(url).await,
        Mode::IdleWorker(url) => return idle::worker_process(url).await,
        Mode::WakeWorker(url, discovery) => return wake::worker_process(url, discovery).await,
        Mode::SleepWorker(url) => return sleepers::worker_process(url).await,
        Mode::RemoteWorker(url, key) => return server::worker_process(url, key).await,
        Mode::Bench(options) => options,
    };
    let clock = Instant::now();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut replay = Vec::new();
    let phases = if options.tracing_cost
        || options.list
        || options.gather
        || options.impact
        || options.idle_fleet
        || options.wake
        || options.scale
        || options.recovery
    {
        Vec::new()
    } else {
        vec![false, true]
    };
    for changed in phases {
        eprintln!(
            "[memory] replay of {} recorded tasks{}",
            options.replay(),
            if changed { " (schema changed)" } else { "" }
        );
        replay.push(replay_phase(options.replay(), changed).await?);
    }
    let mut backends = Vec::new();
    let mut skipped = Vec::new();
    for &backend in &options.backends {
        if backend == Backend::Postgres
            && let Err(error) = postgres_answers().await
        {
            let line = format!(
                "postgres: SKIPPED, no PostgreSQL server answers at {} ({error}); set \
                 AIKI_TEST_DATABASE_URL",
                postgres_url()
            );
            eprintln!("{line}");
            skipped.push(json!(line));
            continue;
        }
        if options.recovery {
            let repeats = if options.quick { 3 } else { 10 };
            let result = recovery::measure(backend, repeats).await?;
            recovery::print(backend.name(), &result);
            backends.push(result);
        } else if options.scale {
            let result = scale::measure(backend, &options).await?;
            scale::print(backend.name(), &result);
            backends.push(result);
        } else if options.wake {
            let mut stores = Stores::new(backend)?;
            let runs = if options.quick { 5 } else { 50 };
            let mut rows = Vec::new();
            for discovery in ["poll", "hints", "redis"] {
                eprintln!("[{}] wake-up, {discovery}", backend.name());
                let url = stores.fresh_url(&format!("wake{discovery}")).await?;
                let result = wake::measure(&url, discovery, runs).await;
                let result = match result {
                    Ok(result) => result,
                    Err(error) => {
                        stores.cleanup().await?;
                        return Err(error);
                    }
                };
                wake::print(backend.name(), &result);
                rows.push(result);
            }
            let mut fed = Vec::new();
            for discovery in ["poll", "hints", "redis"] {
                eprintln!(
                    "[{}] throughput, 4 workers fed by {discovery}",
                    backend.name()
                );
                let url = stores.fresh_url(&format!("fed{discovery}")).await?;
                match wake::fed(&url, discovery, 4, options.runs()).await {
                    Ok(result) => {
                        wake::print_fed(backend.name(), &result);
                        fed.push(result);
                    }
                    Err(error) => {
                        stores.cleanup().await?;
                        return Err(error);
                    }
                }
            }
            stores.cleanup().await?;
            backends.push(json!({ "backend": backend.name(), "wake": rows, "fed": fed }));
        } else if options.idle_fleet {
            let mut stores = Stores::new(backend)?;
            let (processes, seconds) = if options.quick { (2, 3) } else { (8, 60) };
            eprintln!(
                "[{}] idle fleet: {processes} worker processes, {seconds} s",
                backend.name()
            );
            let url = stores.fresh_url("idle").await?;
            let result = idle::measure(&url, processes, seconds).await;
            stores.cleanup().await?;
            let mut result = result?;
            idle::print(backend.name(), &result);
            result["backend"] = json!(backend.name());
            backends.push(result);
        } else if options.impact {
            let mut stores = Stores::new(backend)?;
            eprintln!("[{}] impact check", backend.name());
            let url = stores.fresh_url("impact").await?;
            let result = impact::measure(&url, if options.quick { 500 } else { 10_000 }).await;
            stores.cleanup().await?;
            let mut result = result?;
            impact::print(backend.name(), &result);
            result["backend"] = json!(backend.name());
            backends.push(result);
        } else if options.gather {
            let mut stores = Stores::new(backend)?;
            eprintln!("[{}] gather", backend.name());
            let url = stores.fresh_url("gather").await?;
            let result = gather::measure(&url, if options.quick { 100 } else { 1_000 }).await;
            stores.cleanup().await?;
            let mut result = result?;
            gather::print(backend.name(), &result);
            result["backend"] = json!(backend.name());
            backends.push(result);
        } else if options.list {
            let mut stores = Stores::new(backend)?;
            eprintln!("[{}] listing", backend.name());
            let url = stores.fresh_url("listing").await?;
            let runs = if options.quick { 10_000 } else { 100_000 };
            let result = listing::measure(&url, runs).await;
            stores.cleanup().await?;
            let mut result = result?;
            listing::print(backend.name(), &result);
            result["backend"] = json!(backend.name());
            backends.push(result);
        } else if options.tracing_cost {
            let cost = tracing_cost_backend(backend, &options).await?;
            tracing_cost::print(backend.name(), &cost);
            backends.push(cost);
        } else {
            backends.push(bench_backend(backend, &options).await?);
        }
    }
    let report = json!({
        "mode": if options.quick { "quick" } else { "full" },
        "cores": cores,
        "replay": replay,
        "skipped": skipped,
        "backends": backends,
        "seconds": clock.elapsed().as_secs_f64(),
    });
    if !options.tracing_cost
        && !options.list
        && !options.gather
        && !options.impact
        && !options.idle_fleet
        && !options.wake
        && !options.scale
        && !options.recovery
    {
        print_report(&report);
    }
    if let Some(path) = &options.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("  wrote {}", path.display());
    }
    Ok(())
}
