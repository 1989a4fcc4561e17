//! A graceful shutdown drains: every run in progress finishes the task in flight, starts no
//! new one, and is released for another worker at once (the same routine that serves a pause),
//! instead of holding the shutdown until the whole run ends. The worker's last heartbeat says
//! it stopped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{Liveness, Run, RunStatus, State, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, PATIENCE, on_every_backend};
use tokio::sync::Notify;

static GATES: Mutex<Option<HashMap<String, Arc<Notify>>>> = Mutex::new(None);

fn gate(key: &str) -> Arc<Notify> {
    GATES
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .entry(key.to_owned())
        .or_default()
        .clone()
}

/// Waits at its key's gate.
#[aiki::task(name = "drain-gated")]
async fn gated(key: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record(&format!("gated:{key}"));
    gate(&key).notified().await;
    Ok(key)
}

#[aiki::task(name = "drain-next")]
async fn next(key: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record(&format!("next:{key}"));
    Ok(format!("{key} next"))
}

#[aiki::workflow(name = "drain-flow", version = "1")]
async fn drain_flow(run: &Run, key: String) -> Result<String, WorkflowError> {
    let first = Gated.start(run, key).await?;
    Next.start(run, first).await
}

async fn a_graceful_shutdown_releases_a_run_at_its_next_task(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    let stopping = h
        .worker_builder()
        .register(DrainFlow)
        .worker_id("stopping-worker")
        .shutdown_timeout(PATIENCE)
        .build()
        .unwrap()
        .start();
    let run = h.client.start::<DrainFlow>(key.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while h.executions.count(&format!("gated:{key}")) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let shutdown = tokio::spawn(stopping.shutdown());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!shutdown.is_finished(), "it waits for the task in flight");
    gate(&key).notify_one();
    tokio::time::timeout(PATIENCE, shutdown)
        .await
        .expect("the shutdown ends once the task in flight is recorded")
        .unwrap();
    let released = run.record().await.unwrap();
    assert_eq!(
        released.status,
        RunStatus::Queued,
        "released at its next task, not run to its end"
    );
    assert_eq!(h.executions.count(&format!("next:{key}")), 0);
    let change = h.store.timeline(run.id()).await.unwrap().pop().unwrap();
    assert_eq!(
        (change.from, change.to, change.actor.as_deref()),
        (
            Some(RunStatus::Running),
            RunStatus::Queued,
            Some("stopping-worker")
        )
    );
    // Its last heartbeat said it stopped.
    let now = aiki::Clock::now(&h.clock);
    let worker = h
        .store
        .list_workers(now, 60_000)
        .await
        .unwrap()
        .into_iter()
        .find(|worker| worker.id == "stopping-worker")
        .expect("its row");
    assert!(
        matches!(Liveness::of(&worker, now), Liveness::Stopped { .. }),
        "{worker:?}"
    );

    // Another worker takes it over from its last durable point: the task ran once.
    h.deploy(|w| w.register(DrainFlow)).await;
    assert_eq!(run.result().await.unwrap(), format!("{key} next"));
    assert_eq!(h.executions.count(&format!("gated:{key}")), 1);
    assert_eq!(h.executions.count(&format!("next:{key}")), 1);
}

on_every_backend!(a_graceful_shutdown_releases_a_run_at_its_next_task);
