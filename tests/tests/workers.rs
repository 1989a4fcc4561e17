//! Worker behaviour: pools, standalone daemons, and the store round trips a task step costs
//! (counted by the SQL stores' own statement counters, not guessed).

use std::sync::Arc;
use std::time::Duration;

use aiki::store::RunId;
use aiki::{
    BoxStore, Client, ConfigKey, Run, RunStatus, State, TaskError, Worker, WorkerStore,
    WorkflowError,
};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};

use crate::counting;

use counting::Counting;

#[aiki::task(name = "add-one")]
async fn add_one(n: u64) -> Result<u64, TaskError> {
    Ok(n + 1)
}

#[aiki::workflow(name = "count-to", version = "1")]
async fn count_to(run: &Run, steps: u64) -> Result<u64, WorkflowError> {
    let mut n = 0;
    for _ in 0..steps {
        n = AddOne.start(run, n).await?;
    }
    Ok(n)
}

async fn runs_reach_only_workers_of_their_pool(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(CountTo)).await;
    let gpu = h.client.start::<CountTo>(2).pool("gpu").await.unwrap();
    let plain = h.client.start::<CountTo>(3).await.unwrap();
    assert_eq!(plain.result().await.unwrap(), 3);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        gpu.status().await.unwrap(),
        RunStatus::Queued,
        "no worker serves `gpu`"
    );
    let gpu_worker = h
        .worker_builder()
        .register(CountTo)
        .pool("gpu")
        .build()
        .unwrap()
        .start();
    assert_eq!(gpu.result().await.unwrap(), 2);
    let record = gpu.record().await.unwrap();
    assert_eq!(record.pool, "gpu");
    gpu_worker.shutdown().await;
}

async fn daemons_run_on_their_own(backend: Backend) {
    let h = Harness::new(backend).await;
    let run = h.client.start::<CountTo>(1).await.unwrap();
    h.client
        .set_config(ConfigKey::StallMaxAge, 60_000)
        .await
        .unwrap();
    // A worker that serves no workflow is just the daemons: here, it stalls the undelivered run.
    let daemons = Worker::builder(h.store.clone())
        .clock(h.clock.clone())
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    h.advance(Duration::from_secs(61));
    h.reach(&run, RunStatus::Stalled).await;
    daemons.shutdown().await;
}

/// A subscriber that counts the signals it gives and the runs it is told to keep alive.
#[derive(Debug, Default)]
struct CountingSubscriber {
    signals: std::sync::atomic::AtomicUsize,
    heartbeats: std::sync::Mutex<Vec<RunId>>,
}

#[aiki::async_trait]
impl aiki::Subscriber for CountingSubscriber {
    async fn next_signal(&self) -> aiki::store::Ready {
        self.signals
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(5)).await;
        aiki::store::Ready::Anything
    }

    async fn heartbeat(&self, run: RunId) {
        self.heartbeats.lock().unwrap().push(run);
    }
}

#[aiki::task(name = "slow")]
async fn slow() -> Result<(), TaskError> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(())
}

#[aiki::workflow(name = "slow-flow", version = "1")]
async fn slow_flow(run: &Run) -> Result<(), WorkflowError> {
    Slow.start(run).await
}

async fn a_custom_subscriber_discovers_work_and_gets_its_own_heartbeats(backend: Backend) {
    let h = Harness::new(backend).await;
    let subscriber = Arc::new(CountingSubscriber::default());
    let worker = h
        .worker_builder()
        .register(SlowFlow)
        .subscriber(subscriber.clone())
        // Heartbeats follow the workers' clock: the real one here, as the task sleeps for real.
        .clock(aiki::SystemClock)
        .claim_refresh_interval(Duration::from_millis(50))
        .build()
        .unwrap()
        .start();
    let run = h.client.start::<SlowFlow>(aiki::NoInput).await.unwrap();
    run.result().await.unwrap();
    worker.shutdown().await;
    assert!(subscriber.signals.load(std::sync::atomic::Ordering::SeqCst) > 0);
    let heartbeats = subscriber.heartbeats.lock().unwrap().clone();
    assert!(
        !heartbeats.is_empty(),
        "a 300 ms task spans several 50 ms heartbeats"
    );
    assert!(heartbeats.iter().all(|id| *id == run.id()));
}

#[aiki::task(name = "stuck", retry = fixed(max_attempts = 2, delay_ms = 1))]
async fn stuck(
    ctx: aiki::TaskContext,
    State(executions): State<Executions>,
) -> Result<u32, TaskError> {
    executions.record("stuck");
    if ctx.attempt() == 1 {
        // The first attempt never ends on its own.
        std::future::pending::<()>().await;
    }
    Ok(ctx.attempt())
}

#[aiki::workflow(name = "stuck-flow", version = "1")]
async fn stuck_flow(run: &Run) -> Result<u32, WorkflowError> {
    Stuck.start(run).await
}

async fn shutdown_waits_then_leaves_unfinished_runs_for_recovery(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let idle = Duration::from_secs(90);
    let worker = h
        .worker_builder()
        .register(StuckFlow)
        .shutdown_timeout(Duration::from_millis(200))
        .build()
        .unwrap()
        .start();
    let run = h.client.start::<StuckFlow>(aiki::NoInput).await.unwrap();
    h.reach(&run, RunStatus::Running).await;
    // The task is in flight (a shutdown before it starts releases the run at once instead).
    let deadline = tokio::time::Instant::now() + aiki_tests::PATIENCE;
    while h.executions.count("stuck") == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stopping = tokio::time::Instant::now();
    worker.shutdown().await;
    let waited = stopping.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "it waited for the run ({waited:?})"
    );
    assert_eq!(
        run.status().await.unwrap(),
        RunStatus::Running,
        "left for recovery"
    );
    h.client
        .set_config(ConfigKey::ClaimIdleTimeout, idle.as_millis() as i64)
        .await
        .unwrap();
    h.deploy(|w| w.register(StuckFlow)).await;
    h.recover_claim(run.id(), idle, Duration::from_secs(30))
        .await;
    assert_eq!(
        run.result().await.unwrap(),
        2,
        "recovered, the interrupted attempt retried"
    );
}

on_every_backend!(
    shutdown_waits_then_leaves_unfinished_runs_for_recovery,
    runs_reach_only_workers_of_their_pool,
    daemons_run_on_their_own,
    a_custom_subscriber_discovers_work_and_gets_its_own_heartbeats,
    store_calls_per_task_step,
    a_store_error_is_retried_in_real_time_under_a_test_clock,
    a_worker_on_a_store_that_only_executes_runs_no_daemons,
    one_worker_sweeps_and_another_takes_over_when_it_stops,
    the_daemons_sweep_on_their_own_interval_not_on_every_poll,
);

/// Waits (real time, bounded) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + aiki_tests::PATIENCE;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Of two workers on one store, only the holder of the daemons' lease sweeps; when it stops
/// gracefully the other takes over at once, and when it crashes, once its lease expired.
async fn one_worker_sweeps_and_another_takes_over_when_it_stops(backend: Backend) {
    let inner = backend.open().await;
    let clock = aiki::ManualClock::new(aiki::Clock::now(&aiki::SystemClock));
    let start = |store: &Arc<Counting>, id: &str| {
        let store: BoxStore = store.clone();
        Worker::builder(store)
            .register(CountTo)
            .worker_id(id)
            .clock(clock.clone())
            .poll_interval(Duration::from_millis(5))
            .build()
            .unwrap()
            .start()
    };
    let (a, b, c) = (
        Arc::new(Counting::new(inner.clone())),
        Arc::new(Counting::new(inner.clone())),
        Arc::new(Counting::new(inner.clone())),
    );
    let worker_a = start(&a, "worker-a");
    until("a leads", || a.calls("wake_due") > 0).await;
    let worker_b = start(&b, "worker-b");
    let polls = b.calls("claim");
    until("b polls", || b.calls("claim") >= polls + 20).await;
    assert_eq!(b.calls("wake_due"), 0, "only the lease holder sweeps");
    assert!(b.calls("acquire_lease") >= 1, "b asked for the lease");
    // A graceful stop gives the lease up: b sweeps without the clock moving.
    worker_a.shutdown().await;
    until("b takes over from a stopped leader", || {
        b.calls("wake_due") > 0
    })
    .await;
    let worker_c = start(&c, "worker-c");
    let polls = c.calls("claim");
    until("c polls", || c.calls("claim") >= polls + 20).await;
    assert_eq!(c.calls("wake_due"), 0, "b leads, c waits");
    // A crash leaves the lease to expire: c sweeps once the clock passed it.
    worker_b.abort().await;
    let polls = c.calls("claim");
    until("c polls on", || c.calls("claim") >= polls + 20).await;
    assert_eq!(c.calls("wake_due"), 0, "b's lease has not expired yet");
    clock.advance(Duration::from_secs(6));
    until("c takes over from a crashed leader", || {
        c.calls("wake_due") > 0
    })
    .await;
    worker_c.shutdown().await;
}

/// The daemons pass on their own interval, not on the claim loop's polls: a worker polling
/// every 5 ms with a 200 ms daemons' interval sweeps a few times while it polls a hundred.
async fn the_daemons_sweep_on_their_own_interval_not_on_every_poll(backend: Backend) {
    let counting = Arc::new(Counting::new(backend.open().await));
    let store: BoxStore = counting.clone();
    let client = Client::new(store.clone());
    client
        .set_config(ConfigKey::DaemonsInterval, 200)
        .await
        .unwrap();
    let worker = Worker::builder(store)
        .register(CountTo)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    until("it leads", || counting.calls("wake_due") > 0).await;
    let (polls, sweeps) = (counting.calls("claim"), counting.calls("wake_due"));
    until("it polls", || counting.calls("claim") >= polls + 100).await;
    let swept = counting.calls("wake_due") - sweeps;
    let polled = counting.calls("claim") - polls;
    worker.shutdown().await;
    assert!(
        swept * 5 <= polled,
        "{swept} sweeps in {polled} polls: the daemons follow the polls"
    );
    for bad in [0, -1, 1_501] {
        match client.set_config(ConfigKey::DaemonsInterval, bad).await {
            Err(aiki::ClientError::Store(aiki::StoreError::Invalid { message })) => {
                assert!(message.contains("daemons.intervalMs"), "{message}")
            }
            other => panic!("expected {bad} to be refused, got {other:?}"),
        }
    }
    assert_eq!(
        client.runtime_config().await.unwrap().daemons_interval_ms,
        200,
        "a refused value changes nothing"
    );
}

/// A worker given only the executor role (a remote worker's store, whose server sweeps)
/// executes runs and never sweeps; told to run the daemons, it refuses to build.
async fn a_worker_on_a_store_that_only_executes_runs_no_daemons(backend: Backend) {
    let counting = Arc::new(Counting::new(backend.open().await));
    let executor: Arc<dyn aiki::store::ExecutorStore> = counting.clone();
    let refused = Worker::builder(WorkerStore::executor(executor.clone()))
        .register(CountTo)
        .daemons(true)
        .build();
    match refused {
        Err(aiki::ClientError::Config(message)) => {
            assert!(message.contains("sweeper role"), "{message}")
        }
        other => panic!("expected a configuration error, got {other:?}"),
    }
    let worker = Worker::builder(executor)
        .register(CountTo)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(counting.clone()).with_poll_interval(Duration::from_millis(5));
    let handle = client.start::<CountTo>(2).await.unwrap();
    assert_eq!(handle.result().await.unwrap(), 2);
    let polls = counting.calls("claim");
    let deadline = tokio::time::Instant::now() + aiki_tests::PATIENCE;
    while counting.calls("claim") < polls + 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker stopped polling"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.shutdown().await;
    for sweep in [
        "wake_due",
        "release_stale_claims",
        "stall_undelivered",
        "prune_workers",
    ] {
        assert_eq!(counting.calls(sweep), 0, "{sweep}");
    }
}

/// A worker's backoff after a store error, and an execution's retry of a failed write, wait in
/// real time: under a test clock that nobody advances they must not wait forever.
async fn a_store_error_is_retried_in_real_time_under_a_test_clock(backend: Backend) {
    let counting = Arc::new(Counting::new(backend.open().await));
    let store: BoxStore = counting.clone();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(5));
    let handle = client.start::<CountTo>(3).await.unwrap();
    // The first claim fails, and the first entry write.
    counting
        .failures
        .lock()
        .unwrap()
        .extend([("claim", 1), ("put_entry", 1)]);
    let worker = Worker::builder(store)
        .register(CountTo)
        .clock(aiki::ManualClock::new(aiki::Clock::now(&aiki::SystemClock)))
        .build()
        .unwrap()
        .start();
    let result = tokio::time::timeout(aiki_tests::PATIENCE, handle.result()).await;
    worker.shutdown().await;
    assert_eq!(
        result
            .expect("the run ended without the clock moving")
            .unwrap(),
        3
    );
    assert!(counting.calls("claim") >= 2, "the failed claim was retried");
    // The first `running` record alone, then each result with the next call's record.
    assert_eq!(counting.calls("put_entry"), 1 + 1, "one write retried");
    assert_eq!(counting.calls("put_entries"), 3);
}

/// The store calls a ten-step run costs: exactly one entry write per step (the result of a
/// step travels with the `running` record of the next; the first record goes alone, the last
/// result before the completion), one history read per execution, one start, one completion;
/// and no other per-step call.
async fn store_calls_per_task_step(backend: Backend) {
    let counting = Arc::new(Counting::new(backend.open().await));
    let store: BoxStore = counting.clone();
    Client::new(store.clone())
        .set_config(ConfigKey::ClaimIdleTimeout, 24 * 3_600_000)
        .await
        .unwrap();
    let worker = Worker::builder(store.clone())
        .register(CountTo)
        .claim_refresh_interval(Duration::from_secs(3600))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    const RUNS: u64 = 10;
    const STEPS: u64 = 10;
    let mut handles = Vec::new();
    for _ in 0..RUNS {
        handles.push(client.start::<CountTo>(STEPS).await.unwrap());
    }
    for handle in &handles {
        assert_eq!(handle.result().await.unwrap(), STEPS);
    }
    worker.shutdown().await;
    assert_eq!(counting.calls("put_entry"), RUNS);
    assert_eq!(counting.calls("put_entries"), RUNS * STEPS);
    assert_eq!(
        counting.calls("load_history"),
        RUNS,
        "one history read per execution"
    );
    assert_eq!(counting.calls("create_run"), RUNS);
    assert_eq!(counting.calls("transition"), RUNS, "one completion per run");
    assert_eq!(counting.calls("refresh_claim"), 0);
}

/// Runs `runs` ten-step workflows on `store` and returns the statements the store sent, per
/// task step.
async fn statements_per_step(store: BoxStore, counter: impl Fn() -> u64) -> f64 {
    const RUNS: u64 = 20;
    const STEPS: u64 = 10;
    let worker = Worker::builder(store.clone())
        .register(CountTo)
        .build()
        .unwrap()
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    // Warm up (first statements prepare, migrations are done): one run.
    client
        .start::<CountTo>(STEPS)
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    let before = counter();
    let mut handles = Vec::new();
    for _ in 0..RUNS {
        handles.push(client.start::<CountTo>(STEPS).await.unwrap());
    }
    for handle in &handles {
        assert_eq!(handle.result().await.unwrap(), STEPS);
    }
    worker.shutdown().await;
    (counter() - before) as f64 / (RUNS * STEPS) as f64
}

/// What the statement counters say a step costs, group commit included (concurrent runs'
/// entry writes share statements); the rest of a run (start, claim, history load,
/// completion) is amortized over its steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_statements_per_task_step() {
    let path = std::env::temp_dir().join(format!("aiki-count-{}.db", uuid::Uuid::new_v4()));
    let sqlite = Arc::new(
        aiki::store::sqlite::SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap(),
    );
    let counter = sqlite.clone();
    let per_step = statements_per_step(sqlite, move || counter.statements()).await;
    println!("SQLite: {per_step:.2} statements per task step (10-step runs, polling included)");
    assert!(per_step < 3.5, "no history read or extra write per step");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_statements_per_task_step() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    let url = Backend::Postgres.fresh_url().await;
    let postgres = Arc::new(
        aiki::store::postgres::PostgresStore::connect(&url)
            .await
            .unwrap(),
    );
    let counter = postgres.clone();
    let per_step = statements_per_step(postgres, move || counter.statements()).await;
    println!("PostgreSQL: {per_step:.2} statements per task step (10-step runs, polling included)");
    assert!(per_step < 3.5, "no history read or extra write per step");
}
