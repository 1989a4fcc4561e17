//! A store outage never fails a run by itself: PostgreSQL made unreachable while tasks under
//! `never` are mid-flight, for 10 s and for 120 s (four times the claim idle timeout), and
//! every run completes, none failed as interrupted, no task run twice. Real clock, one
//! in-process worker with its daemons. The outage is a TCP fault proxy in front of the shared
//! server that drops every connection and refuses new ones (the server itself is never
//! stopped); the two outages run one after the other.
//!
//! Nor does a worker whose clock is off: claims are timed by the server's clock, so a worker
//! an hour ahead does not release the runs of a live one; with claims timed by the callers'
//! clocks it marks them stale, and the live executor's refreshes clear the marks before they
//! are confirmed.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use aiki::store::Millis;
use aiki::{Client, Clock, Run, RunStatus, State, SystemClock, TaskError, Worker, WorkflowError};
use aiki_tests::proxy::FaultProxy;
use aiki_tests::{Backend, Executions};
use sqlx::Connection;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Set once the server has been stopped: the first tasks finish only then, so their results
/// are written during the outage however long stopping the server takes.
static SERVER_DOWN: AtomicBool = AtomicBool::new(false);

/// A slow side effect that may run at most once (retry `never`); it ends a second after the
/// server went down.
#[aiki::task(name = "slow-once")]
async fn slow_once(input: u32, State(executions): State<Executions>) -> Result<u32, TaskError> {
    executions.record("slow-once");
    while !SERVER_DOWN.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(input)
}

#[aiki::workflow(name = "through-an-outage", version = "1")]
async fn through_an_outage(run: &Run, input: u32) -> Result<u32, WorkflowError> {
    let first = SlowOnce.start(run, input).await?;
    let second = SlowOnce.start(run, first + 1000).await?;
    Ok(second)
}

async fn runs_complete_across_an_outage_of(down: Duration) {
    let _serial = SERIAL.lock().await;
    SERVER_DOWN.store(false, Ordering::SeqCst);
    let proxy = FaultProxy::start(aiki_tests::proxy::postgres_server())
        .await
        .expect("the fault proxy starts");
    let url = proxy.url_through(&Backend::Postgres.fresh_url().await);
    let store = aiki::store::connect(&url).await.expect("the store opens");
    configure_idle_timeout(&store, Duration::from_secs(30)).await;
    let executions = Executions::default();
    let worker = Worker::builder(store.clone())
        .register(ThroughAnOutage)
        .task(SlowOnce)
        .state(executions.clone())
        .max_concurrent_runs(16)
        .poll_interval(Duration::from_millis(20))
        .claim_refresh_interval(Duration::from_secs(10))
        .build()
        .expect("worker config")
        .start();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(50));
    let runs = 8;
    let mut handles = Vec::new();
    for i in 0..runs {
        handles.push(client.start::<ThroughAnOutage>(i).await.unwrap());
    }
    // Every first task has started: they are mid-flight when the server goes.
    let deadline = Instant::now() + Duration::from_secs(30);
    while executions.count("slow-once") < runs as usize {
        assert!(Instant::now() < deadline, "the tasks did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.cut();
    SERVER_DOWN.store(true, Ordering::SeqCst);
    println!("[Postgres] unreachable for {down:?} with tasks mid-flight");
    tokio::time::sleep(down).await;
    proxy.restore();
    println!("[Postgres] reachable again");
    for handle in &handles {
        let run = tokio::time::timeout(
            Duration::from_secs(120),
            handle.wait_for_status(RunStatus::Completed),
        )
        .await
        .unwrap_or_else(|_| panic!("run {} did not complete", handle.id()))
        .unwrap_or_else(|error| panic!("run {}: {error}", handle.id()));
        assert!(run.error.is_none(), "{run:?}");
    }
    for (i, handle) in handles.iter().enumerate() {
        assert_eq!(handle.result().await.unwrap(), i as u32 + 1000);
    }
    assert_eq!(
        executions.count("slow-once"),
        runs as usize * 2,
        "each task ran exactly once"
    );
    // The outage shows in the metrics as transient store errors. Which calls meet it depends
    // on timing: a write that finds no idle connection waits in the pool for a new one (and
    // may get it once the server is back, with no error), one on an idle connection fails
    // and is retried; claims and claim refreshes keep meeting it.
    let text = aiki::metrics::prometheus_text(&*store).await.unwrap();
    let transient: f64 = text
        .lines()
        .filter(|line| line.starts_with("aiki_store_errors_total{"))
        .filter(|line| line.contains(r#"kind="transient""#))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(transient >= 1.0, "{text}");
    // Every write that failed was retried, never given up.
    let failed_writes = text
        .lines()
        .find_map(|line| {
            line.strip_prefix(r#"aiki_store_errors_total{operation="write",kind="transient"} "#)
        })
        .map_or(0.0, |count| count.parse::<f64>().unwrap());
    let retried_writes = text
        .lines()
        .find_map(|line| line.strip_prefix(r#"aiki_store_retries_total{operation="write"} "#))
        .map_or(0.0, |count| count.parse::<f64>().unwrap());
    assert_eq!(failed_writes, retried_writes, "{text}");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_complete_when_postgres_is_down_for_10_seconds() {
    if aiki_tests::postgres_available().await {
        runs_complete_across_an_outage_of(Duration::from_secs(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_complete_when_postgres_is_down_for_120_seconds_past_the_idle_timeout() {
    if aiki_tests::postgres_available().await {
        runs_complete_across_an_outage_of(Duration::from_secs(120)).await;
    }
}

/// This machine's clock, off by a fixed amount.
#[derive(Debug)]
struct Skewed(Millis);

impl Clock for Skewed {
    fn now(&self) -> Millis {
        SystemClock.now() + self.0
    }
}

/// Holds its run until the gate opens.
#[aiki::task(name = "held")]
async fn held(
    State(gate): State<Arc<tokio::sync::Notify>>,
    State(executions): State<Executions>,
) -> Result<(), TaskError> {
    executions.record("held");
    gate.notified().await;
    Ok(())
}

#[aiki::workflow(name = "held-flow", version = "1")]
async fn held_flow(run: &Run) -> Result<(), WorkflowError> {
    Held.start(run).await
}

/// A live worker holds a run while a daemons-only worker whose clock is an hour ahead sweeps
/// for stale claims for three idle timeouts; returns whether the run was taken from it.
async fn a_skewed_worker_sweeps(url: &str) -> bool {
    let _serial = SERIAL.lock().await;
    let store = aiki::store::connect(url).await.expect("the store opens");
    let gate = Arc::new(tokio::sync::Notify::new());
    let executions = Executions::default();
    let idle = Duration::from_millis(1500);
    configure_idle_timeout(&store, idle).await;
    let worker = |configure: fn(aiki::WorkerBuilder) -> aiki::WorkerBuilder| {
        configure(
            Worker::builder(store.clone())
                .poll_interval(Duration::from_millis(20))
                .claim_refresh_interval(Duration::from_millis(300)),
        )
    };
    // The live worker runs no daemons: the skewed one holds the daemons' lease and sweeps.
    let live = worker(|w| w.register(HeldFlow).daemons(false))
        .state(gate.clone())
        .state(executions.clone())
        .build()
        .expect("worker config")
        .start();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(20));
    let run = client.start::<HeldFlow>(aiki::NoInput).await.unwrap();
    // The skewed worker starts once the live one holds the run, its task under way.
    let deadline = Instant::now() + Duration::from_secs(30);
    while executions.count("held") == 0 {
        assert!(
            Instant::now() < deadline,
            "the live worker did not start the task"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let claimed = run.record().await.unwrap();
    assert_eq!(claimed.status, RunStatus::Running);
    let skewed = worker(|w| w.clock(Skewed(3_600_000)).worker_id("skewed"))
        .build()
        .expect("worker config")
        .start();
    tokio::time::sleep(idle * 3).await;
    // It did sweep: it holds the daemons' lease.
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    let holder: Option<String> =
        sqlx::query_scalar("SELECT holder FROM aiki_leases WHERE name = 'daemons'")
            .fetch_optional(&mut connection)
            .await
            .unwrap();
    assert_eq!(
        holder.as_deref(),
        Some("skewed"),
        "the skewed worker sweeps"
    );
    let after = run.record().await.unwrap();
    let taken = after.revision != claimed.revision;
    gate.notify_one();
    if !taken {
        run.result().await.expect("the run completes");
        assert_eq!(executions.count("held"), 1);
    }
    skewed.abort().await;
    live.abort().await;
    taken
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_a_skewed_clock_leaves_live_claims_alone() {
    if aiki_tests::postgres_available().await {
        let url = Backend::Postgres.fresh_url().await;
        assert!(
            !a_skewed_worker_sweeps(&url).await,
            "claims are timed by the server: the live claim stays"
        );
    }
}

/// With claims timed by the callers' clocks, the skewed sweeper finds the live claim an hour
/// old, and marks it stale; but the live executor's next refresh clears the mark, so the claim
/// is never confirmed stale and stays (claim recovery's second phase; before it, this released
/// the live run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_claims_timed_by_the_callers_a_skewed_clock_still_leaves_live_claims_alone() {
    if aiki_tests::postgres_available().await {
        let url = aiki_tests::caller_claim_clock(&Backend::Postgres.fresh_url().await);
        assert!(
            !a_skewed_worker_sweeps(&url).await,
            "the live executor's refreshes clear the skewed sweeper's marks"
        );
    }
}

/// Sets the store's claim idle timeout (its runtime configuration), as an operator would.
async fn configure_idle_timeout(store: &aiki::BoxStore, idle: Duration) {
    Client::new(store.clone())
        .set_config(aiki::ConfigKey::ClaimIdleTimeout, idle.as_millis() as i64)
        .await
        .expect("configure the claim idle timeout");
}
