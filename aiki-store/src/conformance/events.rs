//! Events: per-name queues, reference-id dedupe, wake-ups, timeouts, and suspensions that find their event already there.

use super::*;

/// Events get per-name indexes, are deduplicated by reference id, wake only runs in
/// `awaiting_event`, and are refused for ended runs.
pub async fn check_append_event(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let appended = |index, woke| AppendOutcome::Appended { index, woke };
    assert_eq!(
        store
            .append_event(event(run.id, "a", json!(1), now))
            .await
            .expect("append"),
        appended(0, false)
    );
    assert_eq!(
        store
            .append_event(event(run.id, "a", json!(2), now))
            .await
            .expect("append"),
        appended(1, false)
    );
    assert_eq!(
        store
            .append_event(event(run.id, "b", json!(3), now))
            .await
            .expect("append"),
        appended(0, false)
    );
    let mut keyed = event(run.id, "a", json!(4), now);
    keyed.reference_id = Some("payment-1".to_owned());
    assert_eq!(
        store.append_event(keyed.clone()).await.expect("append"),
        appended(2, false)
    );
    let mut repeat = keyed.clone();
    repeat.data = json!("different");
    assert_eq!(
        store.append_event(repeat).await.expect("append"),
        AppendOutcome::Duplicate
    );
    let mut other_name = keyed.clone();
    other_name.name = "b".to_owned();
    assert_eq!(
        store.append_event(other_name).await.expect("append"),
        appended(1, false),
        "reference ids are unique per name"
    );
    // A recorded timeout holds its slot.
    store
        .record_event_timeout(run.id, run.revision, "c", 0, now)
        .await
        .expect("timeout");
    assert_eq!(
        store
            .append_event(event(run.id, "c", json!(5), now))
            .await
            .expect("append"),
        appended(1, false)
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.revision, run.revision, "no increment, no wake");
    let a: Vec<&Value> = history
        .events
        .iter()
        .filter(|event| event.name == "a")
        .filter_map(|event| event.data.as_ref())
        .collect();
    assert_eq!(a, [&json!(1), &json!(2), &json!(4)]);

    // A sleeping run is not woken by an event.
    let sleeping = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now + 1).due_at(now + 9_000),
        )
        .await
        .expect("sleep");
    assert_eq!(
        store
            .append_event(event(run.id, "a", json!(6), now + 2))
            .await
            .expect("append"),
        appended(3, false)
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), sleeping);

    // A run awaiting an event is woken to `scheduled`, due now.
    let waiter = running(store, "worker", now).await;
    let waiting = store
        .transition(
            waiter.id,
            waiter.revision,
            Transition::to(RunStatus::AwaitingEvent, now + 1).due_at(now + 9_000),
        )
        .await
        .expect("suspend");
    assert_eq!(
        store
            .append_event(event(waiter.id, "go", json!(null), now + 2))
            .await
            .expect("append"),
        appended(0, true)
    );
    let woken = store.get_run(waiter.id).await.expect("get_run");
    assert_eq!(woken.status, RunStatus::Queued, "queued at once");
    assert_eq!(woken.due_at, None);
    assert_eq!(woken.queued_at, Some(now + 2));
    assert_eq!(woken.revision, waiting.revision + 1);

    // Ended runs take no events.
    let ended = store
        .transition(
            waiter.id,
            woken.revision,
            Transition::to(RunStatus::Cancelled, now + 3),
        )
        .await
        .expect("cancel");
    assert_invalid_transition(
        store
            .append_event(event(waiter.id, "go", json!(1), now + 4))
            .await,
    );
    assert_eq!(store.get_run(waiter.id).await.expect("get_run"), ended);
    assert_eq!(
        store
            .load_history(waiter.id)
            .await
            .expect("history")
            .events
            .len(),
        1
    );
}

/// A wait's timeout is recorded unless an event took the slot first; the revision is checked.
pub async fn check_record_event_timeout(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let timeout = store
        .record_event_timeout(run.id, run.revision, "approval", 0, now + 1)
        .await
        .expect("timeout");
    assert!(timeout.timed_out);
    assert_eq!(timeout.data, None);
    assert_eq!((timeout.name.as_str(), timeout.index), ("approval", 0));
    assert_eq!(timeout.received_at, now + 1);
    // Recording it again returns the same record.
    assert_eq!(
        store
            .record_event_timeout(run.id, run.revision, "approval", 0, now + 2)
            .await
            .expect("timeout"),
        timeout
    );

    store
        .append_event(event(run.id, "approval", json!({"ok": true}), now + 3))
        .await
        .expect("append");
    let slot = store
        .record_event_timeout(run.id, run.revision, "approval", 1, now + 4)
        .await
        .expect("timeout");
    assert!(!slot.timed_out, "the event that took the slot wins");
    assert_eq!(slot.data, Some(json!({"ok": true})));
    assert_eq!(slot.index, 1);

    assert_conflict(
        store
            .record_event_timeout(run.id, run.revision + 1, "approval", 2, now + 5)
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.events.len(), 2, "a refused timeout writes nothing");
    assert_eq!(history.run.revision, run.revision, "no increment");
}

/// A suspension waiting for an event that is already there is queued at once.
pub async fn check_suspension_after_its_event_is_queued_at_once(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let outcome = store
        .append_event(event(run.id, "approved", json!({"by": "ana"}), now + 1))
        .await
        .expect("append");
    assert_eq!(
        outcome,
        AppendOutcome::Appended {
            index: 0,
            woke: false
        }
    );
    assert_eq!(
        store.get_run(run.id).await.expect("get_run").revision,
        run.revision,
        "an event for a running run does not fence its executor"
    );
    let mut suspend = Transition::to(RunStatus::AwaitingEvent, now + 2).due_at(now + 99_000);
    suspend.wait = Some(WaitSpec::default().event("approved", 0));
    let landed = store
        .transition(run.id, run.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(landed.status, RunStatus::Queued, "queued at once");
    assert_eq!(landed.due_at, None);
    assert_eq!(landed.queued_at, Some(now + 2));
    assert_eq!(landed.revision, run.revision + 1);

    // Waiting for the next event of that name suspends for real.
    let run = running(store, "worker", now).await;
    store
        .append_event(event(run.id, "approved", json!(1), now + 1))
        .await
        .expect("append");
    let mut suspend = Transition::to(RunStatus::AwaitingEvent, now + 2).due_at(now + 99_000);
    suspend.wait = Some(WaitSpec::default().event("approved", 1).event("other", 0));
    let waiting = store
        .transition(run.id, run.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(waiting.status, RunStatus::AwaitingEvent);
    assert_eq!(waiting.due_at, Some(now + 99_000));
}

/// A sent event cannot take a name from the runtime's own namespace (the records of a run's
/// waits), so it can never fill a child wait's or a timeout's slot.
pub async fn check_a_sent_event_cannot_take_a_wait_records_name(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = create(store, new_run(&namespace(), RunStatus::Queued, now)).await;
    for name in ["\u{1}child:ship:1", "\u{1}event:paid", "\u{1}"] {
        let refused = store.append_event(event(run.id, name, json!(1), now)).await;
        assert!(
            matches!(refused, Err(StoreError::Invalid { .. })),
            "{name:?}: {refused:?}"
        );
    }
    let history = store.load_history(run.id).await.expect("load_history");
    assert!(history.events.is_empty(), "nothing written: {history:?}");
    assert!(matches!(
        store
            .append_event(event(run.id, "child:ship", json!(1), now))
            .await
            .expect("an ordinary name"),
        AppendOutcome::Appended { .. }
    ));
}
