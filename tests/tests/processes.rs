//! Crash tests with real worker processes (`aiki_test_worker`): `kill -9` mid-task, a worker
//! frozen with SIGSTOP past its claim timeout, four workers sharing a load, and PostgreSQL
//! unreachable for a while under that load (every connection dropped by a fault proxy). Worker processes refresh claims every 200 ms and give them up
//! after 1 s. Each task execution appends a line to a side-effects file, so executions are
//! counted across processes.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::time::{Duration, Instant};

use aiki::RunStatus;
use aiki_tests::Backend;
use aiki_tests::crash::{FiveSteps, Long, LongOnce};
use aiki_tests::processes::{history, wait_for};
use aiki_tests::proxy::{FaultProxy, postgres_server};

// The push endpoint processes of the world are `push.rs`'s.
#[allow(dead_code)]
#[path = "processes/world.rs"]
mod world;

use world::World;

#[path = "processes/restarts.rs"]
mod restarts;

#[path = "processes/listings.rs"]
mod listings;

#[path = "processes/unheard.rs"]
mod unheard;

/// Process tests share the machine's two cores and, for one of them, the PostgreSQL server:
/// run them one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PATIENCE: Duration = Duration::from_secs(120);

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(200);

async fn kill_9_mid_task_resumes_on_another_worker(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    let a = world.spawn("worker-a", LONG);
    let run = world.client.start::<Long>("k".into()).await.unwrap();
    world.wait_for_effect("long-start k attempt 1").await;
    world.kill_9(a);
    let killed = Instant::now();
    world.spawn("worker-b", SHORT);
    // This process is not a worker: it sees the completion through the store.
    let done = wait_for(&run, RunStatus::Completed).await;
    let recovery = killed.elapsed();
    println!(
        "[{backend:?}] kill -9 -> completed on another worker in {recovery:?} (idle timeout 1 s)"
    );
    assert_eq!(
        done.output,
        Some(serde_json::json!("k by worker-b in attempt 2"))
    );
    assert_eq!(
        world.count_prefix("step k/before"),
        1,
        "a finished task never runs again"
    );
    assert_eq!(world.count_prefix("long-start k attempt 1"), 1);
    assert_eq!(
        world.count_prefix("long-start k attempt 2"),
        1,
        "the interrupted task ran again"
    );
    assert_eq!(world.count_prefix("step k/after"), 1);
}

async fn kill_9_mid_task_without_retries_fails_as_interrupted(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    let a = world.spawn("worker-a", LONG);
    let run = world.client.start::<LongOnce>("k".into()).await.unwrap();
    world.wait_for_effect("long-start k").await;
    world.kill_9(a);
    world.spawn("worker-b", SHORT);
    let failed = wait_for(&run, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().kind, "interrupted");
    assert_eq!(
        world.count_prefix("long-start k"),
        1,
        "at most once under `never`"
    );
    assert_eq!(world.count_prefix("step k/after"), 0);
}

async fn frozen_worker_is_fenced_when_it_wakes(backend: Backend) {
    let _serial = SERIAL.lock().await;
    frozen_worker_is_fenced(World::new(backend).await).await;
}

/// The same with remote workers: over HTTP, through a server.
async fn frozen_remote_worker_is_fenced_when_it_wakes(backend: Backend) {
    let _serial = SERIAL.lock().await;
    frozen_worker_is_fenced(World::through_a_server(backend).await).await;
}

async fn frozen_worker_is_fenced(mut world: World) {
    let a = world.spawn("worker-a", Duration::from_secs(3));
    let run = world.client.start::<Long>("z".into()).await.unwrap();
    world.wait_for_effect("long-start z attempt 1").await;
    world.signal(a, "STOP");
    world.spawn("worker-b", SHORT);
    let done = wait_for(&run, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(serde_json::json!("z by worker-b in attempt 2"))
    );
    let store = world.client.store().clone();
    let before = history(&store, run.id()).await;
    // Worker A wakes with its stale attempt: its next write (the attempt's result, or the
    // claim refresh, whichever comes first) carries its old revision and is refused.
    world.signal(a, "CONT");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = history(&store, run.id()).await;
    assert_eq!(
        before, after,
        "nothing worker A wrote after waking is in the history"
    );
    assert!(
        world.workers.is_running(a),
        "worker A stopped that run cleanly and is still serving"
    );
    assert_eq!(world.count_prefix("step z/after"), 1);
}

/// Starts `runs` five-step runs and waits for all of them; returns the elapsed time.
async fn five_step_load(
    world: &World,
    runs: usize,
    during: impl std::future::Future<Output = ()>,
) -> Duration {
    let started = Instant::now();
    let mut handles = Vec::with_capacity(runs);
    for i in 0..runs {
        handles.push(
            world
                .client
                .start::<FiveSteps>(format!("r{i}"))
                .await
                .unwrap(),
        );
    }
    during.await;
    for handle in &handles {
        let done = wait_for(handle, RunStatus::Completed).await;
        assert_eq!(done.output, Some(serde_json::json!(5)));
    }
    started.elapsed()
}

async fn four_workers_share_two_thousand_runs_exactly_once(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    for i in 0..4 {
        world.spawn(&format!("worker-{i}"), SHORT);
    }
    let runs = 2000;
    let elapsed = five_step_load(&world, runs, async {}).await;
    let effects = world.effects();
    let executions: usize = effects.values().sum();
    let duplicates: usize = effects.values().map(|n| n - 1).sum();
    println!(
        "[{backend:?}] 4 worker processes: {runs} runs x 5 tasks in {elapsed:?} \
         ({:.0} task steps/s); {executions} executions, {duplicates} duplicates",
        (runs * 5) as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(effects.len(), runs * 5, "every task ran");
    assert_eq!(duplicates, 0, "no task ran twice");
}

/// Four remote worker processes through an aiki server process that is killed with SIGKILL
/// and started again on the same address under the load: every run completes and no recorded
/// task runs again. 2,000 runs × 5 tasks; `AIKI_SERVER_SOAK_RUNS` sets how many.
async fn remote_workers_ride_out_a_killed_server_process(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::through_a_server_process(backend).await;
    for i in 0..4 {
        world.spawn(&format!("remote-{i}"), SHORT);
    }
    let runs: usize = std::env::var("AIKI_SERVER_SOAK_RUNS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(2000);
    let started = Instant::now();
    let mut handles = Vec::with_capacity(runs);
    for i in 0..runs {
        handles.push(
            world
                .client
                .start::<FiveSteps>(format!("r{i}"))
                .await
                .unwrap(),
        );
    }
    // Under load: killed once the first tenth of the runs is done.
    for handle in &handles[..runs / 10] {
        wait_for(handle, RunStatus::Completed).await;
    }
    let completed = world
        .client
        .store()
        .run_counts()
        .await
        .unwrap()
        .iter()
        .flat_map(|counts| counts.by_status.iter())
        .filter(|(status, _)| *status == RunStatus::Completed)
        .map(|(_, count)| count)
        .sum::<u64>();
    world.restart_server();
    println!("[{backend:?}] {completed} of {runs} runs completed when the server was killed");
    println!("[{backend:?}] the server was killed with SIGKILL under load and started again");
    for handle in &handles {
        let done = wait_for(handle, RunStatus::Completed).await;
        assert_eq!(done.output, Some(serde_json::json!(5)));
    }
    let elapsed = started.elapsed();
    let effects = world.effects();
    let executions: usize = effects.values().sum();
    let duplicates: usize = effects.values().map(|n| n - 1).sum();
    println!(
        "[{backend:?}] 4 remote worker processes through a killed server: {runs} runs x 5 tasks \
         in {elapsed:?}; {executions} executions, {duplicates} run again"
    );
    let mut again: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    again.sort();
    assert_eq!(effects.len(), runs * 5, "every task ran");
    assert_eq!(
        duplicates,
        0,
        "no recorded task ran again: {:?}",
        &again[..again.len().min(10)]
    );
}

/// How long the database stays unreachable in the outage tests: about a restart's downtime.
const OUTAGE: Duration = Duration::from_secs(2);

async fn workers_ride_out_a_postgres_outage(backend: Backend) {
    assert_eq!(backend, Backend::Postgres);
    let _serial = SERIAL.lock().await;
    // A fault proxy in front of the shared server stands in for a restart: it drops every
    // connection and refuses new ones for a while. The server itself is never stopped.
    let proxy = FaultProxy::start(postgres_server())
        .await
        .expect("the fault proxy starts");
    let mut world = World::on_url(proxy.url_through(&backend.fresh_url().await)).await;
    for i in 0..4 {
        world.spawn(&format!("worker-{i}"), SHORT);
    }
    let runs = 400;
    let outage = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.cut();
        println!("[Postgres] every connection dropped under load, the server unreachable");
        tokio::time::sleep(OUTAGE).await;
        proxy.restore();
    };
    let elapsed = five_step_load(&world, runs, outage).await;
    let effects = world.effects();
    let duplicates: usize = effects.values().map(|n| n - 1).sum();
    println!(
        "[Postgres] {runs} runs completed across a {OUTAGE:?} outage in {elapsed:?}; \
         {duplicates} duplicate task executions (retried steps whose result was not yet recorded)"
    );
    assert_eq!(effects.len(), runs * 5, "every task ran; nothing was lost");
}

/// [`restarts`]: the server killed with SIGKILL three times under load.
async fn remote_workers_ride_out_killed_servers(backend: Backend) {
    restarts::remote_workers_ride_out_server_restarts(backend, restarts::Stop::Kill).await;
}

/// [`restarts`]: the server stopped with SIGTERM three times under load.
async fn remote_workers_ride_out_graceful_restarts(backend: Backend) {
    restarts::remote_workers_ride_out_server_restarts(backend, restarts::Stop::Terminate).await;
}

/// [`restarts`]: a client's starts and actions wait for a restarting server.
async fn starts_ride_out_a_server_restart(backend: Backend) {
    restarts::starts_ride_out_a_server_restart(backend).await;
}

/// [`listings`]: a read's answers are not kept.
async fn listings_leave_a_servers_memory_as_it_was(backend: Backend) {
    listings::listings_leave_a_servers_memory_as_it_was(backend).await;
}

/// [`unheard`]: a worker's claim errors on stderr without a subscriber.
async fn a_worker_without_a_subscriber_says_why_it_cannot_claim(backend: Backend) {
    unheard::a_worker_without_a_subscriber_says_why_it_cannot_claim(backend).await;
}

macro_rules! on_sql_backends {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    aiki_tests::bounded(super::$scenario(aiki_tests::Backend::Sqlite)).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if aiki_tests::postgres_available().await {
                        aiki_tests::bounded(super::$scenario(aiki_tests::Backend::Postgres)).await
                    }
                }
            )*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn workers_ride_out_a_postgres_outage() {
                if aiki_tests::postgres_available().await {
                    super::workers_ride_out_a_postgres_outage(aiki_tests::Backend::Postgres).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn four_workers_share_two_thousand_runs_exactly_once() {
                if aiki_tests::postgres_available().await {
                    super::four_workers_share_two_thousand_runs_exactly_once(aiki_tests::Backend::Postgres).await
                }
            }
        }
    };
}

on_sql_backends!(
    kill_9_mid_task_resumes_on_another_worker,
    kill_9_mid_task_without_retries_fails_as_interrupted,
    frozen_worker_is_fenced_when_it_wakes,
    frozen_remote_worker_is_fenced_when_it_wakes,
    remote_workers_ride_out_a_killed_server_process,
    remote_workers_ride_out_killed_servers,
    remote_workers_ride_out_graceful_restarts,
    starts_ride_out_a_server_restart,
    listings_leave_a_servers_memory_as_it_was,
    a_worker_without_a_subscriber_says_why_it_cannot_claim,
);
