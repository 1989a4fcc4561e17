//! Creating, reading and moving runs: reference ids, revisions, the transition table, suspensions that find their child already ended, parents woken by a child, values kept byte for byte, and the history in one call.

use super::*;

/// [`ReadStore::backend`] names the backend.
pub async fn check_backend_has_a_name(store: &dyn Store) {
    assert!(!store.backend().is_empty());
}

/// A created run is stored as given, at revision 1 and attempt 1.
pub async fn check_create_run(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let mut new = new_run(&namespace, RunStatus::Queued, now);
    new.reference_id = Some(format!("ref-{}", RunId::new()));
    new.pool = "gpu".to_owned();
    new.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned());
    let run = create(store, new.clone()).await;
    assert_eq!(run.id, new.id);
    assert_eq!(run.namespace, namespace);
    assert_eq!(run.input, new.input);
    assert_eq!(run.input_hash, new.input_hash);
    assert_eq!(run.reference_id, new.reference_id);
    assert_eq!(run.pool, "gpu");
    assert_eq!(run.traceparent, new.traceparent);
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!((run.revision, run.attempts), (1, 1));
    assert_eq!(run.queued_at, Some(now));
    assert_eq!((run.created_at, run.updated_at), (now, now));
    assert_eq!(run.owner, None);
    assert_eq!(run.output, None);
    assert_eq!(run.error, None);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);

    let mut scheduled = new_run(&namespace, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now + 60_000);
    scheduled.parent = Some(ParentLink {
        run_id: run.id,
        address: "child:1.0.0:abc".to_owned(),
    });
    let scheduled = create(store, scheduled).await;
    assert_eq!(scheduled.status, RunStatus::Scheduled);
    assert_eq!(scheduled.due_at, Some(now + 60_000));
    assert_eq!(scheduled.queued_at, None);
    assert_eq!(
        store.get_run(scheduled.id).await.expect("get_run"),
        scheduled
    );
}

/// A second run with the same namespace and reference id returns the first, untouched.
pub async fn check_create_run_dedupes_by_reference(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let reference = format!("order-{}", RunId::new());
    let mut first = new_run(&namespace, RunStatus::Queued, now);
    first.reference_id = Some(reference.clone());
    let first = create(store, first).await;

    let mut second = new_run(&namespace, RunStatus::Scheduled, now + 1);
    second.reference_id = Some(reference.clone());
    second.input = json!({"order": 2});
    let second = super::rehashed(second);
    let second_id = second.id;
    match store.create_run(second).await.expect("create_run") {
        CreateOutcome::Existing(existing) => assert_eq!(existing, first),
        CreateOutcome::Created(run) => panic!("duplicate reference created {run:?}"),
    }
    assert_not_found(store.get_run(second_id).await);
    assert_eq!(store.get_run(first.id).await.expect("get_run"), first);

    // The same reference in another namespace is another run.
    let mut other = new_run(&self::namespace(), RunStatus::Queued, now);
    other.reference_id = Some(reference);
    create(store, other).await;
    // Runs without a reference never collide.
    create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    create(store, new_run(&namespace, RunStatus::Queued, now)).await;
}

/// Creating a run with an id already taken is [`StoreError::AlreadyExists`].
pub async fn check_create_run_refuses_a_taken_id(store: &dyn Store) {
    let namespace = namespace();
    let run = create(store, new_run(&namespace, RunStatus::Queued, LOCAL_TIME)).await;
    let mut again = new_run(&namespace, RunStatus::Queued, LOCAL_TIME);
    again.id = run.id;
    let result = store.create_run(again).await;
    assert!(
        matches!(result, Err(StoreError::AlreadyExists { .. })),
        "expected AlreadyExists, got {result:?}"
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
}

/// Every operation on a run that does not exist is [`StoreError::NotFound`].
pub async fn check_unknown_run_is_not_found(store: &dyn Store) {
    let id = RunId::new();
    let now = LOCAL_TIME;
    assert_not_found(store.get_run(id).await);
    assert_not_found(store.load_history(id).await);
    assert_not_found(
        store
            .transition(id, 1, Transition::to(RunStatus::Queued, now))
            .await,
    );
    assert_not_found(store.refresh_claim(id, "worker", 1, now).await);
    assert_not_found(store.put_entry(1, entry(id, "task:00", 0, now)).await);
    assert_not_found(store.put_sleep(1, sleep(id, "nap", 0, now), None).await);
    assert_not_found(store.append_event(event(id, "go", json!(1), now)).await);
    assert_not_found(store.record_event_timeout(id, 1, "go", 0, now).await);
    let child = new_run(&namespace(), RunStatus::Queued, now);
    let child_id = child.id;
    assert_not_found(
        store
            .start_child(1, entry(id, "child:1:x", 0, now), child)
            .await,
    );
    assert_not_found(store.get_run(child_id).await);
}

/// A transition checks the revision (a mismatch writes nothing) and increments it.
pub async fn check_transition_checks_and_increments_revision(store: &dyn Store) {
    let now = LOCAL_TIME;
    let mut new = new_run(&namespace(), RunStatus::Scheduled, now);
    new.due_at = Some(now + 10);
    let run = create(store, new).await;
    assert_conflict(
        store
            .transition(run.id, 2, Transition::to(RunStatus::Queued, now + 1))
            .await,
        run.id,
        2,
        1,
    );
    assert_conflict(
        store
            .transition(run.id, 0, Transition::to(RunStatus::Queued, now + 1))
            .await,
        run.id,
        0,
        1,
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);

    let queued = store
        .transition(run.id, 1, Transition::to(RunStatus::Queued, now + 5))
        .await
        .expect("transition");
    assert_eq!(queued.status, RunStatus::Queued);
    assert_eq!(queued.revision, 2);
    assert_eq!(queued.due_at, None);
    assert_eq!(queued.queued_at, Some(now + 5));
    assert_eq!(queued.updated_at, now + 5);
    assert_eq!(queued.created_at, now);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), queued);
    // The old revision is stale now.
    assert_conflict(
        store
            .transition(run.id, 1, Transition::to(RunStatus::Paused, now + 6))
            .await,
        run.id,
        1,
        2,
    );
}

/// A move the status table forbids is [`StoreError::InvalidTransition`] and writes nothing.
pub async fn check_transition_refuses_moves_outside_the_table(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = create(store, new_run(&namespace(), RunStatus::Queued, now)).await;
    assert_invalid_transition(
        store
            .transition(run.id, 1, Transition::to(RunStatus::Completed, now))
            .await,
    );
    assert_invalid_transition(
        store
            .transition(run.id, 1, Transition::to(RunStatus::Sleeping, now))
            .await,
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
    let cancelled = store
        .transition(run.id, 1, Transition::to(RunStatus::Cancelled, now + 1))
        .await
        .expect("cancel");
    assert_eq!(
        (cancelled.status, cancelled.revision),
        (RunStatus::Cancelled, 2)
    );
    for to in RunStatus::ALL {
        assert_invalid_transition(
            store
                .transition(run.id, 2, Transition::to(to, now + 2))
                .await,
        );
    }
    assert_eq!(store.get_run(run.id).await.expect("get_run"), cancelled);
}

/// A transition records the output and its fingerprint, the error, the attempt count and the
/// due time it carries, and keeps them when a later transition carries none.
pub async fn check_transition_writes_output_error_and_attempts(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let mut complete = Transition::to(RunStatus::Completed, now + 1);
    complete.output = Some(json!({"receipt": "r-1", "cents": 1250}));
    complete.output_fingerprint = Some("fp-1".to_owned());
    let completed = store
        .transition(run.id, run.revision, complete)
        .await
        .expect("complete");
    assert_eq!(completed.status, RunStatus::Completed);
    assert_eq!(
        completed.output,
        Some(json!({"receipt": "r-1", "cents": 1250}))
    );
    assert_eq!(completed.output_fingerprint.as_deref(), Some("fp-1"));
    assert_eq!(completed.owner, None);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), completed);

    let run = running(store, "worker", now).await;
    let mut retry = Transition::to(RunStatus::AwaitingRetry, now + 1)
        .due_at(now + 5_000)
        .error(Failure::new("workflow_failed", "boom"));
    retry.attempts = Some(2);
    let waiting = store
        .transition(run.id, run.revision, retry)
        .await
        .expect("retry");
    assert_eq!(waiting.status, RunStatus::AwaitingRetry);
    assert_eq!(waiting.due_at, Some(now + 5_000));
    assert_eq!(waiting.attempts, 2);
    assert_eq!(waiting.error, Some(Failure::new("workflow_failed", "boom")));
    let queued = store
        .transition(
            run.id,
            waiting.revision,
            Transition::to(RunStatus::Queued, now + 5_000),
        )
        .await
        .expect("requeue");
    assert_eq!(queued.attempts, 2, "attempts are kept");
    assert_eq!(
        queued.error,
        Some(Failure::new("workflow_failed", "boom")),
        "the last error is kept"
    );
    assert_eq!(queued.due_at, None);
    assert_eq!(queued.queued_at, Some(now + 5_000));
}

/// Leaving `running` clears the owner and the heartbeat.
pub async fn check_leaving_running_clears_the_owner(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-1", now).await;
    assert_eq!(run.owner.as_deref(), Some("worker-1"));
    assert_eq!(run.heartbeat_at, Some(now));
    let sleeping = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now + 1).due_at(now + 60_000),
        )
        .await
        .expect("sleep");
    assert_eq!(sleeping.status, RunStatus::Sleeping);
    assert_eq!(sleeping.revision, run.revision + 1);
    assert_eq!(sleeping.owner, None);
    assert_eq!(sleeping.heartbeat_at, None);
    assert_eq!(sleeping.due_at, Some(now + 60_000));
    assert_eq!(store.get_run(run.id).await.expect("get_run"), sleeping);
}

/// A suspension waiting for a child that already ended is queued at once.
pub async fn check_suspension_after_its_child_ended_is_queued_at_once(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let (ended, _) = start_child_run(store, &parent, "a", now).await;
    let (pending, _) = start_child_run(store, &parent, "b", now).await;
    store
        .transition(ended.id, 1, Transition::to(RunStatus::Cancelled, now + 1))
        .await
        .expect("cancel child");
    assert_eq!(
        store.get_run(parent.id).await.expect("get_run").status,
        RunStatus::Running,
        "a running parent is not woken"
    );

    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now + 2);
    suspend.wait = Some(WaitSpec::default().child(pending.id).child(ended.id));
    let landed = store
        .transition(parent.id, parent.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(landed.status, RunStatus::Queued, "queued at once");
    assert_eq!(landed.due_at, None);
    assert_eq!(landed.queued_at, Some(now + 2));

    let other = running(store, "worker", now).await;
    let (pending, _) = start_child_run(store, &other, "c", now).await;
    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now + 2);
    suspend.wait = Some(WaitSpec::default().child(pending.id));
    let waiting = store
        .transition(other.id, other.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(waiting.status, RunStatus::AwaitingChildWorkflow);
}

/// A child reaching any terminal status wakes a parent in `awaiting_child_workflow`.
pub async fn check_terminal_child_wakes_waiting_parent(store: &dyn Store) {
    let now = LOCAL_TIME;
    for end in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let parent = running(store, "worker", now).await;
        let (child, _) = start_child_run(store, &parent, "x", now).await;
        let waiting = await_child(store, &parent, child.id, now + 1).await;
        let claimed = claim_alone(store, &child, now + 2).await;
        store
            .transition(child.id, claimed.revision, Transition::to(end, now + 3))
            .await
            .expect("end child");
        let woken = store.get_run(parent.id).await.expect("get_run");
        assert_eq!(woken.status, RunStatus::Queued, "woken by a {end} child");
        assert_eq!(woken.due_at, None);
        assert_eq!(woken.queued_at, Some(now + 3));
        assert_eq!(woken.revision, waiting.revision + 1);
    }

    // A parent that is not waiting is left alone.
    let parent = running(store, "worker", now).await;
    let (child, _) = start_child_run(store, &parent, "y", now).await;
    store
        .transition(child.id, 1, Transition::to(RunStatus::Cancelled, now + 1))
        .await
        .expect("cancel child");
    assert_eq!(store.get_run(parent.id).await.expect("get_run"), parent);
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("bottom"), |inner, level| {
        if level % 2 == 0 {
            json!([inner, level])
        } else {
            json!({"level": level, "inner": inner})
        }
    })
}

/// Unicode, deeply nested JSON and a 1 MiB output come back exactly as written.
pub async fn check_values_round_trip(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = Namespace::new(format!("commande-été-{}", RunId::new()), "1.0.0-β");
    let unicode = json!({
        "name": "Zoë Ærøskøbing — 東京 🚀 👩‍👩‍👧",
        "nul": "a\u{0}b",
        "quote": "\"'\\\n\t",
        "numbers": [0, -1, 1.5, 9007199254740993_u64, u64::MAX, i64::MIN, 1e300],
        "empty": {}, "list": [], "null": null, "bool": true
    });
    let mut new = new_run(&namespace, RunStatus::Queued, now);
    new.input = unicode.clone();
    new.reference_id = Some("réf-🚀".to_owned());
    new.pool = "pöol".to_owned();
    let run = create(store, super::rehashed(new)).await;
    assert_eq!(run.input, unicode);
    assert_eq!(store.get_run(run.id).await.expect("get_run").input, unicode);

    let claimed = store
        .claim(ClaimRequest::new(
            "wörker",
            vec![namespace.clone()],
            "pöol",
            1,
            now,
        ))
        .await
        .expect("claim")
        .runs
        .remove(0);
    let deep = nested(100);
    let mut deep_entry = entry(run.id, "tâche:ünïcode", 0, now);
    deep_entry.status = EntryStatus::Completed;
    deep_entry.output = Some(deep.clone());
    store
        .put_entry(claimed.revision, deep_entry.clone())
        .await
        .expect("put_entry");
    store
        .append_event(event(run.id, "évènement", unicode.clone(), now))
        .await
        .expect("append");

    let large = json!({"blob": "x".repeat(1024 * 1024), "tail": "ok"});
    let mut complete = Transition::to(RunStatus::Completed, now + 1);
    complete.output = Some(large.clone());
    complete.output_fingerprint = Some("fp-ü".to_owned());
    store
        .transition(run.id, claimed.revision, complete)
        .await
        .expect("complete");

    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.input, unicode);
    assert_eq!(history.run.namespace, namespace);
    assert_eq!(history.run.reference_id.as_deref(), Some("réf-🚀"));
    assert_eq!(history.run.output.as_ref(), Some(&large));
    assert_eq!(history.run.output_fingerprint.as_deref(), Some("fp-ü"));
    assert_eq!(history.entries, [deep_entry]);
    assert_eq!(history.events[0].data.as_ref(), Some(&unicode));
    assert_eq!(history.events[0].name, "évènement");
}

/// `load_history` returns the run with all its entries (by address, then index), sleeps and
/// events (by name, then index) and children, in one call.
pub async fn check_load_history(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let rev = run.revision;
    for (address, index) in [("b:2", 1), ("a:1", 0), ("b:2", 0), ("a:1", 1)] {
        store
            .put_entry(rev, entry(run.id, address, index, now))
            .await
            .expect("put_entry");
    }
    for (name, index) in [("z", 0), ("m", 1), ("m", 0)] {
        store
            .put_sleep(rev, sleep(run.id, name, index, now + 100), None)
            .await
            .expect("put_sleep");
    }
    for name in ["y", "x", "y"] {
        store
            .append_event(event(run.id, name, json!(name), now))
            .await
            .expect("append");
    }
    let (first, _) = start_child_run(store, &run, "first", now).await;
    let (second, _) = start_child_run(store, &run, "second", now + 1).await;

    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run, store.get_run(run.id).await.expect("get_run"));
    let entries: Vec<(&str, u32)> = history
        .entries
        .iter()
        .map(|entry| (entry.address.as_str(), entry.index))
        .collect();
    assert_eq!(
        entries,
        [
            ("a:1", 0),
            ("a:1", 1),
            ("b:2", 0),
            ("b:2", 1),
            ("child:1.0.0:first", 0),
            ("child:1.0.0:second", 0)
        ]
    );
    let sleeps: Vec<(&str, u32)> = history
        .sleeps
        .iter()
        .map(|sleep| (sleep.name.as_str(), sleep.index))
        .collect();
    assert_eq!(sleeps, [("m", 0), ("m", 1), ("z", 0)]);
    let events: Vec<(&str, u32)> = history
        .events
        .iter()
        .map(|event| (event.name.as_str(), event.index))
        .collect();
    assert_eq!(events, [("x", 0), ("y", 0), ("y", 1)]);
    let mut children: Vec<RunId> = history.children.iter().map(|child| child.id).collect();
    children.sort();
    let mut expected = vec![first.id, second.id];
    expected.sort();
    assert_eq!(children, expected);
}
