//! Wait sets: stored with a suspension, returned with the run, and waking a run only when what
//! it awaits arrives.

use super::*;

/// Ends a queued child run with `end` (claiming it first, unless it is cancelled).
async fn end_child(store: &dyn Store, child: &RunRecord, end: RunStatus, now: Millis) {
    let revision = if end == RunStatus::Cancelled {
        store.get_run(child.id).await.expect("get_run").revision
    } else {
        let claimed = store
            .claim(claim_request(&child.namespace, "worker", 1, now))
            .await
            .expect("claim child")
            .runs;
        assert_eq!(claimed.len(), 1, "the child is claimed");
        claimed[0].revision
    };
    store
        .transition(child.id, revision, Transition::to(end, now))
        .await
        .expect("end child");
}

async fn suspend(store: &dyn Store, run: &RunRecord, to: RunStatus, wait: WaitSpec) -> RunRecord {
    let landed = store
        .transition(
            run.id,
            run.revision,
            Transition::to(to, LOCAL_TIME + 1)
                .due_at(LOCAL_TIME + 99_000)
                .wait(wait),
        )
        .await
        .expect("suspend");
    assert_eq!(landed.status, to, "nothing awaited is there yet");
    landed
}

async fn status(store: &dyn Store, id: RunId) -> RunStatus {
    store.get_run(id).await.expect("get_run").status
}

/// A suspension's wait set comes back with the run while it is suspended, and not after.
pub async fn check_wait_set_is_stored_with_the_suspension(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let wait = WaitSpec::default()
        .sleep("nap", now + 5_000)
        .event_until("approved", 2, Some(now + 9_000))
        .retry("charge:ab12", 3, now + 7_000);
    let waiting = suspend(store, &run, RunStatus::AwaitingEvent, wait.clone()).await;
    assert_eq!(
        waiting.wait.as_ref(),
        Some(&wait),
        "returned by the transition"
    );
    let read = store.get_run(run.id).await.expect("get_run");
    assert_eq!(read.wait.as_ref(), Some(&wait), "returned by get_run");
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(
        history.run.wait.as_ref(),
        Some(&wait),
        "returned with the history"
    );

    let woken = store
        .transition(
            run.id,
            waiting.revision,
            Transition::to(RunStatus::Scheduled, now + 2).due_at(now + 2),
        )
        .await
        .expect("wake");
    assert_eq!(
        woken.wait, None,
        "a run no longer suspended waits on nothing"
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run").wait, None);
}

/// Any event wakes a run awaiting one, whether its wait set names it or not (code deployed
/// since the suspension may wait on that name first), and with no wait set at all.
pub async fn check_any_event_wakes_a_run_awaiting_one(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    suspend(
        store,
        &run,
        RunStatus::AwaitingEvent,
        WaitSpec::default().event("approved", 0),
    )
    .await;
    let other = store
        .append_event(event(run.id, "manager_approval", json!(1), now + 2))
        .await
        .expect("append");
    assert_eq!(
        other,
        AppendOutcome::Appended {
            index: 0,
            woke: true
        }
    );
    assert_eq!(status(store, run.id).await, RunStatus::Queued);

    let legacy = running(store, "worker", now).await;
    store
        .transition(
            legacy.id,
            legacy.revision,
            Transition::to(RunStatus::AwaitingEvent, now + 1).due_at(now + 99_000),
        )
        .await
        .expect("suspend without a wait set");
    let any = store
        .append_event(event(legacy.id, "anything", json!(1), now + 2))
        .await
        .expect("append");
    assert_eq!(
        any,
        AppendOutcome::Appended {
            index: 0,
            woke: true
        }
    );
    assert_eq!(status(store, legacy.id).await, RunStatus::Queued);
}

/// A child's end wakes every run whose wait set names it (a child shared by reference id has
/// waiters that are not its parent), leaves runs waiting on other children alone, and wakes a
/// parent suspended without a wait set.
pub async fn check_child_end_wakes_every_run_awaiting_it(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let (child, _) = start_child_run(store, &parent, "shared", now).await;
    let sharer = running(store, "worker", now).await;
    let bystander = running(store, "worker", now).await;
    let (unrelated, _) = start_child_run(store, &bystander, "other", now).await;
    let legacy = running(store, "worker", now).await;
    let (legacy_child, _) = start_child_run(store, &legacy, "legacy", now).await;

    let await_child = |id| WaitSpec::default().child(id);
    suspend(
        store,
        &parent,
        RunStatus::AwaitingChildWorkflow,
        await_child(child.id),
    )
    .await;
    suspend(
        store,
        &sharer,
        RunStatus::AwaitingChildWorkflow,
        await_child(child.id),
    )
    .await;
    suspend(
        store,
        &bystander,
        RunStatus::AwaitingChildWorkflow,
        await_child(unrelated.id),
    )
    .await;
    store
        .transition(
            legacy.id,
            legacy.revision,
            Transition::to(RunStatus::AwaitingChildWorkflow, now + 1),
        )
        .await
        .expect("suspend without a wait set");

    end_child(store, &child, RunStatus::Completed, now + 2).await;
    assert_eq!(
        status(store, parent.id).await,
        RunStatus::Queued,
        "the parent"
    );
    assert_eq!(
        status(store, sharer.id).await,
        RunStatus::Queued,
        "the sharer"
    );
    assert_eq!(
        status(store, bystander.id).await,
        RunStatus::AwaitingChildWorkflow,
        "a run waiting on another child"
    );
    end_child(store, &legacy_child, RunStatus::Cancelled, now + 3).await;
    assert_eq!(
        status(store, legacy.id).await,
        RunStatus::Queued,
        "a parent without a wait set wakes on its child's end"
    );
}

/// A run waiting for all of its children wakes once: at the last one's end, or at the first
/// that fails or is cancelled. Its suspension lands in `scheduled` when they have all ended
/// already, or one of them failed.
pub async fn check_all_of_wait_wakes_once(store: &dyn Store) {
    let now = LOCAL_TIME;
    for last in [RunStatus::Completed, RunStatus::Failed] {
        let parent = running(store, "worker", now).await;
        let mut children = Vec::new();
        for label in ["a", "b", "c"] {
            children.push(start_child_run(store, &parent, label, now).await.0);
        }
        let all = children
            .iter()
            .fold(WaitSpec::default(), |wait, child| wait.child(child.id))
            .all_children(true);
        // `a` has completed before the suspension: it waits on the other two.
        end_child(store, &children[0], RunStatus::Completed, now).await;
        let waiting = suspend(store, &parent, RunStatus::AwaitingChildWorkflow, all).await;
        end_child(store, &children[1], RunStatus::Completed, now + 2).await;
        let read = store.get_run(parent.id).await.expect("get_run");
        assert_eq!(read.status, RunStatus::AwaitingChildWorkflow, "one is left");
        assert_eq!(read.revision, waiting.revision, "not woken");
        end_child(store, &children[2], last, now + 3).await;
        let woken = store.get_run(parent.id).await.expect("get_run");
        assert_eq!(
            woken.status,
            RunStatus::Queued,
            "the last ({last}) wakes it"
        );
        assert_eq!(woken.revision, waiting.revision + 1, "woken once");
    }

    let parent = running(store, "worker", now).await;
    let (a, _) = start_child_run(store, &parent, "a", now).await;
    let (b, _) = start_child_run(store, &parent, "b", now).await;
    let all = WaitSpec::default()
        .child(a.id)
        .child(b.id)
        .all_children(true);
    let waiting = suspend(
        store,
        &parent,
        RunStatus::AwaitingChildWorkflow,
        all.clone(),
    )
    .await;
    end_child(store, &a, RunStatus::Cancelled, now + 2).await;
    let woken = store.get_run(parent.id).await.expect("get_run");
    assert_eq!(
        woken.status,
        RunStatus::Queued,
        "the first failure wakes it"
    );
    assert_eq!(woken.revision, waiting.revision + 1);

    // Suspending again after `a`'s failure lands at once; so does one whose children all ended.
    let again = store
        .claim(claim_request(&parent.namespace, "worker", 1, now + 4))
        .await
        .expect("claim")
        .runs
        .pop()
        .expect("the parent is claimed again");
    let landed = store
        .transition(
            parent.id,
            again.revision,
            Transition::to(RunStatus::AwaitingChildWorkflow, now + 5).wait(all),
        )
        .await
        .expect("suspend");
    assert_eq!(landed.status, RunStatus::Queued, "a child already failed");

    let parent = running(store, "worker", now).await;
    let (a, _) = start_child_run(store, &parent, "a", now).await;
    end_child(store, &a, RunStatus::Completed, now).await;
    let landed = store
        .transition(
            parent.id,
            parent.revision,
            Transition::to(RunStatus::AwaitingChildWorkflow, now + 1)
                .wait(WaitSpec::default().child(a.id).all_children(true)),
        )
        .await
        .expect("suspend");
    assert_eq!(
        landed.status,
        RunStatus::Queued,
        "every child already ended"
    );
}
