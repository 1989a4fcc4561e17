//! Recovering failed runs: `retry` after a fix, and the reset rule it shares with the automatic
//! workflow retry (only the call whose unhandled failure failed the run runs again; a handled
//! failure is history; an interrupted at-most-once task only on explicit request; a child whose
//! end its parent acted on only with an override).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aiki::{ClientError, NoInput, RetryOptions, Run, RunStatus, State, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};
use common::{TaskA, TaskB, TaskC};
use tokio::sync::Notify;

const HOUR: Duration = Duration::from_secs(3600);

// A deploy that breaks running runs (a task inserted before recorded ones), and its fix.

#[aiki::workflow(name = "recover-order", version = "1")]
async fn order_good(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input).await?;
    run.sleep("settle", HOUR).await?;
    let b = TaskB.start(run, a).await?;
    TaskC.start(run, b).await
}

#[aiki::workflow(name = "recover-order", version = "1")]
async fn order_broken(run: &Run, input: String) -> Result<String, WorkflowError> {
    let c = TaskC.start(run, input).await?;
    let a = TaskA.start(run, c).await?;
    run.sleep("settle", HOUR).await?;
    TaskB.start(run, a).await
}

async fn a_run_failed_by_a_bad_deploy_completes_after_the_fix_and_a_retry(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(OrderGood)).await;
    let run = h.client.start::<OrderGood>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    h.deploy(|w| w.register(OrderBroken)).await;
    h.advance(HOUR);
    let failed = h.reach(&run, RunStatus::Failed).await;
    assert_eq!(failed.error.as_ref().unwrap().kind, "non_determinism");
    assert_eq!(
        failed.error.as_ref().unwrap().call,
        None,
        "no task call to run again"
    );

    h.deploy(|w| w.register(OrderGood)).await;
    let plan = h.client.any_run(run.id()).retry_plan().await.unwrap();
    assert!(
        plan.rerun.is_empty() && plan.interrupted.is_empty(),
        "{plan:?}"
    );
    let retried = run.retry(RetryOptions::default()).await.unwrap();
    assert_eq!(retried.status, RunStatus::Queued);
    assert_eq!(retried.attempts, failed.attempts + 1);
    assert_eq!(run.result().await.unwrap(), "task-c(task-b(task-a(x)))");
    assert_eq!(
        h.executions.count("task-a"),
        1,
        "recorded: replayed, not run again"
    );
    assert_eq!(h.executions.count("task-b"), 1);
    assert_eq!(
        h.executions.count("task-c"),
        1,
        "the broken code never ran it"
    );
    let timeline = h.store.timeline(run.id()).await.unwrap();
    assert!(
        timeline
            .iter()
            .any(|change| change.from == Some(RunStatus::Failed) && change.reason == "retried"),
        "{timeline:?}"
    );
}

// A handled failure is history; only the unhandled one runs again.

/// Always fails.
#[aiki::task(name = "recover-declined")]
async fn declined(_n: u32, State(executions): State<Executions>) -> Result<u32, TaskError> {
    executions.record("declined");
    Err(TaskError::new("card declined"))
}

/// Fails on its first execution, succeeds afterwards.
#[aiki::task(name = "recover-ship")]
async fn ship(n: u32, State(executions): State<Executions>) -> Result<u32, TaskError> {
    executions.record("ship");
    if executions.count("ship") == 1 {
        return Err(TaskError::new("carrier down"));
    }
    Ok(n + 100)
}

/// Compensates a declined charge.
#[aiki::task(name = "recover-refund")]
async fn refund(n: u32, State(executions): State<Executions>) -> Result<u32, TaskError> {
    executions.record("refund");
    Ok(n)
}

#[aiki::workflow(name = "recover-handled", version = "1")]
async fn handled(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    let n = match Declined.start(run, n).await {
        Ok(n) => n,
        Err(WorkflowError::TaskFailed { .. }) => Refund.start(run, n).await?,
        Err(other) => return Err(other),
    };
    Ship.start(run, n).await
}

#[aiki::workflow(
    name = "recover-handled-auto",
    version = "1",
    retry = fixed(max_attempts = 2, delay_ms = 60000)
)]
async fn handled_auto(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    handled(run, n).await
}

fn counts(h: &Harness) -> [usize; 3] {
    ["declined", "refund", "ship"].map(|task| h.executions.count(task))
}

async fn a_retry_reruns_only_the_unhandled_failure(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Handled)).await;
    let run = h.client.start::<Handled>(7).await.unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    let call = failed
        .error
        .as_ref()
        .unwrap()
        .call
        .clone()
        .expect("the failed call");
    assert!(call.address.starts_with("recover-ship:"), "{call}");
    assert_eq!(counts(&h), [1, 1, 1]);
    let plan = h.client.any_run(run.id()).retry_plan().await.unwrap();
    assert_eq!(plan.rerun, [call]);
    run.retry(RetryOptions::default()).await.unwrap();
    assert_eq!(run.result().await.unwrap(), 107);
    assert_eq!(
        counts(&h),
        [1, 1, 2],
        "the handled decline and its refund replay as recorded; the shipment runs again"
    );
}

async fn a_workflow_retry_follows_the_same_rule(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(HandledAuto)).await;
    let run = h.client.start::<HandledAuto>(7).await.unwrap();
    h.reach(&run, RunStatus::AwaitingRetry).await;
    h.advance(Duration::from_secs(60));
    assert_eq!(run.result().await.unwrap(), 107);
    assert_eq!(counts(&h), [1, 1, 2], "the handled failure is not reset");
}

// An interrupted at-most-once task runs again only when asked.

#[derive(Default)]
struct Gate {
    entered: Notify,
    first: AtomicU32,
}

/// Hangs on its first execution (until its worker is killed); returns at once afterwards.
#[aiki::task(name = "recover-charge-once")]
async fn charge_once(
    n: u32,
    State(executions): State<Executions>,
    State(gate): State<Arc<Gate>>,
) -> Result<u32, TaskError> {
    executions.record("charge");
    if gate.first.fetch_add(1, Ordering::SeqCst) == 0 {
        gate.entered.notify_one();
        std::future::pending::<()>().await;
    }
    Ok(n * 2)
}

#[aiki::workflow(
    name = "recover-interrupted",
    version = "1",
    retry = fixed(max_attempts = 3, delay_ms = 1000)
)]
async fn interrupted(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    ChargeOnce.start(run, n).await
}

const REFRESH: Duration = Duration::from_secs(3600);
const IDLE: Duration = Duration::from_secs(3 * 3600);

async fn an_interrupted_at_most_once_task_reruns_only_when_asked(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let gate = Arc::new(Gate::default());
    let worker = |w: aiki::WorkerBuilder, gate: &Arc<Gate>| {
        w.register(Interrupted)
            .state(gate.clone())
            .claim_refresh_interval(REFRESH)
    };
    h.set_idle_timeout(IDLE).await;
    h.deploy(|w| worker(w, &gate)).await;
    let run = h.client.start::<Interrupted>(21).await.unwrap();
    gate.entered.notified().await;
    h.crash_worker().await;
    h.deploy(|w| worker(w, &gate)).await;
    h.recover_claim(run.id(), IDLE, REFRESH).await;
    let failed = h.reach(&run, RunStatus::Failed).await;
    assert_eq!(
        failed.error.as_ref().unwrap().kind,
        "interrupted",
        "not retried automatically, although the workflow's policy allows 3 attempts"
    );
    assert_eq!(failed.attempts, 1);

    let plan = h.client.any_run(run.id()).retry_plan().await.unwrap();
    assert_eq!(plan.interrupted.len(), 1, "{plan:?}");
    let refused = run.retry(RetryOptions::default()).await.unwrap_err();
    assert!(
        matches!(&refused, ClientError::InterruptedTask { call, .. }
            if call.address.starts_with("recover-charge-once:")),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("--rerun-interrupted"),
        "{refused}"
    );
    let unchanged = run.record().await.unwrap();
    assert_eq!(
        (unchanged.status, unchanged.revision),
        (RunStatus::Failed, failed.revision),
        "nothing changed"
    );
    assert_eq!(h.executions.count("charge"), 1);

    run.retry(RetryOptions::default().rerun_interrupted())
        .await
        .unwrap();
    assert_eq!(run.result().await.unwrap(), 42);
    assert_eq!(h.executions.count("charge"), 2, "run again, as asked");
}

// Statuses a retry does not apply to, and children whose parent has acted on their end.

#[aiki::workflow(name = "recover-child", version = "1")]
async fn child(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    Declined.start(run, n).await
}

#[aiki::workflow(name = "recover-parent", version = "1")]
async fn parent(run: &Run) -> Result<String, WorkflowError> {
    let child = run.child::<Child>(1).await?;
    match child.wait().await {
        Ok(n) => Ok(format!("child gave {n}")),
        Err(error) => Ok(format!("child failed: {}", error.kind())),
    }
}

async fn a_retry_refuses_what_it_does_not_apply_to(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(OrderGood).register(Parent).register(Child))
        .await;
    let done = h.client.start::<OrderGood>("y".into()).await.unwrap();
    h.reach(&done, RunStatus::Sleeping).await;
    let refused = done.retry(RetryOptions::default()).await.unwrap_err();
    assert!(
        matches!(
            &refused,
            ClientError::InvalidAction {
                action: "retry",
                status: RunStatus::Sleeping,
                ..
            }
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("`sleeping`"), "{refused}");

    let parent = h.client.start::<Parent>(NoInput).await.unwrap();
    assert_eq!(parent.result().await.unwrap(), "child failed: child_failed");
    let children = h
        .client
        .list_runs(
            aiki::store::RunFilter::default().parent(parent.id()),
            None,
            10,
        )
        .await
        .unwrap();
    let child = h.client.any_run(children.runs[0].id);
    let before = child.record().await.unwrap();
    assert_eq!(before.status, RunStatus::Failed);
    let refused = child.retry(RetryOptions::default()).await.unwrap_err();
    assert!(
        matches!(&refused, ClientError::ObservedByParent { parent: p, .. } if *p == parent.id()),
        "{refused}"
    );
    assert_eq!(
        child.record().await.unwrap().revision,
        before.revision,
        "nothing changed"
    );
    let retried = child
        .retry(RetryOptions::default().even_if_observed())
        .await
        .unwrap();
    assert_eq!(retried.status, RunStatus::Queued);
}

// A parent replays the child outcome it recorded, whatever a retry makes of the child.

#[aiki::workflow(name = "recover-shipping-child", version = "1")]
async fn shipping_child(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    Ship.start(run, n).await
}

#[aiki::workflow(name = "recover-shipping-parent", version = "1")]
async fn shipping_parent(run: &Run) -> Result<u32, WorkflowError> {
    run.child::<ShippingChild>(1).await?.wait().await
}

async fn a_parent_replays_the_child_outcome_it_recorded(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ShippingParent).register(ShippingChild))
        .await;
    let parent = h.client.start::<ShippingParent>(NoInput).await.unwrap();
    let failed = h.reach(&parent, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().kind, "child_failed");
    let children = h
        .client
        .list_runs(
            aiki::store::RunFilter::default().parent(parent.id()),
            None,
            10,
        )
        .await
        .unwrap();
    let child = h.client.handle::<ShippingChild>(children.runs[0].id);
    let plan = h.client.any_run(child.id()).retry_plan().await.unwrap();
    assert_eq!(
        plan.observed_by,
        Some(parent.id()),
        "the parent recorded the failure"
    );
    // The child, retried anyway, now completes (its task succeeds the second time)...
    child
        .retry(RetryOptions::default().even_if_observed())
        .await
        .unwrap();
    assert_eq!(child.result().await.unwrap(), 101);
    // ...but the parent replays the failure it recorded, not the child's new row: a plain
    // retry is refused as one that fails again, and a forced one does fail again.
    let refused = parent.retry(RetryOptions::default()).await.unwrap_err();
    assert!(
        matches!(
            refused,
            ClientError::RetryWouldFailAgain {
                status: RunStatus::Completed,
                ..
            }
        ),
        "{refused}"
    );
    let retried = parent.retry(RetryOptions::default().force()).await.unwrap();
    let again = h.reach_next(&parent, RunStatus::Failed, &retried).await;
    assert_eq!(again.error.unwrap().kind, "child_failed");
    assert_eq!(
        h.executions.count("ship"),
        2,
        "the parent did not start the child again"
    );
    // With the child: the parent forgets what it recorded and reads the child as it is now.
    let retried = parent
        .retry(RetryOptions::default().rerun_child())
        .await
        .unwrap();
    assert_eq!(retried.status, RunStatus::Queued);
    assert_eq!(parent.result().await.unwrap(), 101);
    assert_eq!(
        h.executions.count("ship"),
        2,
        "the completed child is not retried"
    );
}

// Bulk actions.

async fn bulk_actions_list_then_act_and_skip_what_changed(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Child)).await;
    let mut failed = Vec::new();
    for n in 0..3 {
        let run = h.client.start::<Child>(n).await.unwrap();
        h.reach(&run, RunStatus::Failed).await;
        failed.push(run.id());
    }
    h.deploy(|w| w).await;
    let filter = aiki::store::RunFilter::default().workflow("recover-child");
    let retry = aiki::BulkAction::Retry(RetryOptions::default());
    let mut planned = h
        .client
        .bulk_plan(retry, filter.clone(), 100)
        .await
        .unwrap();
    planned.sort();
    failed.sort();
    assert_eq!(planned, failed, "the dry run lists the failed runs");
    assert_eq!(
        h.client
            .bulk_plan(retry, filter.clone(), 2)
            .await
            .unwrap()
            .len(),
        2,
        "at most max"
    );
    let none = h
        .client
        .bulk_plan(aiki::BulkAction::Requeue, filter.clone(), 100)
        .await
        .unwrap();
    assert!(none.is_empty(), "nothing stalled");
    // One of them is retried by hand in between: the bulk action skips it and says why.
    h.client
        .any_run(planned[0])
        .retry(RetryOptions::default())
        .await
        .unwrap();
    let outcomes = h.client.bulk(retry, &planned).await;
    assert_eq!(outcomes.len(), 3);
    assert_eq!(
        outcomes.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        planned,
        "in order"
    );
    match &outcomes[0].1 {
        aiki::BulkOutcome::Skipped(ClientError::InvalidAction { status, .. }) => {
            assert_eq!(*status, RunStatus::Queued)
        }
        other => panic!("skipped: {other:?}"),
    }
    for (_, outcome) in &outcomes[1..] {
        assert!(
            matches!(outcome, aiki::BulkOutcome::Done(run) if run.status == RunStatus::Queued),
            "{outcome:?}"
        );
    }
}

on_every_backend!(
    a_parent_replays_the_child_outcome_it_recorded,
    bulk_actions_list_then_act_and_skip_what_changed,
    a_run_failed_by_a_bad_deploy_completes_after_the_fix_and_a_retry,
    a_retry_reruns_only_the_unhandled_failure,
    a_workflow_retry_follows_the_same_rule,
    an_interrupted_at_most_once_task_reruns_only_when_asked,
    a_retry_refuses_what_it_does_not_apply_to,
);
