//! Forking ended runs: what a fork carries (completed tasks, ended children, sleeps, events),
//! what it runs again, its lineage and idempotency keys, and what it refuses.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use aiki::{ClientError, NoInput, Run, RunStatus, State, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};
use common::{TaskA, TaskB};

#[aiki::workflow(name = "fork-settles", version = "1")]
async fn settles(run: &Run) -> Result<(), WorkflowError> {
    run.sleep("settle", Duration::from_secs(3600)).await?;
    Ok(())
}

/// Fails on its first execution; records the idempotency key of every execution.
#[aiki::task(name = "fork-notify")]
async fn notify_partner(
    n: u32,
    State(executions): State<Executions>,
    State(keys): State<Keys>,
    ctx: aiki::TaskContext,
) -> Result<u32, TaskError> {
    executions.record("notify");
    keys.0.lock().unwrap().push(ctx.idempotency_key());
    if executions.count("notify") == 1 {
        return Err(TaskError::new("mail server down"));
    }
    Ok(n + 1)
}

/// The idempotency keys `notify` saw.
#[derive(Clone, Default)]
struct Keys(Arc<std::sync::Mutex<Vec<String>>>);

#[aiki::workflow(name = "fork-approval-child", version = "1")]
async fn approval_child(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    TaskB.start(run, n.to_string()).await?;
    Ok(n * 10)
}

#[aiki::workflow(name = "fork-approval", version = "1", events(approved = u32))]
async fn approval(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    TaskA.start(run, n.to_string()).await?;
    let approved = run.events().approved().wait().await?;
    let child = run.child::<ApprovalChild>(approved).await?;
    let from_child = child.wait().await?;
    NotifyPartner.start(run, from_child).await
}

async fn a_fork_carries_events_and_ended_children_and_keeps_idempotency_keys(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let keys = Keys::default();
    let state = keys.clone();
    h.deploy(move |w| w.register(Approval).register(ApprovalChild).state(state))
        .await;
    let run = h.client.start::<Approval>(1).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<ApprovalApproved>(4).await.unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    assert!(failed.error.unwrap().message.contains("mail server down"));
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );

    // Not ended yet, or an address it never recorded: refused, nothing created.
    let runs_before = h
        .client
        .list_runs(Default::default(), None, 100)
        .await
        .unwrap()
        .runs
        .len();
    let unknown = run
        .fork(aiki::ForkOptions::default().drop("nothing:1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&unknown, ClientError::UnknownAddress { address, .. } if address == "nothing:1"),
        "{unknown}"
    );
    assert_eq!(
        h.client
            .list_runs(Default::default(), None, 100)
            .await
            .unwrap()
            .runs
            .len(),
        runs_before,
        "nothing created"
    );

    let fork = run.fork(aiki::ForkOptions::default()).await.unwrap();
    assert_ne!(fork.id(), run.id());
    let again = run.fork(aiki::ForkOptions::default()).await.unwrap();
    assert_eq!(again.id(), fork.id(), "the same options give the same fork");
    let record = fork.record().await.unwrap();
    assert_eq!(
        record.lineage.map(|l| (l.forked_from, l.root)),
        Some((run.id(), run.id()))
    );
    // It completes without the event being sent again, the child not run again.
    assert_eq!(
        tokio::time::timeout(aiki_tests::PATIENCE, fork.result())
            .await
            .expect("in time")
            .unwrap(),
        41
    );
    assert_eq!(h.executions.count("task-a"), 1, "carried");
    assert_eq!(
        h.executions.count("task-b"),
        1,
        "the ended child is carried, not run again"
    );
    assert_eq!(
        h.executions.count("notify"),
        2,
        "the failed call runs again in the fork"
    );
    let keys = keys.0.lock().unwrap().clone();
    assert_eq!(keys.len(), 2);
    assert_eq!(
        keys[0], keys[1],
        "the fork's re-run call hands over the original's key"
    );
    assert_eq!(
        run.status().await.unwrap(),
        RunStatus::Failed,
        "the source stays as it was"
    );
}

async fn a_fork_refuses_a_run_that_has_not_ended(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Settles)).await;
    let run = h.client.start::<Settles>(NoInput).await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    let refused = run.fork(aiki::ForkOptions::default()).await.unwrap_err();
    assert!(
        matches!(
            &refused,
            ClientError::InvalidAction {
                action: "fork",
                status: RunStatus::Sleeping,
                ..
            }
        ),
        "{refused}"
    );
}

// Dropping a child start drops its wait's records.

/// Sleeps `minutes`, then answers.
#[aiki::workflow(name = "fork-slow-child", version = "1")]
async fn slow_child(run: &Run, minutes: u32) -> Result<u32, WorkflowError> {
    run.sleep("work", Duration::from_secs(60) * minutes).await?;
    Ok(minutes)
}

/// Waits an hour for a child that takes `minutes`: its answer, or 0 when the wait timed out.
#[aiki::workflow(name = "fork-patient", version = "1")]
async fn patient(run: &Run, minutes: u32) -> Result<u32, WorkflowError> {
    let child = run.child::<SlowChild>(minutes).await?;
    Ok(child
        .wait_timeout(Duration::from_secs(3600))
        .await?
        .unwrap_or(0))
}

/// Waits for a child started under a reference id.
#[aiki::workflow(name = "fork-named-child", version = "1")]
async fn named_child(run: &Run, minutes: u32) -> Result<u32, WorkflowError> {
    let child = run
        .child::<SlowChild>(minutes)
        .reference_id(format!("the-child-{minutes}"))
        .await?;
    child.wait().await
}

/// A fork dropping a child start starts the child again and waits for it anew: the timeout
/// the original recorded is not carried (it would time the new wait out at once), nor is the
/// wait's timer.
async fn a_fork_dropping_a_child_start_drops_its_waits_records(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Patient).register(SlowChild)).await;
    // The child takes two hours: the parent gives up after one.
    let run = h.client.start::<Patient>(120).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    h.advance(Duration::from_secs(3600));
    assert_eq!(run.result().await.unwrap(), 0, "timed out");
    let history = h.store.load_history(run.id()).await.unwrap();
    let start = history
        .entries
        .iter()
        .find(|entry| entry.kind == aiki::store::EntryKind::Child)
        .expect("the child start")
        .address
        .clone();
    assert!(history.events.iter().any(|event| event.timed_out));

    let fork = run
        .fork(aiki::ForkOptions::default().drop(start))
        .await
        .unwrap();
    let waiting = h.reach(&fork, RunStatus::AwaitingChildWorkflow).await;
    let forked = h.store.load_history(fork.id()).await.unwrap();
    assert!(forked.events.is_empty(), "no timeout carried: {forked:?}");
    assert!(
        forked
            .sleeps
            .iter()
            .all(|sleep| sleep.wake_at > aiki::Clock::now(&h.clock)),
        "no wait timer carried that has passed: {:?}",
        forked.sleeps
    );
    assert_eq!(forked.children.len(), 1);
    assert_ne!(
        forked.children[0].id, history.children[0].id,
        "a new child run"
    );
    assert!(waiting.wait.is_some());
}

/// A fork dropping a child start that names a reference id is refused: the fork would find the
/// same child run by that id.
async fn a_fork_refuses_to_drop_a_child_start_with_a_reference_id(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(NamedChild).register(SlowChild))
        .await;
    let run = h.client.start::<NamedChild>(1).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    let child = h.store.load_history(run.id()).await.unwrap().children[0].id;
    h.reach(&h.client.handle::<SlowChild>(child), RunStatus::Sleeping)
        .await;
    h.advance(Duration::from_secs(60));
    assert_eq!(run.result().await.unwrap(), 1);
    let start = h
        .store
        .load_history(run.id())
        .await
        .unwrap()
        .entries
        .into_iter()
        .find(|entry| entry.kind == aiki::store::EntryKind::Child)
        .expect("the child start")
        .address;
    let refused = run
        .fork(aiki::ForkOptions::default().drop(start.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClientError::SharedChildDropped { address, .. } if *address == start),
        "{refused}"
    );
    // Carried as it is, the fork reads that child's outcome.
    let fork = run.fork(aiki::ForkOptions::default()).await.unwrap();
    assert_eq!(fork.result().await.unwrap(), 1);
}

on_every_backend!(
    a_fork_carries_events_and_ended_children_and_keeps_idempotency_keys,
    a_fork_refuses_a_run_that_has_not_ended,
    a_fork_dropping_a_child_start_drops_its_waits_records,
    a_fork_refuses_to_drop_a_child_start_with_a_reference_id,
);
