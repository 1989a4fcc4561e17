//! Pause requests: a `running` run is asked to pause without a revision change, so no write of
//! its executor is fenced; only a new task attempt or child start is refused, and the run lands
//! in `paused` whenever it leaves `running` other than by ending (its executor's move, or claim
//! recovery).

use super::*;

/// The request changes no revision; a result write is accepted, a new attempt refused; the
/// refresh says so; the executor's suspension lands in `paused`, done by the requester.
pub async fn check_a_pause_request_fences_no_write_in_flight(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let mut started = entry(run.id, "charge:ab", 0, now);
    started.input = Some(json!({"cents": 700}));
    store
        .put_entry(run.revision, started.clone())
        .await
        .expect("the attempt starts");
    let requested = store
        .act(run.id, RunAction::Pause, Some("ops".to_owned()), now + 1)
        .await
        .expect("a running run takes the request");
    assert_eq!(requested.status, RunStatus::Running);
    assert_eq!(requested.revision, run.revision, "no revision change");
    assert_eq!(requested.pause_requested_at, Some(now + 1));
    assert_eq!(requested.pause_requested_by.as_deref(), Some("ops"));
    let again = store
        .act(
            run.id,
            RunAction::Pause,
            Some("someone else".to_owned()),
            now + 2,
        )
        .await
        .expect("still running");
    assert_eq!(
        (
            again.pause_requested_at,
            again.pause_requested_by.as_deref()
        ),
        (Some(now + 1), Some("ops")),
        "the first request stands"
    );

    let mut done = entry(run.id, "charge:ab", 0, now + 3);
    done.status = EntryStatus::Completed;
    done.output = Some(json!("receipt"));
    store
        .put_entry(run.revision, done)
        .await
        .expect("the task in flight records its result");
    let next = entry(run.id, "ship:cd", 0, now + 4);
    let refused = store.put_entry(run.revision, next).await;
    assert!(
        matches!(refused, Err(StoreError::PauseRequested { run_id }) if run_id == run.id),
        "{refused:?}"
    );
    let mut child_start = entry(run.id, "child:ship@1:ef", 0, now + 4);
    child_start.kind = crate::EntryKind::Child;
    child_start.status = EntryStatus::Completed;
    let child = new_run(&namespace(), RunStatus::Queued, now + 4);
    let child_id = child.id;
    let refused = store.start_child(run.revision, child_start, child).await;
    assert!(
        matches!(refused, Err(StoreError::PauseRequested { run_id }) if run_id == run.id),
        "no child starts either: {refused:?}"
    );
    assert!(
        matches!(
            store.get_run(child_id).await,
            Err(StoreError::NotFound { .. })
        ),
        "the refused child was not created"
    );
    let state = store
        .refresh_claim(run.id, "worker", run.revision, now + 5)
        .await
        .expect("refresh");
    assert!(state.pause_requested);
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.entries.len(), 1, "{:?}", history.entries);
    assert_eq!(history.entries[0].status, EntryStatus::Completed);
    assert_eq!(
        history.entries[0].input,
        Some(json!({"cents": 700})),
        "the input written with the attempt is kept by its result"
    );

    let landed = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now + 6)
                .due_at(now + 60_000)
                .wait(WaitSpec::default().sleep("nap", now + 60_000)),
        )
        .await
        .expect("suspend");
    assert_eq!(
        landed.status,
        RunStatus::Paused,
        "the suspension lands in paused"
    );
    assert_eq!(landed.due_at, None);
    assert_eq!(landed.wait, None);
    assert_eq!(landed.pause_requested_at, None);
    let change = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(
        (change.to, change.reason.as_str(), change.actor.as_deref()),
        (RunStatus::Paused, "paused", Some("ops"))
    );
    assert!(
        matches!(
            store.act(run.id, RunAction::Pause, None, now + 7).await,
            Err(StoreError::InvalidTransition {
                from: RunStatus::Paused,
                ..
            })
        ),
        "a paused run is not paused again"
    );
    assert_not_found(store.act(RunId::new(), RunAction::Pause, None, now).await);
}

/// An executor ending the run ends it, request or not.
pub async fn check_a_run_ends_whatever_its_pause_request(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    store
        .act(run.id, RunAction::Pause, None, now + 1)
        .await
        .expect("request");
    let done = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Completed, now + 2).output(json!(1), "fp"),
        )
        .await
        .expect("complete");
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.pause_requested_at, None);
}

/// Claim recovery of a run with a pause requested moves it to `paused`, not `queued`.
pub async fn check_recovery_pauses_a_run_with_a_pause_request(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let run = running(store, "dead-worker", now).await;
    store
        .act(run.id, RunAction::Pause, Some("ops".to_owned()), now + 1)
        .await
        .expect("request");
    let released = release_confirmed(store, now + 100_000).await;
    assert!(released.contains(&run.id));
    let paused = store.get_run(run.id).await.expect("get_run");
    assert_eq!(paused.status, RunStatus::Paused);
    assert_eq!(paused.owner, None);
    assert_eq!(paused.pause_requested_at, None);
    let change = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(change.actor.as_deref(), Some("ops"));
}
