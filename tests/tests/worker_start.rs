//! A worker's start: the runs its first claim pass finds are executed before its housekeeping
//! (the catalog it publishes, the daemons' lease and sweeps, the reconciliation of its
//! schedules) reaches the store, so that a worker restarted after a crash finishes the work it
//! finds first; only one heartbeat goes at once, so that operators see who holds those runs.
//! Checked by the order of the calls the store answered.

use std::sync::Arc;
use std::time::Duration;

use aiki::{BoxStore, Client, Run, TaskError, Worker, WorkflowError};
use aiki_tests::{Backend, PATIENCE, on_every_backend};

use crate::counting;

use counting::Counting;

#[aiki::task(name = "ws-step")]
async fn ws_step(n: u32) -> Result<u32, TaskError> {
    Ok(n + 1)
}

#[aiki::workflow(name = "ws-found", version = "1")]
async fn ws_found(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    let n = WsStep.start(run, n).await?;
    WsStep.start(run, n).await
}

/// The housekeeping calls of a worker's start.
const HOUSEKEEPING: [&str; 3] = ["publish_catalog", "acquire_lease", "declare_schedules"];

async fn a_started_worker_finishes_the_runs_it_finds_before_its_housekeeping(backend: Backend) {
    let store = backend.open().await;
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(5));
    // Queued while no worker runs, as after a crash.
    let runs = [
        client.start::<WsFound>(1).await.unwrap(),
        client.start::<WsFound>(10).await.unwrap(),
    ];
    let counting = Arc::new(Counting::new(store.clone()));
    let worker = Worker::builder(counting.clone() as BoxStore)
        .register(WsFound)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    for (run, expected) in runs.iter().zip([3, 12]) {
        let output = tokio::time::timeout(PATIENCE, run.result())
            .await
            .expect("the run ends")
            .unwrap();
        assert_eq!(output, expected);
    }
    // Then the housekeeping, every part of it.
    tokio::time::timeout(PATIENCE, async {
        while HOUSEKEEPING
            .iter()
            .any(|call| counting.first_call(call).is_none())
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the worker's housekeeping starts once the runs it found have ended");
    worker.shutdown().await;
    assert!(
        counting.first_call("record_worker").is_some(),
        "the worker is listed"
    );
    // Both runs' completions (the only transitions) came first.
    assert_eq!(counting.calls("transition"), 2, "the two completions");
    let completed = counting.last_call("transition").expect("completed");
    for call in HOUSEKEEPING {
        let at = counting.first_call(call).expect("called");
        assert!(
            at > completed,
            "{call} reached the store before the runs the first claim pass found had completed"
        );
    }
}

on_every_backend!(a_started_worker_finishes_the_runs_it_finds_before_its_housekeeping);
