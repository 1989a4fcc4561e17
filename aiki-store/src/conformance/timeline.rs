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
    let woken = store.get_run(run.id).await.expect("get_run");
    store
        .transition(
            run.id,
            woken.revision,
            Transition::to(RunStatus::Queued, now + 3),
        )
        .await
        .expect("queue");
    let again = store
        .claim(claim_request(&run.namespace, "worker-b", 1, now + 4))
        .await
        .expect("claim")
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
                Scheduled,
                "an event arrived",
                None,
                now + 2
            ),
            (Some(Scheduled), Queued, "due", None, now + 3),
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
        assert_eq!(
            change.reason,
            crate::StatusChange::reason_for(change.from, change.to, false, kind),
            "the store's words are reason_for's"
        );
    }
    assert_not_found(store.timeline(RunId::new()).await);
}
