//! Recovery: retrying a failed run (one atomic operation moves it back to delivery and resets
//! the task call its error names), and forking an ended run with its carried history.

use super::*;

/// A failed run records the call that failed it; a retry moves it to `queued` with one more
/// attempt, sets exactly the named entries to run again, and says `retried` in the timeline;
/// a retry at a stale revision changes nothing.
pub async fn check_retry_moves_a_failed_run_back_and_resets_its_call(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-a", now).await;
    let mut done = entry(run.id, "charge:1", 0, now);
    done.status = EntryStatus::Completed;
    done.output = Some(json!(7));
    let mut handled = entry(run.id, "declined:1", 0, now);
    handled.status = EntryStatus::Failed;
    handled.error = Some(Failure::new("task_failed", "declined"));
    let mut unhandled = entry(run.id, "ship:1", 0, now);
    unhandled.status = EntryStatus::Failed;
    unhandled.attempts = 3;
    unhandled.error = Some(Failure::new("task_failed", "carrier down"));
    for entry in [&done, &handled, &unhandled] {
        store
            .put_entry(run.revision, entry.clone())
            .await
            .expect("put_entry");
    }
    let call = crate::CallRef::new("ship:1", 0);
    let failed = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Failed, now + 1)
                .error(Failure::new("task_failed", "ship failed").call(call.clone())),
        )
        .await
        .expect("fail");
    assert_eq!(
        failed.error.as_ref().and_then(|e| e.call.clone()),
        Some(call.clone()),
        "the failed call is stored with the error"
    );
    assert_eq!(
        store.get_run(run.id).await.expect("get").error,
        failed.error
    );

    let retry = || {
        Transition::to(RunStatus::Queued, now + 2)
            .attempts(failed.attempts + 1)
            .rerun(vec![
                call.clone(),
                crate::CallRef::new("never-recorded:1", 0),
            ])
    };
    assert_conflict(
        store.transition(run.id, run.revision, retry()).await,
        run.id,
        run.revision,
        failed.revision,
    );
    let untouched = store.load_history(run.id).await.expect("history");
    assert_eq!(untouched.run.status, RunStatus::Failed);
    assert!(
        untouched
            .entries
            .iter()
            .all(|e| e.status != EntryStatus::AwaitingRetry),
        "a refused retry resets nothing"
    );

    let retried = store
        .transition(run.id, failed.revision, retry())
        .await
        .expect("retry");
    assert_eq!(retried.status, RunStatus::Queued);
    assert_eq!(retried.attempts, failed.attempts + 1);
    assert_eq!(retried.revision, failed.revision + 1);
    let history = store.load_history(run.id).await.expect("history");
    let status = |address: &str| {
        let entry = history
            .entries
            .iter()
            .find(|e| e.address == address)
            .expect("entry");
        (entry.status, entry.attempts, entry.retry_at)
    };
    assert_eq!(status("charge:1"), (EntryStatus::Completed, 1, None));
    assert_eq!(
        status("declined:1"),
        (EntryStatus::Failed, 1, None),
        "a failure the error does not name stays"
    );
    assert_eq!(
        status("ship:1"),
        (EntryStatus::AwaitingRetry, 0, Some(now + 2)),
        "the named call runs again"
    );
    assert_eq!(
        history.entries.len(),
        3,
        "nothing recorded for an unknown call"
    );
    let timeline = store.timeline(run.id).await.expect("timeline");
    let last = timeline.last().expect("changes");
    assert_eq!(
        (last.from, last.to, last.reason.as_str()),
        (Some(RunStatus::Failed), RunStatus::Queued, "retried")
    );
    assert_eq!(
        last.reason,
        crate::StatusChange::reason_for(
            Some(RunStatus::Failed),
            RunStatus::Queued,
            &crate::ChangeFacts::default().retry(true)
        )
    );
    assert_invalid_transition(
        store
            .transition(
                run.id,
                retried.revision,
                Transition::to(RunStatus::Completed, now + 3),
            )
            .await,
    );
}

/// A fork is created with its lineage and carried entries, sleeps and events (indexes, data,
/// timeouts and reference ids as recorded); a second fork with the same reference id returns
/// the first and writes nothing.
pub async fn check_fork_creates_a_run_with_its_carried_history_once(store: &dyn Store) {
    let now = LOCAL_TIME;
    let source = running(store, "worker-a", now).await;
    let lineage = crate::Lineage {
        forked_from: source.id,
        root: source.id,
    };
    let new = |id: RunId| {
        new_run(&source.namespace, RunStatus::Queued, now + 10)
            .id(id)
            .reference_id(Some(format!("fork:{}", source.id)))
            .lineage(lineage)
    };
    let fork_id = RunId::new();
    let mut done = entry(fork_id, "charge:1", 0, now);
    done.status = EntryStatus::Completed;
    done.output = Some(json!({"receipt": 7}));
    let nap = sleep(fork_id, "settle", 0, now + 5_000);
    let mut approved = crate::EventRecord::received(
        fork_id,
        "approved",
        0,
        json!(true),
        Some("approval-1".to_owned()),
        now + 3,
    );
    // The fork keeps who sent a carried event.
    approved.sent_by = Some("carol".to_owned());
    let timed_out = crate::EventRecord::timeout(fork_id, "approved", 1, now + 4);
    let outcome = store
        .fork_run(crate::NewFork::new(
            new(fork_id),
            vec![done.clone()],
            vec![nap.clone()],
            vec![approved.clone(), timed_out.clone()],
        ))
        .await
        .expect("fork");
    let CreateOutcome::Created(fork) = outcome else {
        panic!("a new fork: {outcome:?}");
    };
    assert_eq!(fork.id, fork_id);
    assert_eq!(fork.lineage, Some(lineage));
    assert_eq!(fork.status, RunStatus::Queued);
    let history = store.load_history(fork_id).await.expect("history");
    assert_eq!(history.run.lineage, Some(lineage), "read back");
    assert_eq!(history.entries, [done.clone()]);
    assert_eq!(history.sleeps, std::slice::from_ref(&nap));
    assert_eq!(history.events, [approved.clone(), timed_out.clone()]);

    // The same fork again: the first one, nothing written.
    let again = store
        .fork_run(crate::NewFork::new(
            new(RunId::new()),
            vec![entry(fork_id, "other:1", 0, now)],
            Vec::new(),
            Vec::new(),
        ))
        .await
        .expect("fork again");
    assert!(
        matches!(&again, CreateOutcome::Existing(run) if run.id == fork_id),
        "{again:?}"
    );
    assert_eq!(
        store.load_history(fork_id).await.expect("history").entries,
        [done],
        "nothing added"
    );
    let source_history = store.load_history(source.id).await.expect("history");
    assert!(source_history.entries.is_empty(), "the source is untouched");
}
