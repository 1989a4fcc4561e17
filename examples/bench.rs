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

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aiki::{
    Client, Run, RunHandle, RunRecord, RunStatus, TaskError, Worker, Workflow, WorkflowError,
};
use anyhow::Context as _;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

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
#[path = "bench/recovery.rs"]
mod recovery;
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
#[path = "bench/tracing_cost.rs"]
mod tracing_cost;
#[path = "bench/wake.rs"]
mod wake;

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

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

#[derive(Debug)]
struct Options {
    quick: bool,
    tracing_cost: bool,
    list: bool,
    gather: bool,
    impact: bool,
    idle_fleet: bool,
    wake: bool,
    scale: bool,
    recovery: bool,
    json: Option<PathBuf>,
    backends: Vec<Backend>,
}

impl Options {
    fn runs(&self) -> u64 {
        if self.quick { 100 } else { 1000 }
    }
    fn fan_out(&self) -> u64 {
        if self.quick { 100 } else { 1000 }
    }
    fn replay(&self) -> u64 {
        if self.quick { 1000 } else { 10_000 }
    }
    fn latency_runs(&self) -> usize {
        if self.quick { 50 } else { 200 }
    }
    fn wake_runs(&self) -> usize {
        if self.quick { 5 } else { 20 }
    }
    fn long_run(&self) -> u64 {
        if self.quick { 1000 } else { 10_000 }
    }
    fn raw_seconds(&self) -> f64 {
        if self.quick { 1.0 } else { 3.0 }
    }
}

/// What this process is: the bench, or one of the worker processes it starts.
enum Mode {
    Bench(Options),
    /// `--worker <url>`.
    Worker(String),
    /// `--idle-worker <url>`.
    IdleWorker(String),
    /// `--remote-worker <server url> <key>`.
    RemoteWorker(String, String),
    /// `--wake-worker <url> <poll|hints>`.
    WakeWorker(String, String),
    /// `--sleep-worker <url>`.
    SleepWorker(String),
}

fn parse_args() -> anyhow::Result<Mode> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        quick: false,
        tracing_cost: false,
        list: false,
        gather: false,
        impact: false,
        idle_fleet: false,
        wake: false,
        scale: false,
        recovery: false,
        json: None,
        backends: vec![Backend::Sqlite, Backend::Postgres],
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--worker" => {
                let url = args.next().context("--worker needs a store URL")?;
                return Ok(Mode::Worker(url));
            }
            "--remote-worker" => {
                let url = args.next().context("--remote-worker needs a server URL")?;
                let key = args.next().context("--remote-worker needs an API key")?;
                return Ok(Mode::RemoteWorker(url, key));
            }
            "--idle-worker" => {
                let url = args.next().context("--idle-worker needs a store URL")?;
                return Ok(Mode::IdleWorker(url));
            }
            "--idle-fleet" => options.idle_fleet = true,
            "--wake" => options.wake = true,
            "--wake-worker" => {
                let url = args.next().context("--wake-worker needs a store URL")?;
                let discovery = args.next().context("--wake-worker needs poll or hints")?;
                return Ok(Mode::WakeWorker(url, discovery));
            }
            "--scale" => options.scale = true,
            "--sleep-worker" => {
                let url = args.next().context("--sleep-worker needs a store URL")?;
                return Ok(Mode::SleepWorker(url));
            }
            "--quick" => options.quick = true,
            "--tracing-cost" => options.tracing_cost = true,
            "--list" => options.list = true,
            "--gather" => options.gather = true,
            "--impact" => options.impact = true,
            "--recovery" => options.recovery = true,
            "--json" => options.json = Some(args.next().context("--json needs a path")?.into()),
            "--backends" => {
                options.backends = args
                    .next()
                    .context("--backends needs a list")?
                    .split(',')
                    .map(|name| match name.trim() {
                        "sqlite" => Ok(Backend::Sqlite),
                        "postgres" => Ok(Backend::Postgres),
                        other => Err(anyhow::anyhow!(
                            "unknown backend `{other}` (sqlite, postgres)"
                        )),
                    })
                    .collect::<anyhow::Result<_>>()?;
            }
            other => anyhow::bail!(
                "unknown argument `{other}`; usage: bench [--quick] [--tracing-cost | --list | --gather | --impact | --idle-fleet | --wake | --scale | --recovery] \
                 [--json out.json] [--backends sqlite,postgres]"
            ),
        }
    }
    Ok(Mode::Bench(options))
}

// ---------------------------------------------------------------------------------------------
// Worker process
// ---------------------------------------------------------------------------------------------

/// `--worker <url>`: serves the bench workflows until stdin closes.
async fn worker_process(url: String) -> anyhow::Result<()> {
    tracing_cost::install_if_asked();
    let store = aiki::store::connect(&url).await?;
    let worker = Worker::builder(store)
        .register(Chain)
        .register(ReplayV1)
        .poll_interval(Duration::from_millis(10))
        .build()?
        .start();
    println!("ready");
    // Stdin closes when the parent says stop (or dies).
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    worker.shutdown().await;
    Ok(())
}

/// A worker process started by the bench.
struct WorkerProcess {
    child: tokio::process::Child,
    /// What it prints after `ready`.
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl WorkerProcess {
    /// Starts one and waits until it serves.
    async fn start(url: &str) -> anyhow::Result<WorkerProcess> {
        Self::start_traced(url, false).await
    }

    /// Starts one, with a subscriber recording at `info` if `traced`.
    async fn start_traced(url: &str, traced: bool) -> anyhow::Result<WorkerProcess> {
        Self::start_with(&["--worker", url], traced).await
    }

    /// Starts one with `args` (a mode, `--worker`, `--idle-worker` or `--remote-worker`, and
    /// its arguments).
    async fn start_with(args: &[&str], traced: bool) -> anyhow::Result<WorkerProcess> {
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
    async fn stop(mut self) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Stores
// ---------------------------------------------------------------------------------------------

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

fn postgres_url() -> String {
    std::env::var("AIKI_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64
}

fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}

/// Fresh stores for one backend: SQLite files in a temp folder, PostgreSQL schemas; all removed
/// by [`Stores::cleanup`].
struct Stores {
    backend: Backend,
    dir: PathBuf,
    schemas: Vec<String>,
}

impl Stores {
    fn new(backend: Backend) -> anyhow::Result<Stores> {
        let dir = std::env::temp_dir().join(format!("aiki-bench-{}", unique()));
        std::fs::create_dir_all(&dir)?;
        Ok(Stores {
            backend,
            dir,
            schemas: Vec::new(),
        })
    }

    /// The URL of a fresh, empty store.
    async fn fresh_url(&mut self, phase: &str) -> anyhow::Result<String> {
        match self.backend {
            Backend::Sqlite => Ok(format!(
                "sqlite://{}",
                self.dir.join(format!("{phase}.db")).display()
            )),
            Backend::Postgres => {
                use sqlx::Connection;
                let url = postgres_url();
                let now = now_ms() / 1000;
                let schema = format!("aiki_bench_{now}_{}", unique());
                let mut admin = sqlx::PgConnection::connect(&url).await?;
                sqlx::query(&format!("CREATE SCHEMA {schema}"))
                    .execute(&mut admin)
                    .await?;
                let _ = admin.close().await;
                self.schemas.push(schema.clone());
                let separator = if url.contains('?') { '&' } else { '?' };
                Ok(format!(
                    "{url}{separator}options[search_path]={schema}&aiki_schema={schema}"
                ))
            }
        }
    }

    /// Drops this run's schemas (and ones older bench runs left behind more than ten minutes
    /// ago), or removes the temp folder.
    async fn cleanup(self) -> anyhow::Result<()> {
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.backend == Backend::Postgres {
            use sqlx::{Connection, Row};
            let now = now_ms() / 1000;
            let mut admin = sqlx::PgConnection::connect(&postgres_url()).await?;
            let stale: Vec<String> = sqlx::query(
                "SELECT schema_name FROM information_schema.schemata \
                 WHERE schema_name LIKE 'aiki_bench_%'",
            )
            .fetch_all(&mut admin)
            .await?
            .into_iter()
            .map(|row| row.get::<String, _>(0))
            .filter(|name| {
                name.split('_')
                    .nth(2)
                    .and_then(|secs| secs.parse::<i64>().ok())
                    .is_none_or(|secs| secs + 600 < now)
            })
            .collect();
            for schema in self.schemas.iter().chain(&stale) {
                sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .execute(&mut admin)
                    .await?;
            }
            let _ = admin.close().await;
        }
        Ok(())
    }
}

/// `true` when PostgreSQL answers (within 5 s).
async fn postgres_answers() -> Result<(), String> {
    use sqlx::Connection;
    match tokio::time::timeout(
        Duration::from_secs(5),
        sqlx::PgConnection::connect(&postgres_url()),
    )
    .await
    {
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            Ok(())
        }
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("no answer within 5 s".to_owned()),
    }
}

// ---------------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------------

/// Polls a run every millisecond until it is in `status` (failing if it ends otherwise).
async fn wait_for<W: Workflow>(
    handle: &RunHandle<W>,
    status: RunStatus,
) -> anyhow::Result<RunRecord> {
    wait_polling(handle, status, Duration::from_millis(1)).await
}

/// [`wait_for`], reading the run every `interval`.
async fn wait_polling<W: Workflow>(
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
async fn throughput(url: &str, runs: u64, workers: usize) -> anyhow::Result<Value> {
    throughput_traced(url, runs, workers, false).await
}

/// [`throughput`], the worker processes recording at `info` if `traced`.
async fn throughput_traced(
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
async fn start_chains(client: &Client, runs: u64) -> anyhow::Result<Vec<RunHandle<Chain>>> {
    use futures_util::{StreamExt as _, TryStreamExt as _};
    futures_util::stream::iter(0..runs)
        .map(|i| client.start::<Chain>(i * 100).into_future())
        .buffered(STARTS_IN_FLIGHT)
        .map_err(anyhow::Error::from)
        .try_collect()
        .await
}

/// How many starts the throughput rows have in flight at once.
const STARTS_IN_FLIGHT: usize = 16;

/// Waits until every run [`start_chains`] started has completed with its output; returns when
/// the last one completed (by the store's clock).
async fn complete_chains(handles: &[RunHandle<Chain>], bar: &ProgressBar) -> anyhow::Result<i64> {
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
async fn counted_store(
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
async fn accounting_phase(url: &str, runs: u64) -> anyhow::Result<Value> {
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
async fn fan_out_phase(url: &str, n: u64) -> anyhow::Result<Value> {
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
async fn record_replay_run(
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
async fn replay_phase(n: u64, changed: bool) -> anyhow::Result<Value> {
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
async fn claimed_at(store: &aiki::BoxStore, run: &RunRecord) -> anyhow::Result<Option<i64>> {
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

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// Phase 6: latencies on an in-process worker with the default settings.
async fn latency_phase(url: &str, runs: usize, wakes: usize) -> anyhow::Result<Value> {
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

/// Every phase on one backend.
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

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

fn f(value: &Value) -> f64 {
    value.as_f64().unwrap_or(f64::NAN)
}

fn ms(value: &Value) -> String {
    value
        .as_f64()
        .map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0} ms"))
}

fn print_report(report: &Value) {
    println!();
    println!(
        "Aiki bench ({} mode), {} cores",
        report["mode"].as_str().unwrap_or("?"),
        report["cores"]
    );
    for replay in report["replay"].as_array().into_iter().flatten() {
        println!(
            "  replay, memory store, {} recorded tasks, {:<28} {:>7.2} µs/task \
             (recording: {:.2} µs/task; claim → completed {})",
            replay["tasks"],
            if replay["schema_changed"] == json!(true) {
                "(b) schema validation:"
            } else {
                "(a) fast path:"
            },
            f(&replay["us_per_task"]),
            f(&replay["recording_us_per_task"]),
            ms(&replay["claim_to_completed_ms"]),
        );
    }
    for skipped in report["skipped"].as_array().into_iter().flatten() {
        println!("  {}", skipped.as_str().unwrap_or_default());
    }
    for backend in report["backends"].as_array().into_iter().flatten() {
        let raw = f(&backend["raw_commits_per_s"]);
        let limits = &backend["limits"];
        let ratios = |row: &Value| engine::describe(limits, &row["ratios"]);
        println!();
        println!("  {}", backend["backend"].as_str().unwrap_or("?"));
        engine::print(limits, raw);
        println!(
            "    the same through a 1-connection sqlx pool: {:.0} /s ({:.2} × sqlx 1 conn); without \
             test_before_acquire: {:.0} /s ({:.2} ×)",
            f(&backend["pool_commits_per_s"]),
            f(&backend["pool_commits_per_s"]) / raw,
            f(&backend["pool_without_test_before_acquire_commits_per_s"]),
            f(&backend["pool_without_test_before_acquire_commits_per_s"]) / raw,
        );
        for t in backend["throughput"].as_array().into_iter().flatten() {
            println!(
                "    throughput, {} worker process(es), {} runs × 10 tasks: {:>7.0} runs/s, \
                 {:>7.0} steps/s   ({})",
                t["workers"],
                t["runs"],
                f(&t["runs_per_s"]),
                f(&t["steps_per_s"]),
                ratios(t),
            );
        }
        let fan = &backend["fan_out"];
        println!(
            "    fan-out, 1 run × {} concurrent tasks: {:.0} ms, {:.0} tasks/s   ({})",
            fan["tasks"],
            f(&fan["wall_ms"]),
            f(&fan["tasks_per_s"]),
            ratios(fan),
        );
        println!(
            "    bytes per task entry: {}",
            footprint::describe(&backend["bytes_per_entry"])
        );
        let long = &backend["long_run"];
        println!(
            "    per-step cost, one run of {} sequential tasks: {}",
            long["steps"],
            long_run::describe(long)
        );
        let rec = &backend["recovery"];
        println!(
            "    recovery, 1000 recorded tasks, fresh process: {} from process start \
             (ready after {}), {} from claim to completed",
            ms(&rec["process_start_to_completed_ms"]),
            ms(&rec["process_start_to_ready_ms"]),
            ms(&rec["claim_to_completed_ms"]),
        );
        let acc = &backend["accounting"];
        println!(
            "    in-process worker, {} runs already queued: {:.0} steps/s ({}); \
             statements: {:.1} per start, {:.1} per task step, {:.0}/s while executing, \
             {}/s from an idle worker",
            acc["runs"],
            f(&acc["in_process_steps_per_s"]),
            ratios(acc),
            f(&acc["statements_per_start"]),
            f(&acc["statements_per_step_executing"]),
            f(&acc["statements_per_s"]),
            acc["idle_worker_statements_per_s"],
        );
        let lat = &backend["latency"];
        println!(
            "    latency, one-task run start → completed ({} runs): p50 {} p99 {} \
             (observed by polling: p50 {:.1} ms, p99 {:.1} ms)",
            lat["runs"],
            ms(&lat["start_to_completed_p50_ms"]),
            ms(&lat["start_to_completed_p99_ms"]),
            f(&lat["observed_p50_ms"]),
            f(&lat["observed_p99_ms"]),
        );
        println!(
            "    wake-up p50 ({} runs each): sleep(50 ms) timer due → completed {}; \
             send → completed {}",
            lat["wake_runs"],
            ms(&lat["timer_wake_p50_ms"]),
            ms(&lat["send_wake_p50_ms"]),
        );
        let served = &backend["server"];
        for t in served["throughput"].as_array().into_iter().flatten() {
            println!(
                "    through one server, {} remote worker process(es), {} runs × 10 tasks: \
                 {:>7.0} steps/s   ({:.2} × direct; {}); the starts took {:.1} s",
                t["workers"],
                t["runs"],
                f(&t["steps_per_s"]),
                f(&t["ratio_to_direct"]),
                ratios(t),
                f(&t["start_seconds"]),
            );
        }
        let lat = &served["latency"];
        println!(
            "    through one server, one-task run ({} runs): start → completed p50 {} p99 {}; \
             long-poll wake-up, start → claimed p50 {} p99 {}",
            lat["runs"],
            ms(&lat["start_to_completed_p50_ms"]),
            ms(&lat["start_to_completed_p99_ms"]),
            ms(&lat["start_to_claimed_p50_ms"]),
            ms(&lat["start_to_claimed_p99_ms"]),
        );
    }
    println!();
    println!("  total time: {:.1} s", f(&report["seconds"]));
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
