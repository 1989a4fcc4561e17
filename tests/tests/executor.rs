//! An executor without a worker: a run claimed by another route (as a push endpoint will claim
//! one, or by its name) is executed by an `Executor` built from a registry, as by a worker,
//! and a drained executor releases what it is handed without starting work.

use aiki::store::{ClaimRequest, RunRecord};
use aiki::{Clock, Executor, Registry, Run, RunStatus, State, TaskError, Workflow, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};

#[aiki::task(name = "exec-double")]
async fn double(n: u64, State(executions): State<Executions>) -> Result<u64, TaskError> {
    executions.record("exec-double");
    Ok(n * 2)
}

#[aiki::workflow(name = "exec-twice", version = "1")]
async fn twice(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let once = Double.start(run, n).await?;
    Double.start(run, once).await
}

#[aiki::workflow(name = "exec-elsewhere", version = "1")]
async fn elsewhere(_run: &Run, n: u64) -> Result<u64, WorkflowError> {
    Ok(n)
}

/// Claims the one queued run for `executor`, as another route would.
async fn claim_for(h: &Harness, executor: &Executor) -> RunRecord {
    let namespaces = executor.registry().namespaces().cloned().collect();
    let request = ClaimRequest::new(executor.id(), namespaces, "default", 1, h.clock.now());
    let mut claimed = h.store.claim(request).await.unwrap().runs;
    assert_eq!(claimed.len(), 1, "one queued run");
    claimed.remove(0)
}

fn executor(h: &Harness, registry: &Registry, id: &str) -> Executor {
    Executor::builder(h.store.clone(), registry.clone())
        .id(id)
        .clock(h.clock.clone())
        .build()
        .unwrap()
}

async fn an_executor_runs_what_another_route_claimed(backend: Backend) {
    let h = Harness::new(backend).await;
    let registry = Registry::builder()
        .register(Twice)
        .task(Double)
        .state(h.executions.clone())
        .build()
        .unwrap();
    let run = h.client.start::<Twice>(3).await.unwrap();

    // Drained before it is handed the run: it starts no task and releases the run, as a
    // worker's executions do at a graceful shutdown.
    let draining = executor(&h, &registry, "route-a");
    draining.drain();
    let claimed = claim_for(&h, &draining).await;
    assert_eq!(claimed.owner.as_deref(), Some("route-a"));
    draining.execute(claimed).await;
    let released = run.record().await.unwrap();
    assert_eq!(released.status, RunStatus::Queued, "{released:?}");
    assert_eq!(h.executions.count("exec-double"), 0, "no task started");

    // Another executor of the same registry, handed the run by name (as a push hands it),
    // takes it to the end; a duplicated delivery claims nothing.
    let other = executor(&h, &registry, "route-b");
    assert!(other.claim_and_execute(run.id()).await.unwrap());
    assert!(!other.claim_and_execute(run.id()).await.unwrap());
    let ended = run.record().await.unwrap();
    assert_eq!(ended.status, RunStatus::Completed, "{ended:?}");
    assert_eq!(run.result().await.unwrap(), 12);
    assert_eq!(h.executions.count("exec-double"), 2);
}

async fn a_run_the_registry_does_not_serve_is_released_at_once(backend: Backend) {
    let h = Harness::new(backend).await;
    let registry = Registry::builder().register(Twice).build().unwrap();
    let run = h.client.start::<Elsewhere>(1).await.unwrap();
    let executor = executor(&h, &registry, "route-a");
    // Claimed for it by a route that did not ask which versions it serves.
    let request = ClaimRequest::new(
        executor.id(),
        vec![Elsewhere::namespace()],
        "default",
        1,
        h.clock.now(),
    );
    let claimed = h.store.claim(request).await.unwrap().runs.remove(0);
    executor.execute(claimed.clone()).await;
    let released = run.record().await.unwrap();
    assert_eq!(released.status, RunStatus::Queued, "{released:?}");
    assert_eq!(released.revision, claimed.revision + 1);
    assert_eq!(released.owner, None);
}

on_every_backend!(
    an_executor_runs_what_another_route_claimed,
    a_run_the_registry_does_not_serve_is_released_at_once
);
