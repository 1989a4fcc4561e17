//! Several runs moved in one atomic operation: a parent retried together with the child whose
//! failure it observed, the parent's record of that outcome forgotten in the same operation.

use super::*;

/// A failed run (claimed and failed at once).
async fn failed(store: &dyn Store, run: RunRecord, now: Millis) -> RunRecord {
    store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Failed, now).error(Failure::new("failed", "no")),
        )
        .await
        .expect("fail")
}

/// `transition_all` applies every move or none: a stale revision on the second run leaves the
/// first untouched (and its event record in place); at the right revisions both move, and the
/// forgotten record is gone.
pub async fn check_transition_all_moves_every_run_or_none(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let (child, address) = start_child_run(store, &parent, "retried-together", now).await;
    let queue = format!("outcome:{address}");
    store
        .record_event_slot(
            parent.revision,
            EventRecord::received(parent.id, &queue, 0, json!({"failed": true}), None, now),
        )
        .await
        .expect("the observed outcome");
    let parent = failed(store, parent, now + 1).await;
    let claimed = store
        .claim(claim_request(&child.namespace, "worker", 1, now + 1))
        .await
        .expect("claim child")
        .runs
        .remove(0);
    let child = failed(store, claimed, now + 2).await;
    let retry = |forget: Vec<crate::SlotRef>| {
        Transition::to(RunStatus::Queued, now + 3)
            .attempts(2)
            .forget(forget)
    };
    let slot = crate::SlotRef::new(&queue, 0);
    let stale = store
        .transition_all(vec![
            crate::Move::new(parent.id, parent.revision, retry(vec![slot.clone()])),
            crate::Move::new(child.id, child.revision - 1, retry(Vec::new())),
        ])
        .await;
    assert_conflict(stale, child.id, child.revision - 1, child.revision);
    let untouched = store.load_history(parent.id).await.expect("history");
    assert_eq!(untouched.run.status, RunStatus::Failed, "nothing applied");
    assert_eq!(untouched.run.revision, parent.revision);
    assert_eq!(untouched.events.len(), 1, "the record stays");

    let moved = store
        .transition_all(vec![
            crate::Move::new(parent.id, parent.revision, retry(vec![slot])),
            crate::Move::new(child.id, child.revision, retry(Vec::new())),
        ])
        .await
        .expect("both move");
    let statuses: Vec<(RunId, RunStatus, u64, u32)> = moved
        .iter()
        .map(|run| (run.id, run.status, run.revision, run.attempts))
        .collect();
    assert_eq!(
        statuses,
        [
            (parent.id, RunStatus::Queued, parent.revision + 1, 2),
            (child.id, RunStatus::Queued, child.revision + 1, 2),
        ]
    );
    let history = store.load_history(parent.id).await.expect("history");
    assert!(
        history.events.is_empty(),
        "the observed outcome is forgotten"
    );
    assert_invalid_transition(
        store
            .transition_all(vec![crate::Move::new(
                parent.id,
                parent.revision + 1,
                Transition::to(RunStatus::Completed, now + 4),
            )])
            .await,
    );
}
