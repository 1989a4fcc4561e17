//! Wake-ups by what the wait set names, whatever the status label says: a run awaiting a child
//! and an event at once (stored as `awaiting_child_workflow`) is woken by either, first come.

use super::*;

/// A run suspended on a child and an event at once, as `select!` over `child.wait()` and an
/// event wait suspends it.
async fn awaiting_child_and_event(store: &dyn Store, now: Millis) -> (RunRecord, RunRecord) {
    let parent = running(store, "worker", now).await;
    let (child, _) = start_child_run(store, &parent, "first-of", now).await;
    let waiting = store
        .transition(
            parent.id,
            parent.revision,
            Transition::to(RunStatus::AwaitingChildWorkflow, now + 1)
                .wait(WaitSpec::default().child(child.id).event("cancel", 0)),
        )
        .await
        .expect("suspend on both");
    assert_eq!(waiting.status, RunStatus::AwaitingChildWorkflow);
    (waiting, child)
}

async fn last_change(store: &dyn Store, id: RunId) -> crate::StatusChange {
    store
        .timeline(id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change")
}

/// Event first: the event wakes the run although its label says it awaits a child; the
/// timeline says an event arrived. Child first: the child's end wakes it; the timeline says a
/// child ended.
pub async fn check_first_of_a_child_and_an_event_wakes_the_run(store: &dyn Store) {
    let now = LOCAL_TIME;
    let (parent, child) = awaiting_child_and_event(store, now).await;
    let sent = store
        .append_event(event(parent.id, "cancel", json!(true), now + 2))
        .await
        .expect("append");
    assert_eq!(
        sent,
        AppendOutcome::Appended {
            index: 0,
            woke: true
        },
        "the event wakes a run whose wait set awaits one"
    );
    let woken = store.get_run(parent.id).await.expect("get_run");
    assert_eq!(woken.status, RunStatus::Queued);
    assert_eq!(woken.revision, parent.revision + 1);
    let change = last_change(store, parent.id).await;
    assert_eq!(change.cause, Some(crate::ChangeCause::Event));
    assert_eq!(change.reason, "an event arrived");
    // The child ending later wakes nothing more: the run no longer waits.
    let claimed = store
        .claim(claim_request(&child.namespace, "worker", 1, now + 3))
        .await
        .expect("claim child")
        .runs
        .remove(0);
    store
        .transition(
            child.id,
            claimed.revision,
            Transition::to(RunStatus::Completed, now + 4),
        )
        .await
        .expect("complete child");
    assert_eq!(
        store.get_run(parent.id).await.expect("get_run").revision,
        woken.revision,
        "no second wake-up"
    );

    let (parent, child) = awaiting_child_and_event(store, now).await;
    let claimed = store
        .claim(claim_request(&child.namespace, "worker", 1, now + 2))
        .await
        .expect("claim child")
        .runs
        .remove(0);
    store
        .transition(
            child.id,
            claimed.revision,
            Transition::to(RunStatus::Completed, now + 3),
        )
        .await
        .expect("complete child");
    let woken = store.get_run(parent.id).await.expect("get_run");
    assert_eq!(woken.status, RunStatus::Queued, "the child's end wakes it");
    let change = last_change(store, parent.id).await;
    assert_eq!(change.cause, Some(crate::ChangeCause::Child));
    assert_eq!(change.reason, "a child run ended");
    let late = store
        .append_event(event(parent.id, "cancel", json!(true), now + 4))
        .await
        .expect("append");
    assert_eq!(
        late,
        AppendOutcome::Appended {
            index: 0,
            woke: false
        },
        "kept for the next wait, waking nothing"
    );
}

/// An event wakes no run whose wait set awaits none (a sleep, a child alone, a retry), and is
/// kept for the wait that comes.
pub async fn check_an_event_wakes_only_runs_awaiting_one(store: &dyn Store) {
    let now = LOCAL_TIME;
    let sleeping = running(store, "worker", now).await;
    store
        .transition(
            sleeping.id,
            sleeping.revision,
            Transition::to(RunStatus::Sleeping, now + 1)
                .due_at(now + 60_000)
                .wait(WaitSpec::default().sleep("nap", now + 60_000)),
        )
        .await
        .expect("sleep");
    let parent = running(store, "worker", now).await;
    let (child, _) = start_child_run(store, &parent, "alone", now).await;
    store
        .transition(
            parent.id,
            parent.revision,
            Transition::to(RunStatus::AwaitingChildWorkflow, now + 1)
                .wait(WaitSpec::default().child(child.id)),
        )
        .await
        .expect("await the child");
    for id in [sleeping.id, parent.id] {
        let before = store.get_run(id).await.expect("get_run");
        let sent = store
            .append_event(event(id, "cancel", json!(1), now + 2))
            .await
            .expect("append");
        assert_eq!(
            sent,
            AppendOutcome::Appended {
                index: 0,
                woke: false
            }
        );
        let after = store.get_run(id).await.expect("get_run");
        assert_eq!(
            (after.status, after.revision),
            (before.status, before.revision)
        );
    }
}
