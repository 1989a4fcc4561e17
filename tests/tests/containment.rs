//! Issue 10, items 1, 8 and 9: panics are contained, fan-out joins borrowed calls, and one
//! clock drives every timer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aiki::{Client, Clock, Run, RunStatus, State, TaskContext, TaskError, Worker, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};
use tokio::sync::{Barrier, Notify};

/// Item 1 runs on the real clock: a contained panic ends the run within this.
const SECONDS: Duration = Duration::from_secs(10);

/// A real-clock worker and client on a fresh store.
async fn real_clock(
    backend: Backend,
    configure: impl FnOnce(aiki::WorkerBuilder) -> aiki::WorkerBuilder,
) -> (Client, aiki::WorkerHandle) {
    let store = backend.open().await;
    let worker = configure(Worker::builder(store.clone()).poll_interval(Duration::from_millis(5)))
        .build()
        .expect("worker config")
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    (client, worker)
}

// Item 1: panics are contained.

#[aiki::task(name = "always-panics")]
async fn always_panics(order: String) -> Result<String, TaskError> {
    panic!("the printer is on fire while printing {order}");
}

#[aiki::workflow(name = "panicking-task", version = "1")]
async fn panicking_task(run: &Run, order: String) -> Result<String, WorkflowError> {
    AlwaysPanics.start(run, order).await
}

async fn a_task_that_panics_under_never_fails_the_run_with_its_message(backend: Backend) {
    let (client, worker) = real_clock(backend, |w| w.register(PanickingTask)).await;
    let run = client.start::<PanickingTask>("o-1".into()).await.unwrap();
    let failed = run
        .wait_for_status_timeout(RunStatus::Failed, SECONDS)
        .await
        .expect("the run fails within seconds instead of staying `running`");
    let error = failed.error.expect("the failure is recorded");
    assert_eq!(error.kind, "task_failed");
    for part in [
        "always-panics",
        "panicked",
        "the printer is on fire while printing o-1",
    ] {
        assert!(
            error.message.contains(part),
            "{part:?} in {:?}",
            error.message
        );
    }
    worker.shutdown().await;
}

/// Panics on its first attempt only.
#[aiki::task(name = "panics-once", retry = fixed(max_attempts = 2, delay_ms = 5))]
async fn panics_once(
    input: u64,
    State(attempts): State<AtomicU32>,
    ctx: TaskContext,
) -> Result<u64, TaskError> {
    attempts.fetch_add(1, Ordering::SeqCst);
    if ctx.attempt() == 1 {
        panic!("first attempt");
    }
    Ok(input + 1)
}

#[aiki::workflow(name = "panicking-once", version = "1")]
async fn panicking_once(run: &Run, input: u64) -> Result<u64, WorkflowError> {
    PanicsOnce.start(run, input).await
}

async fn a_task_that_panics_once_is_retried_by_its_policy(backend: Backend) {
    let (client, worker) = real_clock(backend, |w| {
        w.register(PanickingOnce).state(AtomicU32::new(0))
    })
    .await;
    let run = client.start::<PanickingOnce>(41).await.unwrap();
    let done = run
        .wait_for_status_timeout(RunStatus::Completed, SECONDS)
        .await
        .expect("the second attempt completes the run");
    assert_eq!(done.output, Some(serde_json::json!(42)));
    worker.shutdown().await;
}

/// Panics in its own code on its first attempt.
#[aiki::workflow(
    name = "panicking-workflow",
    version = "1",
    retry = fixed(max_attempts = 2, delay_ms = 5)
)]
async fn panicking_workflow(run: &Run, input: u64) -> Result<u64, WorkflowError> {
    if run.attempt() == 1 {
        panic!("workflow bug");
    }
    Ok(input * 2)
}

#[aiki::workflow(name = "panicking-workflow-never", version = "1")]
async fn panicking_workflow_never(_run: &Run, _input: u64) -> Result<u64, WorkflowError> {
    panic!("workflow bug without retries");
}

async fn workflow_code_that_panics_is_a_workflow_error(backend: Backend) {
    let (client, worker) = real_clock(backend, |w| {
        w.register(PanickingWorkflow)
            .register(PanickingWorkflowNever)
    })
    .await;
    let retried = client.start::<PanickingWorkflow>(21).await.unwrap();
    let never = client.start::<PanickingWorkflowNever>(1).await.unwrap();
    let done = retried
        .wait_for_status_timeout(RunStatus::Completed, SECONDS)
        .await
        .expect("the workflow retry policy applies");
    assert_eq!(done.output, Some(serde_json::json!(42)));
    assert_eq!(done.attempts, 2);
    let failed = never
        .wait_for_status_timeout(RunStatus::Failed, SECONDS)
        .await
        .expect("without retries the run fails");
    let error = failed.error.unwrap();
    assert_eq!(error.kind, "panicked");
    assert!(
        error.message.contains("workflow bug without retries"),
        "{error:?}"
    );
    worker.shutdown().await;
}

// Item 8: fan-out joins borrowed calls, truly concurrently.

/// Passes only once every one of its siblings has started too.
#[aiki::task(name = "meet")]
async fn meet(i: u64, State(barrier): State<Barrier>) -> Result<u64, TaskError> {
    barrier.wait().await;
    Ok(i)
}

#[aiki::workflow(name = "fan-out", version = "1")]
async fn fan_out(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let outputs = run.join_all((0..n).map(|i| Meet.start(run, i))).await?;
    Ok(outputs.into_iter().sum())
}

async fn join_all_runs_borrowed_task_calls_concurrently(backend: Backend) {
    const N: u64 = 16;
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(FanOut).state(Barrier::new(N as usize)))
        .await;
    let run = h.client.start::<FanOut>(N).await.unwrap();
    assert_eq!(run.result().await.unwrap(), N * (N - 1) / 2);
}

// Item 9: one clock for all timing.

#[derive(Default)]
struct Gate {
    entered: Notify,
    open: Notify,
}

#[aiki::task(name = "long-task")]
async fn long_task(State(gate): State<Arc<Gate>>) -> Result<u32, TaskError> {
    gate.entered.notify_one();
    gate.open.notified().await;
    Ok(7)
}

#[aiki::workflow(name = "long-flow", version = "1")]
async fn long_flow(run: &Run) -> Result<u32, WorkflowError> {
    LongTask.start(run).await
}

async fn one_advance_past_the_idle_timeout_does_not_release_a_healthy_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let gate = Arc::new(Gate::default());
    // The defaults: refresh every 30 s, release after 90 s without one.
    h.deploy(|w| w.register(LongFlow).state(gate.clone())).await;
    let run = h.client.start::<LongFlow>(aiki::NoInput).await.unwrap();
    gate.entered.notified().await;
    let before = run.record().await.unwrap();
    let target = h.clock.now() + 91_000;
    h.advance(Duration::from_secs(91));
    let deadline = tokio::time::Instant::now() + aiki_tests::PATIENCE;
    while h.clock.now() < target {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the clock got to 91 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Give the daemons time to look at the claim at 91 s.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = run.record().await.unwrap();
    assert_eq!(
        after.status,
        RunStatus::Running,
        "the healthy run kept its claim"
    );
    assert_eq!(
        after.revision, before.revision,
        "nobody released or claimed it"
    );
    gate.open.notify_one();
    assert_eq!(run.result().await.unwrap(), 7);
}

#[aiki::workflow(name = "sleeps-for-ever", version = "1")]
async fn sleeps_for_ever(run: &Run) -> Result<bool, WorkflowError> {
    let outcome = run.sleep("eternity", Duration::MAX).await?;
    Ok(outcome.cancelled)
}

async fn sleeps_longer_than_ten_years_are_refused(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(SleepsForEver)).await;
    let run = h
        .client
        .start::<SleepsForEver>(aiki::NoInput)
        .await
        .unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    let error = failed.error.unwrap();
    assert_eq!(error.kind, "duration_too_long", "{error:?}");
    assert!(error.message.contains("ten years"), "{error:?}");
}

on_every_backend!(
    a_task_that_panics_under_never_fails_the_run_with_its_message,
    a_task_that_panics_once_is_retried_by_its_policy,
    workflow_code_that_panics_is_a_workflow_error,
    join_all_runs_borrowed_task_calls_concurrently,
    one_advance_past_the_idle_timeout_does_not_release_a_healthy_run,
    sleeps_longer_than_ten_years_are_refused,
);
