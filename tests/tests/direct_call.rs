//! A `#[task]` function called directly from workflow code fails the run before its body runs;
//! called from a task (as a helper) or from a test, it is an ordinary function.

use std::sync::Mutex;

use aiki::{Run, RunStatus, TaskError, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};

/// The amounts charged, by any backend's run of these tests.
static CHARGED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

fn charged(cents: u64) -> usize {
    CHARGED
        .lock()
        .unwrap()
        .iter()
        .filter(|c| **c == cents)
        .count()
}

#[aiki::task(name = "charge-card")]
async fn charge_card(cents: u64) -> Result<u64, TaskError> {
    CHARGED.lock().unwrap().push(cents);
    Ok(cents)
}

/// A task that uses another task's function as a helper: allowed.
#[aiki::task(name = "charge-twice")]
async fn charge_twice(cents: u64) -> Result<u64, TaskError> {
    Ok(charge_card(cents).await? + charge_card(cents).await?)
}

#[aiki::workflow(name = "charges-directly", version = "1")]
async fn charges_directly(_run: &Run, cents: u64) -> Result<u64, WorkflowError> {
    // The mistake: the function, not `ChargeCard.start(run, cents)`.
    charge_card(cents).await.map_err(WorkflowError::failed)
}

#[aiki::workflow(name = "charges-through-tasks", version = "1")]
async fn charges_through_tasks(run: &Run, cents: u64) -> Result<u64, WorkflowError> {
    let once = ChargeCard.start(run, cents).await?;
    let twice = ChargeTwice.start(run, cents).await?;
    Ok(once + twice)
}

async fn a_direct_call_fails_the_run_before_the_body_runs(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ChargesDirectly).register(ChargesThroughTasks))
        .await;
    let cents = match backend {
        Backend::Memory => 701,
        Backend::Sqlite => 702,
        Backend::Postgres => 703,
    };
    let run = h.client.start::<ChargesDirectly>(cents).await.unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    let error = failed.error.expect("the run records why");
    assert_eq!(error.kind, "direct_task_call");
    assert!(
        error
            .message
            .contains("`charge_card` is the function of task `charge-card`")
            && error
                .message
                .contains("`ChargeCard.start(run, input).await`"),
        "the message shows the right call: {}",
        error.message
    );
    assert_eq!(failed.attempts, 1, "not retried: a retry cannot fix it");
    assert_eq!(charged(cents), 0, "the direct call's body never ran");

    // Through tasks (one of which calls the function as a helper) it runs.
    let run = h
        .client
        .start::<ChargesThroughTasks>(cents * 10)
        .await
        .unwrap();
    assert_eq!(run.result().await.unwrap(), cents * 30);
    assert_eq!(
        charged(cents * 10),
        3,
        "once through its task, twice as a helper"
    );
}

on_every_backend!(a_direct_call_fails_the_run_before_the_body_runs);

/// A unit test of the function itself: outside workflow code, nothing is in the way.
#[tokio::test]
async fn a_test_may_call_the_task_fn() {
    assert_eq!(charge_card(3).await.unwrap(), 3);
}
