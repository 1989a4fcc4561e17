//! The operator's actions: each a compare-and-set of the store's own, checked against the
//! run's status in the same atomic operation.

use super::*;

fn refused(result: Result<RunRecord, StoreError>, from: RunStatus, action: RunAction) {
    match result {
        Err(StoreError::InvalidTransition {
            from: status, to, ..
        }) => {
            assert_eq!((status, to), (from, action.to()), "{action:?}");
        }
        other => panic!("{action:?} from {from:?} is refused, got {other:?}"),
    }
}

/// Each action applies from its statuses only, and writes nothing elsewhere; a pause of a
/// `running` run is a request that keeps its revision.
pub async fn check_an_operator_action_applies_only_where_it_may(store: &dyn Store) {
    let now = LOCAL_TIME;
    let ops = || Some("ops".to_owned());
    let queued = create(store, new_run(&namespace(), RunStatus::Queued, now)).await;
    for action in [RunAction::Wakeup, RunAction::Resume, RunAction::Requeue] {
        refused(
            store.act(queued.id, action, ops(), now + 1).await,
            RunStatus::Queued,
            action,
        );
    }
    let untouched = store.get_run(queued.id).await.expect("get_run");
    assert_eq!(
        untouched.revision, queued.revision,
        "a refusal writes nothing"
    );

    let paused = store
        .act(queued.id, RunAction::Pause, ops(), now + 2)
        .await
        .expect("a queued run pauses");
    assert_eq!(paused.status, RunStatus::Paused);
    assert_eq!(paused.revision, queued.revision + 1);
    let change = store
        .timeline(queued.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(
        (change.to, change.actor.as_deref()),
        (RunStatus::Paused, Some("ops"))
    );
    refused(
        store.act(queued.id, RunAction::Pause, ops(), now + 3).await,
        RunStatus::Paused,
        RunAction::Pause,
    );
    let resumed = store
        .act(queued.id, RunAction::Resume, None, now + 4)
        .await
        .expect("resume");
    assert_eq!(resumed.status, RunStatus::Queued);

    let running = running(store, "worker", now).await;
    let requested = store
        .act(running.id, RunAction::Pause, ops(), now + 5)
        .await
        .expect("a running run takes a pause request");
    assert_eq!(requested.status, RunStatus::Running);
    assert_eq!(requested.revision, running.revision, "no write is fenced");
    assert_eq!(requested.pause_requested_at, Some(now + 5));
    let cancelled = store
        .act(running.id, RunAction::Cancel, ops(), now + 6)
        .await
        .expect("cancel");
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    for action in RunAction::ALL {
        refused(
            store.act(running.id, action, ops(), now + 7).await,
            RunStatus::Cancelled,
            action,
        );
    }
    assert_not_found(store.act(RunId::new(), RunAction::Cancel, None, now).await);
}

/// Operators pausing and resuming one run at once: every move was checked against the status
/// it moved from, so the timeline alternates and nothing is lost or applied twice.
pub async fn check_operator_actions_race_without_repeating_a_move(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = create(store, new_run(&namespace(), RunStatus::Queued, now)).await;
    let acts: Vec<_> = (0..24)
        .map(|i| {
            let action = if i % 2 == 0 {
                RunAction::Pause
            } else {
                RunAction::Resume
            };
            store.act(run.id, action, None, now + 1 + i)
        })
        .collect();
    let results = super::concurrency::join_all(acts).await;
    let mut applied = 0;
    for result in results {
        match result {
            Ok(_) => applied += 1,
            Err(StoreError::InvalidTransition { .. }) => {}
            Err(error) => panic!("an action fails only as not applying: {error:?}"),
        }
    }
    let moves: Vec<RunStatus> = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .into_iter()
        .skip(1)
        .map(|change| change.to)
        .collect();
    assert_eq!(
        moves.len(),
        applied,
        "one timeline change per applied action"
    );
    assert!(applied >= 1, "the first pause applies");
    for pair in moves.windows(2) {
        assert_ne!(pair[0], pair[1], "a move repeated: {moves:?}");
    }
    let last = store.get_run(run.id).await.expect("get_run");
    assert_eq!(Some(&last.status), moves.last());
    assert_eq!(last.revision, run.revision + applied as u64);
}

/// A run cancelled after a failed attempt (awaiting its workflow retry) reports no error: the
/// attempt's error is cleared on every end but `failed`, as completing clears it; a failed run
/// keeps its own.
pub async fn check_a_run_cancelled_after_a_failed_attempt_reports_no_error(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "w1", now).await;
    let attempt_failed = Transition::to(RunStatus::AwaitingRetry, now + 1)
        .due_at(now + 60_000)
        .error(Failure::new("task_failed", "the card was declined"))
        .attempts(2);
    let retrying = store
        .transition(run.id, run.revision, attempt_failed)
        .await
        .expect("a workflow retry is scheduled");
    assert_eq!(
        retrying.error.as_ref().map(|error| error.kind.as_str()),
        Some("task_failed")
    );
    let cancelled = store
        .act(run.id, RunAction::Cancel, None, now + 2)
        .await
        .expect("cancel");
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    assert_eq!(cancelled.error, None, "{cancelled:?}");
    assert_eq!(store.get_run(run.id).await.unwrap().error, None);

    let failing = running(store, "w1", now).await;
    let failed = store
        .transition(
            failing.id,
            failing.revision,
            Transition::to(RunStatus::Failed, now + 3).error(Failure::new("task_failed", "no")),
        )
        .await
        .expect("fail");
    assert_eq!(
        failed.error.map(|error| error.kind),
        Some("task_failed".to_owned())
    );
}
