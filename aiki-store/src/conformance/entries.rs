//! Manifest entries: upserts checked against the revision, and child starts.

use super::*;

/// The entries run `id`'s history holds.
async fn entries_of(store: &dyn Store, id: RunId) -> Vec<EntryRecord> {
    store.load_history(id).await.expect("history").entries
}

/// Entries are checked against the revision without incrementing it, and upserted by
/// `(run, address, index)`.
pub async fn check_put_entry(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    assert_conflict(
        store
            .put_entry(run.revision + 1, entry(run.id, "charge:aa", 0, now))
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    assert_conflict(
        store
            .put_entry(run.revision - 1, entry(run.id, "charge:aa", 0, now))
            .await,
        run.id,
        run.revision - 1,
        run.revision,
    );
    assert!(
        entries_of(store, run.id).await.is_empty(),
        "a refused write writes nothing"
    );

    store
        .put_entry(run.revision, entry(run.id, "charge:aa", 0, now))
        .await
        .expect("put_entry");
    // Concurrent tasks of one run do not fence each other.
    store
        .put_entry(run.revision, entry(run.id, "email:bb", 0, now))
        .await
        .expect("put_entry");
    let mut done = entry(run.id, "charge:aa", 0, now + 5);
    done.status = EntryStatus::Completed;
    done.output = Some(json!({"transaction_id": "t-1"}));
    done.fingerprint = Some("fp".to_owned());
    done.attempts = 2;
    store
        .put_entry(run.revision, done.clone())
        .await
        .expect("upsert");
    let mut failed = entry(run.id, "charge:aa", 1, now + 6);
    failed.status = EntryStatus::AwaitingRetry;
    failed.error = Some(Failure::new("task_failed", "card declined"));
    failed.retry_at = Some(now + 1_000);
    store
        .put_entry(run.revision, failed.clone())
        .await
        .expect("put_entry");

    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.revision, run.revision, "no increment");
    assert_eq!(
        history.entries,
        [done, failed, entry(run.id, "email:bb", 0, now)]
    );
}

/// Several entries written in one call are each written or refused as `put_entry` would: a
/// revision conflict refuses them all, a pause refuses only the `running` record (the result
/// before it is kept), an output over the limit stated by `payload_limit` refuses the call
/// with nothing written.
pub async fn check_put_entries(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let limit = store
        .payload_limit()
        .expect("the store states its payload limit (an answer of a server says it)");
    let mut done = entry(run.id, "charge:aa", 0, now + 1);
    done.status = EntryStatus::Completed;
    done.output = Some(json!({"transaction_id": "t-1"}));
    done.fingerprint = Some("fp".to_owned());
    let next = entry(run.id, "ship:bb", 0, now + 1);
    assert_conflict(
        store
            .put_entries(run.revision + 1, vec![done.clone(), next.clone()])
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    let mut too_large = done.clone();
    too_large.address = "big:cc".to_owned();
    too_large.output = Some(json!("x".repeat(limit.bytes())));
    let refused = store
        .put_entries(run.revision, vec![too_large, next.clone()])
        .await;
    assert!(
        matches!(refused, Err(StoreError::TooLarge { .. })),
        "{refused:?}"
    );
    assert!(
        entries_of(store, run.id).await.is_empty(),
        "a refused call writes nothing"
    );

    store
        .put_entries(run.revision, vec![done.clone(), next.clone()])
        .await
        .expect("put_entries");
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.revision, run.revision, "no increment");
    assert_eq!(history.entries, [done.clone(), next.clone()]);

    store
        .act(run.id, RunAction::Pause, Some("ops".to_owned()), now + 2)
        .await
        .expect("a running run takes a pause request");
    let mut shipped = next.clone();
    shipped.status = EntryStatus::Completed;
    shipped.output = Some(json!("shipped"));
    shipped.updated_at = now + 3;
    let after = entry(run.id, "email:dd", 0, now + 3);
    let refused = store
        .put_entries(run.revision, vec![shipped.clone(), after])
        .await;
    assert!(
        matches!(refused, Err(StoreError::PauseRequested { run_id }) if run_id == run.id),
        "{refused:?}"
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(
        history.entries,
        [done, shipped],
        "the result is kept, the new attempt refused"
    );
}

/// A suspension waiting on a task retry is due when the stored entry says, not when the
/// transition says: the store owns the retry's time (see `ExecutorStore::put_entry`). A
/// retry of another attempt, or with no entry awaiting it, keeps the transition's time.
pub async fn check_a_suspension_on_a_task_retry_is_due_when_its_entry_says(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let mut failed = entry(run.id, "charge:aa", 0, now);
    failed.status = EntryStatus::AwaitingRetry;
    failed.attempts = 1;
    failed.error = Some(Failure::new("task_failed", "card declined"));
    failed.retry_at = Some(now + 5_000);
    store
        .put_entry(run.revision, failed)
        .await
        .expect("put_entry");
    let wait = WaitSpec::default()
        .retry("charge:aa", 2, now + 4_000)
        .retry("charge:aa", 3, now + 9_000)
        .retry("email:bb", 2, now + 7_000);
    let waiting = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::AwaitingRetry, now + 1)
                .due_at(now + 4_000)
                .wait(wait),
        )
        .await
        .expect("suspend");
    assert_eq!(waiting.due_at, Some(now + 5_000), "due when the entry says");
    let times: Vec<Millis> = waiting
        .wait
        .expect("the wait set is stored")
        .retries
        .iter()
        .map(|retry| retry.at)
        .collect();
    assert_eq!(times, [now + 5_000, now + 9_000, now + 7_000]);
}

/// A child start writes the parent's entry (output: the child's id) and the child in one
/// operation; a revision conflict writes neither; a known child reference reuses that run.
pub async fn check_start_child(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let child_namespace = namespace();
    let address = "child:1.0.0:ship-1";
    let make_child = |reference: &str| {
        let mut child = new_run(&child_namespace, RunStatus::Queued, now);
        child.reference_id = Some(reference.to_owned());
        child.parent = Some(ParentLink {
            run_id: parent.id,
            address: address.to_owned(),
        });
        child
    };
    let mut start = entry(parent.id, address, 0, now);
    start.kind = EntryKind::Child;
    start.status = EntryStatus::Completed;

    let refused = make_child("ship-1");
    let refused_id = refused.id;
    assert_conflict(
        store
            .start_child(parent.revision + 1, start.clone(), refused)
            .await,
        parent.id,
        parent.revision + 1,
        parent.revision,
    );
    assert_not_found(store.get_run(refused_id).await);
    let history = store.load_history(parent.id).await.expect("history");
    assert!(history.entries.is_empty() && history.children.is_empty());

    let new_child = make_child("ship-1");
    let child = store
        .start_child(parent.revision, start.clone(), new_child.clone())
        .await
        .expect("start_child");
    assert_eq!(child.id, new_child.id);
    assert_eq!(child.status, RunStatus::Queued);
    assert_eq!(child.revision, 1);
    assert_eq!(child.parent, new_child.parent);
    assert_eq!(store.get_run(child.id).await.expect("get_run"), child);
    let history = store.load_history(parent.id).await.expect("history");
    assert_eq!(history.run.revision, parent.revision, "no increment");
    let without_input = RunRecord {
        input: Value::Null,
        ..child.clone()
    };
    assert_eq!(
        history.children,
        [without_input],
        "children come without inputs"
    );
    assert_eq!(history.entries.len(), 1);
    assert_eq!(history.entries[0].kind, EntryKind::Child);
    assert_eq!(
        history.entries[0].output,
        Some(Value::String(child.id.to_string()))
    );

    // The same reference again: the existing child, no new run.
    let again = make_child("ship-1");
    let again_id = again.id;
    let mut second = start.clone();
    second.index = 1;
    let existing = store
        .start_child(parent.revision, second, again)
        .await
        .expect("start_child");
    assert_eq!(existing, child);
    assert_not_found(store.get_run(again_id).await);
    let history = store.load_history(parent.id).await.expect("history");
    assert_eq!(history.children.len(), 1);
    assert_eq!(
        history.entries[1].output,
        Some(Value::String(child.id.to_string()))
    );
}
