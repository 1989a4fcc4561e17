//! Sleeps: upserts checked against the revision, and cancelling pending sleeps.

use super::*;

/// Sleeps are checked against the revision without incrementing it, and upserted by
/// `(run, name, index)` (an extension replaces the record).
pub async fn check_put_sleep(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    assert_conflict(
        store
            .put_sleep(run.revision + 1, sleep(run.id, "nap", 0, now + 1_000))
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    store
        .put_sleep(run.revision, sleep(run.id, "nap", 0, now + 1_000))
        .await
        .expect("put_sleep");
    let mut extended = sleep(run.id, "nap", 0, now + 5_000);
    extended.duration_ms = 5_000;
    store
        .put_sleep(run.revision, extended.clone())
        .await
        .expect("extend");
    let second = sleep(run.id, "nap", 1, now + 9_000);
    store
        .put_sleep(run.revision, second.clone())
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
        .put_sleep(run.revision, sleep(run.id, "done", 0, now - 1))
        .await
        .expect("put_sleep");
    store
        .put_sleep(run.revision, sleep(run.id, "pending", 0, now + 60_000))
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
