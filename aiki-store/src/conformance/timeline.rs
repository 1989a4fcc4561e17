//! The timeline: every status change, appended by the statement that makes it.

use super::*;

/// A run's status changes come back in order, each with its revision, reason, actor and time,
/// in the words of [`StatusChange::reason_for`](crate::StatusChange::reason_for).
pub async fn check_timeline_records_every_status_change(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-a", now).await;
    let waiting = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::AwaitingEvent, now + 1)
                .due_at(now + 99_000)
                .wait(WaitSpec::default().event("go", 0)),
        )
        .await
        .expect("suspend");
    store
        .append_event(event(run.id, "go", json!(1), now + 2))
        .await
        .expect("append");
    let again = store
        .claim(claim_request(&run.namespace, "worker-b", 1, now + 4))
        .await
        .expect("claim")
        .runs
        .pop()
        .expect("claimed again");
    let failed = store
        .transition(
            run.id,
            again.revision,
            Transition::to(RunStatus::Failed, now + 5).error(Failure::new("task_failed", "no")),
        )
        .await
        .expect("fail");

    let timeline = store.timeline(run.id).await.expect("timeline");
    type Seen<'a> = (
        Option<RunStatus>,
        RunStatus,
        &'a str,
        Option<&'a str>,
        Millis,
    );
    let seen: Vec<Seen<'_>> = timeline
        .iter()
        .map(|c| (c.from, c.to, c.reason.as_str(), c.actor.as_deref(), c.at))
        .collect();
    use RunStatus::*;
    assert_eq!(
        seen,
        [
            (None, Queued, "started", None, now),
            (Some(Queued), Running, "claimed", Some("worker-a"), now),
            (
                Some(Running),
                AwaitingEvent,
                "suspended",
                Some("worker-a"),
                now + 1
            ),
            (
                Some(AwaitingEvent),
                Queued,
                "an event arrived",
                None,
                now + 2
            ),
            (Some(Queued), Running, "claimed", Some("worker-b"), now + 4),
            (
                Some(Running),
                Failed,
                "failed: task_failed",
                Some("worker-b"),
                now + 5
            ),
        ]
    );
    let revisions: Vec<u64> = timeline.iter().map(|c| c.revision).collect();
    assert_eq!(
        revisions,
        (1..=failed.revision).collect::<Vec<_>>(),
        "one per revision"
    );
    assert_eq!(timeline[2].revision, waiting.revision);
    for change in &timeline {
        let kind = (change.to == Failed).then_some("task_failed");
        let facts = crate::ChangeFacts::default()
            .cause(change.cause)
            .error_kind(kind)
            .by_actor(change.actor.is_some());
        assert_eq!(
            change.reason,
            crate::StatusChange::reason_for(change.from, change.to, &facts),
            "the store's words are reason_for's"
        );
    }
    assert_not_found(store.timeline(RunId::new()).await);
}

/// A workflow retry (a failed attempt moving `running` to `awaiting_retry` with its attempts
/// grown) is worded as one, and completing clears the earlier attempt's error: a completed run
/// is not listed by its old error kind.
pub async fn check_retries_are_worded_and_completion_clears_the_error(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-a", now).await;
    let failure =
        Failure::new("task_failed", "card declined").call(crate::CallRef::new("charge:ab12", 0));
    let retrying = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::AwaitingRetry, now + 1)
                .due_at(now + 2)
                .error(failure)
                .attempts(2),
        )
        .await
        .expect("schedule a workflow retry");
    assert_eq!(
        retrying.error.as_ref().map(|e| e.kind.as_str()),
        Some("task_failed")
    );
    let change = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(
        (change.from, change.to, change.reason.as_str()),
        (
            Some(RunStatus::Running),
            RunStatus::AwaitingRetry,
            "workflow retry scheduled"
        )
    );
    let queued = store
        .transition(
            run.id,
            retrying.revision,
            Transition::to(RunStatus::Queued, now + 2),
        )
        .await
        .expect("due");
    assert!(queued.error.is_some(), "the error stays while it retries");
    let again = store
        .claim(claim_request(&run.namespace, "worker-b", 1, now + 3))
        .await
        .expect("claim")
        .runs
        .pop()
        .expect("claimed again");
    let done = store
        .transition(
            run.id,
            again.revision,
            Transition::to(RunStatus::Completed, now + 4).output(json!("ok"), "fp"),
        )
        .await
        .expect("complete");
    assert_eq!(done.error, None, "completing clears the old error");
    assert_eq!(store.get_run(run.id).await.expect("get_run").error, None);
    let listed = store
        .list_runs(crate::ListRuns::new(
            crate::RunFilter::default()
                .workflow(&run.namespace.workflow)
                .error_kind("task_failed"),
            10,
        ))
        .await
        .expect("list");
    assert!(listed.runs.is_empty(), "{listed:?}");
}

/// Who acted is recorded: an operator's change, a start and an event's sender, on the
/// timeline (and with the event).
pub async fn check_the_timeline_names_the_operator(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let started = create(
        store,
        new_run(&namespace, RunStatus::Queued, now).by(Some("ann@laptop".to_owned())),
    )
    .await;
    let paused = store
        .transition(
            started.id,
            started.revision,
            Transition::to(RunStatus::Paused, now + 1).by(Some("bob".to_owned())),
        )
        .await
        .expect("pause");
    store
        .transition(
            started.id,
            paused.revision,
            Transition::to(RunStatus::Queued, now + 2),
        )
        .await
        .expect("resume without a name");
    let timeline = store.timeline(started.id).await.expect("timeline");
    let actors: Vec<(&str, Option<&str>)> = timeline
        .iter()
        .map(|change| (change.reason.as_str(), change.actor.as_deref()))
        .collect();
    assert_eq!(
        actors,
        [
            ("started", Some("ann@laptop")),
            ("paused", Some("bob")),
            ("resumed", None)
        ]
    );

    let run = running(store, "worker", now).await;
    store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::AwaitingEvent, now + 1)
                .wait(WaitSpec::default().event("approved", 0)),
        )
        .await
        .expect("suspend");
    store
        .append_event(event(run.id, "approved", json!(true), now + 2).by(Some("carol".to_owned())))
        .await
        .expect("append");
    let change = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(
        (change.reason.as_str(), change.actor.as_deref()),
        ("an event arrived", Some("carol"))
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.events[0].sent_by.as_deref(), Some("carol"));
}

/// A wake-up is worded by what woke the run: a suspension whose event was already there is
/// "woken at once", an operator's early wake-up (an actor named) "woken up", a timer that came
/// due (no actor) "due"; each lands in `queued` with no sweep in between.
pub async fn check_wakes_are_worded_by_what_woke_them(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-a", now).await;
    store
        .append_event(event(run.id, "go", json!(1), now + 1))
        .await
        .expect("append");
    let raced = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::AwaitingEvent, now + 2)
                .due_at(now + 99_000)
                .wait(WaitSpec::default().event("go", 0)),
        )
        .await
        .expect("suspend");
    assert_eq!(raced.status, RunStatus::Queued);
    let change = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(
        (change.to, change.reason.as_str(), change.cause),
        (
            RunStatus::Queued,
            "suspended, and woken at once: what it awaits is there",
            Some(crate::ChangeCause::Event)
        )
    );

    for (actor, words) in [(Some("ann"), "woken up"), (None, "due")] {
        let sleeper = running(store, "worker-a", now).await;
        let sleeping = store
            .transition(
                sleeper.id,
                sleeper.revision,
                Transition::to(RunStatus::Sleeping, now + 1).due_at(now + 5),
            )
            .await
            .expect("sleep");
        store
            .transition(
                sleeper.id,
                sleeping.revision,
                Transition::to(RunStatus::Queued, now + 2).by(actor.map(str::to_owned)),
            )
            .await
            .expect("wake");
        let change = store
            .timeline(sleeper.id)
            .await
            .expect("timeline")
            .pop()
            .expect("a change");
        assert_eq!(
            (change.from, change.to, change.reason.as_str()),
            (Some(RunStatus::Sleeping), RunStatus::Queued, words),
            "woken by {actor:?}"
        );
    }
}
