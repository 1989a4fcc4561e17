//! Worker behaviour: pools, standalone daemons, and the store round trips a task step costs
//! (counted by the SQL stores' own statement counters, not guessed).

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use aiki::{BoxStore, Client, Run, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};

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
    // A worker that serves no workflow is just the daemons: here, it stalls the undelivered run.
    let daemons = Worker::builder(h.store.clone())
        .clock(h.clock.clone())
        .poll_interval(Duration::from_millis(5))
        .max_age(Duration::from_secs(60))
        .build()
        .unwrap()
        .start();
    h.advance(Duration::from_secs(61));
    h.reach(&run, RunStatus::Stalled).await;
    daemons.shutdown().await;
}

on_every_backend!(
    runs_reach_only_workers_of_their_pool,
    daemons_run_on_their_own
);

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

/// One task step is two durable writes (`running` before the handler, the result after); the
/// rest of a run (start, claim, history load, completion) is amortized over its steps.
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
    assert!(per_step >= 2.0, "two durable writes per step");
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
    assert!(per_step >= 2.0, "two durable writes per step");
    assert!(per_step < 3.5, "no history read or extra write per step");
}
