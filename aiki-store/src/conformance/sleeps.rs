//! Sleeps: upserts checked against the revision, and cancelling pending sleeps.

use super::*;

/// Sleeps are checked against the revision without incrementing it, and upserted by
/// `(run, name, index)` (an extension replaces the record). The store returns what it stored:
/// a sleep counted from the caller's time, given as the store's time, ends where the caller
/// said, and so does one counted from a recorded end (no `from`).
pub async fn check_put_sleep(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    assert_conflict(
        store
            .put_sleep(
                run.revision + 1,
                sleep(run.id, "nap", 0, now + 1_000),
                Some(now),
            )
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    let first = sleep(run.id, "nap", 0, now + 1_000);
    let stored = store
        .put_sleep(run.revision, first.clone(), Some(now))
        .await
        .expect("put_sleep");
    assert_eq!(
        stored, first,
        "counted from the store's time, it ends as asked"
    );
    let mut extended = sleep(run.id, "nap", 0, now + 5_000);
    extended.duration_ms = 5_000;
    let stored = store
        .put_sleep(run.revision, extended.clone(), None)
        .await
        .expect("extend");
    assert_eq!(
        stored, extended,
        "counted from a recorded end, it is stored as given"
    );
    let second = sleep(run.id, "nap", 1, now + 9_000);
    store
        .put_sleep(run.revision, second.clone(), Some(now + 8_000))
        .await
        .expect("put_sleep");
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.sleeps, [extended, second]);
    assert_eq!(history.run.revision, run.revision, "no increment");
}

/// `cancel_sleeps` marks the run's pending sleeps cancelled, and only those.
pub async fn check_cancel_sleeps(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    store
        .put_sleep(run.revision, sleep(run.id, "done", 0, now - 1), None)
        .await
        .expect("put_sleep");
    store
        .put_sleep(
            run.revision,
            sleep(run.id, "pending", 0, now + 60_000),
            None,
        )
        .await
        .expect("put_sleep");
    let sleeping = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now).due_at(now + 60_000),
        )
        .await
        .expect("sleep");
    let mut wake = Transition::to(RunStatus::Scheduled, now + 10).due_at(now + 10);
    wake.cancel_sleeps = true;
    let woken = store
        .transition(run.id, sleeping.revision, wake)
        .await
        .expect("wakeup");
    assert_eq!(woken.status, RunStatus::Scheduled);
    let history = store.load_history(run.id).await.expect("load_history");
    let cancelled: Vec<(&str, bool)> = history
        .sleeps
        .iter()
        .map(|sleep| (sleep.name.as_str(), sleep.cancelled))
        .collect();
    assert_eq!(cancelled, [("done", false), ("pending", true)]);
}
