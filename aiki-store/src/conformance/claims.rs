//! Claims: filters, order and limits, refreshes, and a zombie executor fenced by the revision.

use super::*;

/// Claims take `queued` runs of the asked namespaces and pool only, oldest first, at most
/// `limit`, each becoming `running` with its owner, heartbeat and an incremented revision.
pub async fn check_claim_filters_orders_and_limits(store: &dyn Store) {
    let now = LOCAL_TIME;
    let (a, b, unlisted) = (namespace(), namespace(), namespace());
    let a_late = create(store, new_run(&a, RunStatus::Queued, now + 3)).await;
    let b_early = create(store, new_run(&b, RunStatus::Queued, now + 1)).await;
    let mut gpu = new_run(&a, RunStatus::Queued, now);
    gpu.pool = "gpu".to_owned();
    let gpu = create(store, gpu).await;
    let elsewhere = create(store, new_run(&unlisted, RunStatus::Queued, now)).await;
    let a_latest = create(store, new_run(&a, RunStatus::Queued, now + 4)).await;
    let mut scheduled = new_run(&a, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now);
    let scheduled = create(store, scheduled).await;

    let request = |limit: u32| {
        ClaimRequest::new(
            "worker-7",
            vec![a.clone(), b.clone()],
            "default",
            limit,
            now + 10,
        )
    };
    let first = store.claim(request(2)).await.expect("claim").runs;
    let ids: Vec<RunId> = first.iter().map(|run| run.id).collect();
    assert_eq!(
        ids,
        [b_early.id, a_late.id],
        "oldest first, at most the limit"
    );
    for run in &first {
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.owner.as_deref(), Some("worker-7"));
        assert_eq!(run.heartbeat_at, Some(now + 10));
        assert_eq!(run.revision, 2);
        assert_eq!(store.get_run(run.id).await.expect("get_run"), *run);
    }
    let second = store.claim(request(10)).await.expect("claim").runs;
    assert_eq!(
        second.iter().map(|run| run.id).collect::<Vec<_>>(),
        [a_latest.id]
    );
    assert!(
        store
            .claim(request(10))
            .await
            .expect("claim")
            .runs
            .is_empty()
    );
    for untouched in [gpu, elsewhere, scheduled] {
        assert_eq!(
            store.get_run(untouched.id).await.expect("get_run"),
            untouched
        );
    }
    assert!(
        store
            .claim(request(0))
            .await
            .expect("claim")
            .runs
            .is_empty()
    );
}

/// A claim leaves the runs it is told to skip queued, untouched, and takes the others.
pub async fn check_claim_skips_the_runs_it_is_told_to(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let skipped = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let taken = create(store, new_run(&namespace, RunStatus::Queued, now + 1)).await;
    let request = claim_request(&namespace, "worker-3", 10, now + 2).skip(vec![skipped.id]);
    let claimed = store.claim(request.clone()).await.expect("claim").runs;
    assert_eq!(
        claimed.iter().map(|run| run.id).collect::<Vec<_>>(),
        [taken.id]
    );
    assert_eq!(store.get_run(skipped.id).await.expect("get_run"), skipped);
    assert!(store.claim(request).await.expect("claim").runs.is_empty());
    let later = claim_request(&namespace, "worker-3", 10, now + 3);
    assert_eq!(
        store
            .claim(later)
            .await
            .expect("claim")
            .runs
            .iter()
            .map(|run| run.id)
            .collect::<Vec<_>>(),
        [skipped.id],
        "without the skip list it is claimed"
    );
}

/// A claim refresh checks owner and revision without incrementing, and moves the heartbeat.
pub async fn check_refresh_claim(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-1", now).await;
    assert_conflict(
        store
            .refresh_claim(run.id, "worker-2", run.revision, now + 1)
            .await,
        run.id,
        run.revision,
        run.revision,
    );
    assert_conflict(
        store
            .refresh_claim(run.id, "worker-1", run.revision + 1, now + 1)
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
    store
        .refresh_claim(run.id, "worker-1", run.revision, now + 30_000)
        .await
        .expect("refresh");
    let refreshed = store.get_run(run.id).await.expect("get_run");
    assert_eq!(refreshed.heartbeat_at, Some(now + 30_000));
    assert_eq!(
        refreshed.revision, run.revision,
        "refresh does not increment"
    );
    assert_eq!(refreshed.status, RunStatus::Running);
}

/// A zombie executor (its claim released and taken by another) can write nothing.
pub async fn check_zombie_executor_is_fenced(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let namespace = namespace();
    let mut new = new_run(&namespace, RunStatus::Scheduled, now);
    new.due_at = Some(LOCAL_TIME * 2);
    let run = create(store, new).await; // 1
    let run = store
        .transition(run.id, 1, Transition::to(RunStatus::Queued, now))
        .await
        .expect("queue"); // 2
    let claimed = store
        .claim(claim_request(&namespace, "zombie", 1, now))
        .await
        .expect("claim")
        .runs; // 3
    assert_eq!(claimed.len(), 1);
    let requeued = store
        .transition(run.id, 3, Transition::to(RunStatus::Queued, now))
        .await
        .expect("requeue"); // 4
    assert_eq!(requeued.revision, 4);
    let zombie = store
        .claim(claim_request(&namespace, "zombie", 1, now))
        .await
        .expect("claim")
        .runs
        .remove(0); // 5
    assert_eq!(zombie.revision, 5);

    let released = release_confirmed(store, now + 100_000).await; // 6
    assert!(released.contains(&run.id));
    let healthy = store
        .claim(claim_request(&namespace, "healthy", 1, now + 140_001))
        .await
        .expect("claim")
        .runs
        .remove(0); // 7
    assert_eq!(healthy.revision, 7);
    assert_eq!(healthy.owner.as_deref(), Some("healthy"));

    let id = run.id;
    let then = now + 140_002;
    assert_conflict(
        store.put_entry(5, entry(id, "t:1", 0, then)).await,
        id,
        5,
        7,
    );
    assert_conflict(
        store.put_sleep(5, sleep(id, "s", 0, then), None).await,
        id,
        5,
        7,
    );
    assert_conflict(store.refresh_claim(id, "zombie", 5, then).await, id, 5, 7);
    assert_conflict(
        store.record_event_timeout(id, 5, "e", 0, then).await,
        id,
        5,
        7,
    );
    assert_conflict(
        store
            .transition(id, 5, Transition::to(RunStatus::Completed, then))
            .await,
        id,
        5,
        7,
    );
    let child = new_run(&self::namespace(), RunStatus::Queued, then);
    let child_id = child.id;
    assert_conflict(
        store
            .start_child(5, entry(id, "child:1:x", 0, then), child)
            .await,
        id,
        5,
        7,
    );
    assert_not_found(store.get_run(child_id).await);
    let history = store.load_history(id).await.expect("history");
    assert_eq!(history.run, healthy, "nothing written");
    assert!(history.entries.is_empty());
    assert!(history.sleeps.is_empty());
    assert!(history.events.is_empty());
    assert!(history.children.is_empty());
}

/// An operator's release of a claim: refused (nothing changed) until claim recovery has marked
/// the claim stale for a confirmation window without a refresh since; then fenced like
/// recovery's release, recorded as the operator's; forced, at once.
pub async fn check_an_operator_releases_a_claim_once_confirmed_stale(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let lease = super::leader(store, now).await;
    let run = running(store, "gone-worker", now).await;
    let ops = Some("ops".to_owned());
    let unconfirmed = store
        .release_claim(
            run.id,
            run.revision,
            now + 1_000,
            Some(TIMING.confirm_ms),
            ops.clone(),
        )
        .await
        .expect("release");
    assert_eq!(unconfirmed, None, "not marked: refused");
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
    // A sweep finds it unrefreshed for longer than the window and marks it...
    let marked_at = now + TIMING.confirm_ms + 1;
    store
        .release_stale_claims(&lease, marked_at, TIMING, 100)
        .await
        .expect("mark");
    let early = store
        .release_claim(
            run.id,
            run.revision,
            marked_at + 1,
            Some(TIMING.confirm_ms),
            ops.clone(),
        )
        .await
        .expect("release");
    assert_eq!(early, None, "marked just now: still inside the window");
    // ...and a window later, before the idle timeout, the operator may release it.
    let released = store
        .release_claim(
            run.id,
            run.revision,
            marked_at + TIMING.confirm_ms,
            Some(TIMING.confirm_ms),
            ops,
        )
        .await
        .expect("release")
        .expect("confirmed stale: released");
    assert_eq!(released.status, RunStatus::Queued);
    assert_eq!(released.revision, run.revision + 1);
    assert_eq!(released.owner, None);
    let change = store
        .timeline(run.id)
        .await
        .expect("timeline")
        .pop()
        .expect("a change");
    assert_eq!(
        (change.reason.as_str(), change.actor.as_deref()),
        ("claim released", Some("ops"))
    );
    assert_conflict(
        store
            .release_claim(run.id, run.revision, now + 10, None, None)
            .await,
        run.id,
        run.revision,
        released.revision,
    );

    let live = running(store, "live-worker", now).await;
    let forced = store
        .release_claim(
            live.id,
            live.revision,
            now + 1,
            None,
            Some("ops".to_owned()),
        )
        .await
        .expect("release")
        .expect("forced: released");
    assert_eq!(forced.status, RunStatus::Queued);
    assert_invalid_transition(
        store
            .release_claim(live.id, forced.revision, now + 2, None, None)
            .await,
    );
}

/// A run claimed by name (delivered to one executor by a push): only while it is `queued` and
/// of a version the claimer serves, by one claimer however many race for it.
pub async fn check_a_run_is_claimed_by_name_once(store: &dyn Store) {
    let now = LOCAL_TIME;
    let (served, other) = (namespace(), namespace());
    let run = create(store, new_run(&served, RunStatus::Queued, now)).await;
    let unserved = store
        .claim_run(claim_request(&other, "push-a", 1, now + 1), run.id)
        .await
        .expect("claim_run");
    assert!(unserved.runs.is_empty(), "not of a served version");
    let untouched = store.get_run(run.id).await.expect("get_run");
    assert_eq!(
        (untouched.status, untouched.revision),
        (RunStatus::Queued, run.revision)
    );

    let claimed = store
        .claim_run(claim_request(&served, "push-a", 1, now + 2), run.id)
        .await
        .expect("claim_run");
    let [got] = claimed.runs.as_slice() else {
        panic!("the queued run is claimed: {claimed:?}")
    };
    assert_eq!(got.id, run.id);
    assert_eq!(got.status, RunStatus::Running);
    assert_eq!(got.owner.as_deref(), Some("push-a"));
    assert_eq!(got.revision, run.revision + 1);
    assert!(claimed.claim_idle_timeout_ms.is_some());
    let again = store
        .claim_run(claim_request(&served, "push-b", 1, now + 3), run.id)
        .await
        .expect("claim_run");
    assert!(
        again.runs.is_empty(),
        "a duplicated delivery claims nothing"
    );

    // Two executors handed the same run at once: one gets it.
    let raced = create(store, new_run(&served, RunStatus::Queued, now)).await;
    let (a, b) = tokio::join!(
        store.claim_run(claim_request(&served, "push-a", 1, now + 4), raced.id),
        store.claim_run(claim_request(&served, "push-b", 1, now + 4), raced.id),
    );
    let won = a.expect("claim_run").runs.len() + b.expect("claim_run").runs.len();
    assert_eq!(won, 1, "one claimer gets the run");
    assert_not_found(
        store
            .claim_run(claim_request(&served, "push-a", 1, now), RunId::new())
            .await,
    );
}
