//! Continue-as-new: one operation ends a run and hands its reference id, its unconsumed
//! events and whatever waits on it to a successor.

use std::collections::BTreeMap;

use super::*;
use crate::{Continuation, Continued};

/// A run of its own namespace with reference id `reference`, claimed by `owner` at `now`.
async fn running_with_reference(store: &dyn Store, reference: &str, now: Millis) -> RunRecord {
    let namespace = namespace();
    let mut new = new_run(&namespace, RunStatus::Queued, now);
    new.reference_id = Some(reference.to_owned());
    new.pool = "renewals".to_owned();
    create(store, new).await;
    let mut request = claim_request(&namespace, "worker", 1, now);
    request.pool = "renewals".to_owned();
    let claimed = store.claim(request).await.expect("claim").runs;
    assert_eq!(claimed.len(), 1, "the queued run is claimed");
    claimed.into_iter().next().expect("one run")
}

/// `run`'s continuation as a run of its own version with input `{"month": month}`.
fn continuation(
    run: &RunRecord,
    month: u32,
    consumed: &[(&str, u32)],
    now: Millis,
) -> Continuation {
    let successor = NewRun::new(
        run.namespace.clone(),
        json!({ "month": month }),
        super::input_hash(&json!({ "month": month })),
        now,
    );
    let consumed: BTreeMap<String, u32> = consumed
        .iter()
        .map(|(name, count)| ((*name).to_owned(), *count))
        .collect();
    Continuation::new(successor, consumed, now)
}

/// A continuation completes the run (no output, its successor named, its reference id given
/// up) and queues the successor with the reference id, the pool, the lineage link and the
/// events the run had not consumed, numbered from 0; the reference id then names the
/// successor; an event sent to the run afterwards reaches the successor. A wrong revision or
/// a run not running is refused, and nothing is written.
pub async fn check_a_run_continues_as_new_in_one_operation(store: &dyn Store) {
    let now = LOCAL_TIME;
    let reference = format!("renewal-{}", RunId::new());
    let run = running_with_reference(store, &reference, now).await;
    for (name, data) in [("approved", 1), ("approved", 2), ("note", 3)] {
        store
            .append_event(event(run.id, name, json!(data), now))
            .await
            .expect("event");
    }

    // Refused: a stale revision, then nothing written.
    let stale = store
        .continue_run(
            run.id,
            run.revision - 1,
            continuation(&run, 2, &[], now + 1),
        )
        .await;
    assert_conflict(stale, run.id, run.revision - 1, run.revision);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);

    let Continued {
        predecessor,
        successor,
    } = store
        .continue_run(
            run.id,
            run.revision,
            continuation(&run, 2, &[("approved", 1)], now + 1),
        )
        .await
        .expect("continue_run");
    assert_eq!(predecessor.id, run.id);
    assert_eq!(predecessor.status, RunStatus::Completed);
    assert_eq!(predecessor.revision, run.revision + 1);
    assert_eq!(predecessor.continued_as, Some(successor.id));
    assert_eq!(predecessor.continued(), Some(successor.id));
    assert_eq!((&predecessor.output, &predecessor.owner), (&None, &None));
    assert_eq!(
        predecessor.reference_id, None,
        "the reference id is given up"
    );
    assert_eq!(
        store.get_run(run.id).await.expect("get_run").continued_as,
        Some(successor.id)
    );

    assert_eq!(successor.status, RunStatus::Queued);
    assert_eq!(successor.input, json!({ "month": 2 }));
    assert_eq!(successor.reference_id.as_deref(), Some(reference.as_str()));
    assert_eq!(successor.pool, "renewals");
    assert_eq!(successor.continued_from, Some(run.id));
    assert_eq!(successor.queued_at, Some(now + 1));
    assert_eq!(
        store.get_run(successor.id).await.expect("get_run"),
        successor
    );

    let history = store.load_history(successor.id).await.expect("history");
    let carried: Vec<(String, u32, Value)> = history
        .events
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                e.index,
                e.data.clone().unwrap_or(Value::Null),
            )
        })
        .collect();
    assert_eq!(
        carried,
        vec![
            ("approved".to_owned(), 0, json!(2)),
            ("note".to_owned(), 0, json!(3)),
        ],
        "the unconsumed events, numbered from 0"
    );
    let kept = store.load_history(run.id).await.expect("history");
    assert_eq!(kept.events.len(), 3, "the run keeps its own events");

    // The reference id now names the successor.
    let mut again = new_run(&run.namespace, RunStatus::Queued, now + 2);
    again.reference_id = Some(reference.clone());
    match store.create_run(again).await.expect("create_run") {
        CreateOutcome::Existing(existing) => assert_eq!(existing.id, successor.id),
        CreateOutcome::Created(created) => panic!("the reference id was free: {created:?}"),
    }

    // An event sent to the run that continued reaches its successor.
    store
        .append_event(event(run.id, "approved", json!(4), now + 2))
        .await
        .expect("an event to the predecessor");
    let history = store.load_history(successor.id).await.expect("history");
    assert!(
        history
            .events
            .iter()
            .any(|e| e.name == "approved" && e.index == 1 && e.data == Some(json!(4))),
        "{:?}",
        history.events
    );

    // The run is no longer running: a second continuation is refused.
    let again = store
        .continue_run(
            run.id,
            predecessor.revision,
            continuation(&predecessor, 3, &[], now + 3),
        )
        .await;
    assert_invalid_transition(again);
}

/// A parent waiting on a child that continues as new is not woken: its wait now names the
/// successor, and the successor's end wakes it.
pub async fn check_a_parent_waits_on_through_a_childs_continuation(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let (child, _) = start_child_run(store, &parent, "renewal", now).await;
    let waiting = await_child(store, &parent, child.id, now + 1).await;
    let claimed = claim_alone(store, &child, now + 2).await;
    let continued = store
        .continue_run(
            child.id,
            claimed.revision,
            continuation(&claimed, 2, &[], now + 3),
        )
        .await
        .expect("continue_run");
    let successor = continued.successor;
    assert_eq!(
        successor.parent.as_ref().map(|link| link.run_id),
        Some(parent.id),
        "the successor is the parent's child"
    );
    let still = store.get_run(parent.id).await.expect("get_run");
    assert_eq!(still.status, RunStatus::AwaitingChildWorkflow, "not woken");
    assert_eq!(still.revision, waiting.revision);
    let awaited: Vec<RunId> = still
        .wait
        .as_ref()
        .map(|wait| wait.children.iter().map(|child| child.id).collect())
        .unwrap_or_default();
    assert_eq!(awaited, vec![successor.id], "the wait names the successor");

    let claimed = claim_alone(store, &successor, now + 4).await;
    store
        .transition(
            successor.id,
            claimed.revision,
            Transition::to(RunStatus::Completed, now + 5).output(json!("renewed"), "f"),
        )
        .await
        .expect("complete the successor");
    let woken = store.get_run(parent.id).await.expect("get_run");
    assert_eq!(
        woken.status,
        RunStatus::Queued,
        "woken by the successor's end"
    );
    assert_eq!(woken.queued_at, Some(now + 5));
}
