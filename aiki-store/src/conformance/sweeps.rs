//! The sweeps over every run: due timers, stale claims, undelivered runs. They hold [`SWEEPS`](super::SWEEPS) and work at [`GLOBAL_TIME`](super::GLOBAL_TIME).

use super::*;

/// `wake_due` queues every timer-driven run that is due, and nothing else.
pub async fn check_wake_due(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let lease = super::leader(store, now).await;
    let namespace = namespace();
    let mut scheduled = new_run(&namespace, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now + 100);
    let scheduled = create(store, scheduled).await;
    let mut later = new_run(&namespace, RunStatus::Scheduled, now);
    later.due_at = Some(LOCAL_TIME * 2);
    let later = create(store, later).await;
    let sleeper = running(store, "worker", now).await;
    let sleeper = store
        .transition(
            sleeper.id,
            sleeper.revision,
            Transition::to(RunStatus::Sleeping, now).due_at(now + 200),
        )
        .await
        .expect("sleep");
    let waiter = running(store, "worker", now).await;
    let waiter = store
        .transition(
            waiter.id,
            waiter.revision,
            Transition::to(RunStatus::AwaitingEvent, now).due_at(now + 50),
        )
        .await
        .expect("await");
    let mut paused = new_run(&namespace, RunStatus::Scheduled, now);
    paused.due_at = Some(now + 10);
    let paused = create(store, paused).await;
    let paused = store
        .transition(
            paused.id,
            paused.revision,
            Transition::to(RunStatus::Paused, now).due_at(now + 10),
        )
        .await
        .expect("pause");

    let moved = store
        .wake_due(&lease, now + 200, 100)
        .await
        .expect("wake_due");
    assert!(moved >= 3, "at least this check's three due runs moved");
    for due in [scheduled.clone(), sleeper, waiter] {
        let run = store.get_run(due.id).await.expect("get_run");
        assert_eq!(run.status, RunStatus::Queued);
        assert_eq!(run.revision, due.revision + 1);
        assert_eq!(run.due_at, None);
        assert_eq!(run.queued_at, Some(now + 200));
    }
    assert_eq!(store.get_run(later.id).await.expect("get_run"), later);
    assert_eq!(store.get_run(paused.id).await.expect("get_run"), paused);
    let again = store.get_run(scheduled.id).await.expect("get_run");
    store
        .wake_due(&lease, now + 300, 100)
        .await
        .expect("wake_due");
    assert_eq!(
        store.get_run(scheduled.id).await.expect("get_run"),
        again,
        "a queued run is not moved again"
    );
}

/// Claim recovery in two phases: a first sweep marks the stale claims and releases nothing; a
/// later one releases those still unrefreshed a confirmation window after their mark (an
/// executor back after an outage refreshes in between and keeps its run), and only those.
pub async fn check_release_stale_claims(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let lease = super::leader(store, now).await;
    let stale = running(store, "dead-worker", now).await;
    let back = running(store, "worker-back-after-an-outage", now).await;
    let fresh = running(store, "live-worker", now).await;
    store
        .refresh_claim(fresh.id, "live-worker", fresh.revision, now + 80_000)
        .await
        .expect("refresh");
    let first = now + 100_000;
    let released = store
        .release_stale_claims(&lease, first, TIMING, 100)
        .await
        .expect("mark");
    assert!(
        !released.contains(&stale.id) && !released.contains(&back.id),
        "the first sweep only marks: {released:?}"
    );
    let marked = store.get_run(stale.id).await.expect("get_run");
    assert_eq!(marked.status, RunStatus::Running);
    assert_eq!(
        marked.revision, stale.revision,
        "a mark changes no revision"
    );
    assert!(marked.claim_stale_since.is_some(), "{marked:?}");
    assert_eq!(
        store
            .get_run(fresh.id)
            .await
            .expect("get_run")
            .claim_stale_since,
        None,
        "a claim refreshed within the window is not marked"
    );
    // The executor of `back` reaches the store again and refreshes.
    store
        .refresh_claim(
            back.id,
            "worker-back-after-an-outage",
            back.revision,
            first + 1_000,
        )
        .await
        .expect("refresh after the outage");
    let second = first + TIMING.confirm_ms;
    let released = store
        .release_stale_claims(&lease, second, TIMING, 100)
        .await
        .expect("release");
    assert!(released.contains(&stale.id), "{released:?}");
    assert!(!released.contains(&back.id), "refreshed since its mark");
    assert!(!released.contains(&fresh.id));
    let run = store.get_run(stale.id).await.expect("get_run");
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(run.revision, stale.revision + 1);
    assert_eq!(run.owner, None);
    assert_eq!(run.heartbeat_at, None);
    assert_eq!(run.claim_stale_since, None);
    assert_eq!(run.queued_at, Some(second));
    for kept in [&back, &fresh] {
        let run = store.get_run(kept.id).await.expect("get_run");
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.revision, kept.revision);
    }
    let back = store.get_run(back.id).await.expect("get_run");
    assert_eq!(back.claim_stale_since, None, "its refresh cleared the mark");

    // A mark older than two windows proves nothing (no sweep ran in between: the store was
    // unreachable, say): it is made anew, and the claim released a window after that.
    let silent = running(store, "silent-worker", second).await;
    let marked = second + TIMING.idle_timeout_ms;
    store
        .release_stale_claims(&lease, marked, TIMING, 100)
        .await
        .expect("mark");
    let much_later = marked + 3 * TIMING.confirm_ms;
    let released = store
        .release_stale_claims(&lease, much_later, TIMING, 100)
        .await
        .expect("sweep");
    assert!(!released.contains(&silent.id), "an old mark is not trusted");
    assert_eq!(
        store
            .get_run(silent.id)
            .await
            .expect("get_run")
            .claim_stale_since,
        Some(much_later),
        "marked anew"
    );
    let released = store
        .release_stale_claims(&lease, much_later + TIMING.confirm_ms, TIMING, 100)
        .await
        .expect("sweep");
    assert!(released.contains(&silent.id));

    // A sweeper that has led without a break since before the mark (the store answered it,
    // and every executor, throughout) trusts the mark however old: sweeps three windows apart
    // (a slow or paused leader, a long daemons interval) still release a dead executor's run.
    let dead = running(store, "dead-between-slow-sweeps", much_later).await;
    let leading = TIMING.leading_since(Some(much_later));
    let marked = much_later + TIMING.idle_timeout_ms;
    store
        .release_stale_claims(&lease, marked, leading, 100)
        .await
        .expect("mark");
    let three_windows = marked + 3 * TIMING.confirm_ms;
    let released = store
        .release_stale_claims(&lease, three_windows, leading, 100)
        .await
        .expect("sweep");
    assert!(released.contains(&dead.id), "{released:?}");
    let run = store.get_run(dead.id).await.expect("get_run");
    assert_eq!(run.status, RunStatus::Queued);
}

/// Runs left `queued` longer than `max_age` move to `stalled`, and can be requeued.
pub async fn check_stall_undelivered(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let lease = super::leader(store, now).await;
    let namespace = namespace();
    let old = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let young = create(store, new_run(&namespace, RunStatus::Queued, now + 50_000)).await;
    let stalled = store
        .stall_undelivered(&lease, now + 100_000, 60_000, 100)
        .await
        .expect("stall");
    assert!(stalled >= 1);
    let run = store.get_run(old.id).await.expect("get_run");
    assert_eq!(run.status, RunStatus::Stalled);
    assert_eq!(run.revision, old.revision + 1);
    assert_eq!(store.get_run(young.id).await.expect("get_run"), young);
    assert!(
        store
            .claim(claim_request(&namespace, "worker", 10, now + 100_001))
            .await
            .expect("claim")
            .runs
            .iter()
            .all(|claimed| claimed.id != old.id),
        "a stalled run is not delivered"
    );
    let requeued = store
        .transition(
            old.id,
            run.revision,
            Transition::to(RunStatus::Queued, now + 200_000),
        )
        .await
        .expect("requeue");
    assert_eq!(requeued.queued_at, Some(now + 200_000), "a fresh clock");
}

/// Each sweep moves at most its batch's limit, the longest waiting first, and says how many it
/// moved, so that the daemons sweep a backlog in bounded transactions.
pub async fn check_sweeps_take_at_most_their_limit(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    // Before every other sweep check's runs, so that only this check's runs are due.
    let now = GLOBAL_TIME - 10_000_000;
    let lease = super::leader(store, now).await;
    let status = |id: RunId| async move { store.get_run(id).await.expect("get_run").status };

    let mut sleepers = Vec::new();
    for due in [now + 30, now + 10, now + 20] {
        let run = running(store, "worker", now).await;
        let sleeping = store
            .transition(
                run.id,
                run.revision,
                Transition::to(RunStatus::Sleeping, now).due_at(due),
            )
            .await
            .expect("sleep");
        sleepers.push(sleeping.id);
    }
    let woken = store.wake_due(&lease, now + 100, 2).await.expect("wake");
    assert_eq!(woken, 2, "a full batch");
    assert_eq!(status(sleepers[0]).await, RunStatus::Sleeping, "due last");
    assert_eq!(status(sleepers[1]).await, RunStatus::Queued);
    assert_eq!(status(sleepers[2]).await, RunStatus::Queued);
    let woken = store.wake_due(&lease, now + 100, 2).await.expect("wake");
    assert_eq!(woken, 1, "the rest");
    assert_eq!(status(sleepers[0]).await, RunStatus::Queued);

    // Queued since `now + 100`: stale for a one-second max age at `now + 2_000`.
    let stalled = store
        .stall_undelivered(&lease, now + 2_000, 1_000, 2)
        .await
        .expect("stall");
    assert_eq!(stalled, 2, "a full batch");
    let stalled = store
        .stall_undelivered(&lease, now + 2_000, 1_000, 2)
        .await
        .expect("stall");
    assert_eq!(stalled, 1, "the rest");

    // Claim recovery: each of its two phases (mark, release) takes at most the limit.
    for _ in 0..3 {
        running(store, "gone-worker", now + 3_000).await;
    }
    let first = now + 3_000 + TIMING.idle_timeout_ms + 1;
    let released = store
        .release_stale_claims(&lease, first, TIMING, 2)
        .await
        .expect("mark");
    assert_eq!(released, [], "the first sweep only marks");
    let released = store
        .release_stale_claims(&lease, first + TIMING.confirm_ms, TIMING, 2)
        .await
        .expect("release");
    assert_eq!(released.len(), 2, "the two marked first");
    let released = store
        .release_stale_claims(&lease, first + 2 * TIMING.confirm_ms, TIMING, 2)
        .await
        .expect("release");
    assert_eq!(released.len(), 1, "the third, marked by the second sweep");
}
