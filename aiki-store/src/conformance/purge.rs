//! Retention of ended runs. A purge reaches every run of the store, so these checks hold
//! [`SWEEPS`](super::SWEEPS) and work at times before [`GLOBAL_TIME`](super::GLOBAL_TIME),
//! where no other check's runs end; what a purge returns is filtered to the check's own runs.

use super::*;
use crate::{PURGE_MIN_AGE_MS, PurgeRuns};

const DAY: Millis = 86_400_000;

/// A run of its own namespace, claimed at `at` and moved to `status` (an end, or a sleep)
/// at `at`, with a task entry, a sleep and an event recorded first.
async fn ended(store: &dyn Store, status: RunStatus, at: Millis) -> RunRecord {
    let run = running(store, "worker", at).await;
    record_a_bit_of_everything(store, &run, at).await;
    let run = store.get_run(run.id).await.expect("get_run");
    let transition = match status {
        RunStatus::Completed => Transition::to(status, at).output(json!(1), "f"),
        RunStatus::Failed => Transition::to(status, at).error(Failure::new("task_failed", "no")),
        RunStatus::Sleeping => Transition::to(status, at).due_at(at + 365 * DAY),
        _ => Transition::to(status, at),
    };
    store
        .transition(run.id, run.revision, transition)
        .await
        .expect("end")
}

/// A task entry, a sleep and an event of `run` (running at its revision).
async fn record_a_bit_of_everything(store: &dyn Store, run: &RunRecord, at: Millis) {
    let mut done = entry(run.id, "charge:1", 0, at);
    done.status = EntryStatus::Completed;
    done.output = Some(json!(7));
    store.put_entry(run.revision, done).await.expect("entry");
    store
        .put_sleep(run.revision, sleep(run.id, "nap", 0, at), None)
        .await
        .expect("sleep");
    store
        .append_event(event(run.id, "approved", json!(true), at))
        .await
        .expect("event");
}

/// The purge's ids that are among `mine`, in the purge's order.
fn only<'a>(purged: &[RunId], mine: impl IntoIterator<Item = &'a RunRecord>) -> Vec<RunId> {
    let mine: HashSet<RunId> = mine.into_iter().map(|run| run.id).collect();
    purged
        .iter()
        .copied()
        .filter(|id| mine.contains(id))
        .collect()
}

/// A purge takes the runs ended before its cutoff, oldest first, with their entries, sleeps,
/// events and timeline, and frees their reference ids; it leaves runs not ended, children of
/// a live parent (or of a parent ended after the cutoff), runs ended after the cutoff and runs
/// younger than the minimum age, whatever the cutoff asked for. A dry run lists the same runs
/// and changes nothing.
pub async fn check_a_purge_takes_ended_runs_and_only_them(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let t = GLOBAL_TIME - 300 * DAY;
    let now = t + 30 * DAY;
    let lease = super::leader(store, t).await;

    let completed = ended(store, RunStatus::Completed, t + 1).await;
    let failed = ended(store, RunStatus::Failed, t + 2).await;
    let cancelled = ended(store, RunStatus::Cancelled, t + 3).await;
    let sleeping = ended(store, RunStatus::Sleeping, t).await;
    let live = running(store, "worker", t).await;
    // A child ended long ago under a parent still running, and one under an ended parent.
    let orphan_parent_live = running(store, "worker", t).await;
    let (child_of_live, _) = start_child_run(store, &orphan_parent_live, "a", t).await;
    let child_of_live = end_queued(store, child_of_live, t).await;
    let parent = running(store, "worker", t).await;
    let (child_of_ended, _) = start_child_run(store, &parent, "b", t).await;
    let child_of_ended = end_queued(store, child_of_ended, t).await;
    let parent = store.get_run(parent.id).await.expect("parent");
    let parent = store
        .transition(
            parent.id,
            parent.revision,
            Transition::to(RunStatus::Completed, t + 4).output(json!(2), "f"),
        )
        .await
        .expect("parent ends");
    // A child ended before the cutoff under a parent ended after it: kept with its parent.
    let late_parent = running(store, "worker", t).await;
    let (child_of_late, _) = start_child_run(store, &late_parent, "c", t).await;
    let child_of_late = end_queued(store, child_of_late, t).await;
    let late_parent = store.get_run(late_parent.id).await.expect("late parent");
    let late_parent = store
        .transition(
            late_parent.id,
            late_parent.revision,
            Transition::to(RunStatus::Completed, now - 5 * DAY).output(json!(3), "f"),
        )
        .await
        .expect("late parent ends");
    // With a reference id, ended long ago.
    let namespace = namespace();
    let mut referenced = new_run(&namespace, RunStatus::Queued, t);
    referenced.reference_id = Some("order-1".to_owned());
    let referenced = create(store, referenced).await;
    let referenced = store
        .transition(
            referenced.id,
            referenced.revision,
            Transition::to(RunStatus::Cancelled, t + 5),
        )
        .await
        .expect("cancel");
    // Ended just now: younger than the minimum age, whatever the cutoff says.
    let young = ended(store, RunStatus::Completed, now - PURGE_MIN_AGE_MS / 2).await;
    // A failed run retried since: not ended any more.
    let retried = ended(store, RunStatus::Failed, t).await;
    let retried = store
        .transition(
            retried.id,
            retried.revision,
            Transition::to(RunStatus::Queued, t + 6).attempts(2),
        )
        .await
        .expect("retry");

    let all = [
        &completed,
        &failed,
        &cancelled,
        &sleeping,
        &live,
        &orphan_parent_live,
        &child_of_live,
        &parent,
        &child_of_ended,
        &late_parent,
        &child_of_late,
        &referenced,
        &young,
        &retried,
    ];
    let expected = vec![
        child_of_ended.id,
        completed.id,
        failed.id,
        cancelled.id,
        parent.id,
        referenced.id,
    ];
    let request = PurgeRuns::new(now - 10 * DAY).limit(crate::PURGE_MAX_LIMIT);
    let before: Vec<RunRecord> = current(store, &all).await;
    // Asked for everything ended before a day from now: the minimum age still keeps the
    // young run.
    let everything = PurgeRuns::new(now + DAY)
        .limit(crate::PURGE_MAX_LIMIT)
        .dry_run(true);
    let listed = store
        .purge_runs(&lease, now, everything)
        .await
        .expect("dry run");
    let mut wider = expected.clone();
    wider.insert(0, child_of_late.id);
    wider.push(late_parent.id);
    let mut listed = only(&listed, all);
    listed.sort();
    wider.sort();
    assert_eq!(listed, wider, "the young run is kept");
    let listed = store
        .purge_runs(&lease, now, request.dry_run(true))
        .await
        .expect("dry run");
    assert_eq!(only(&listed, all), expected, "oldest first");
    assert_eq!(
        current(store, &all).await,
        before,
        "a dry run changes nothing"
    );

    let purged = store.purge_runs(&lease, now, request).await.expect("purge");
    assert_eq!(only(&purged, all), expected);
    let after = current_or_gone(store, &all, &expected).await;
    for (run, now_) in before.iter().zip(&after) {
        match now_ {
            None => assert!(expected.contains(&run.id), "{} was purged", run.id),
            Some(kept) => assert_eq!(kept, run, "a kept run is untouched"),
        }
    }
    for id in &expected {
        assert_not_found(store.load_history(*id).await);
    }
    // Nothing of the purged runs is left: a run created again under a purged id starts with
    // an empty history and timeline, and a purged run's reference id is free.
    let mut again = new_run(&completed.namespace, RunStatus::Queued, now);
    again.id = completed.id;
    let again = create(store, again).await;
    let history = store.load_history(again.id).await.expect("history");
    assert!(
        history.entries.is_empty() && history.sleeps.is_empty() && history.events.is_empty(),
        "{history:?}"
    );
    let timeline = store.timeline(again.id).await.expect("timeline");
    assert!(
        timeline.iter().all(|change| change.at == now),
        "only the new run's changes: {timeline:?}"
    );
    let mut reused = new_run(&namespace, RunStatus::Queued, now);
    reused.reference_id = Some("order-1".to_owned());
    assert!(matches!(
        store.create_run(reused).await.expect("create"),
        CreateOutcome::Created(_)
    ));

    // Once the late parent is old enough, it goes, and its child with it; once the rest have
    // ended, they go too, the child of the parent that was live included. (Nothing of this
    // check is left for the other sweeping checks, which count what their sweeps take.)
    let later = now + 30 * DAY;
    for run in [&live, &sleeping, &retried, &orphan_parent_live] {
        let run = store.get_run(run.id).await.expect("get_run");
        store
            .transition(
                run.id,
                run.revision,
                Transition::to(RunStatus::Cancelled, now),
            )
            .await
            .expect("cancel");
    }
    let purged = store
        .purge_runs(
            &lease,
            later,
            PurgeRuns::new(later).limit(crate::PURGE_MAX_LIMIT),
        )
        .await
        .expect("purge");
    let mut taken = only(&purged, all);
    taken.sort();
    let mut rest: Vec<RunId> = all
        .iter()
        .map(|run| run.id)
        .filter(|id| !expected.contains(id))
        .collect();
    rest.sort();
    assert_eq!(taken, rest, "the rest, now ended with their parents");
}

/// A purge takes at most its limit, and a purge under a lapsed lease takes nothing.
pub async fn check_a_purge_takes_at_most_its_limit_under_its_lease(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let t = GLOBAL_TIME - 200 * DAY;
    let now = t + 30 * DAY;
    let lease = super::leader(store, t).await;
    let mut runs = Vec::new();
    for i in 0..3 {
        runs.push(ended(store, RunStatus::Completed, t + i).await);
    }
    // Whatever else ended before `t` (earlier checks' runs) goes first.
    store
        .purge_runs(&lease, now, PurgeRuns::new(t).limit(crate::PURGE_MAX_LIMIT))
        .await
        .expect("the older ones");
    let lapsed = crate::Lease {
        token: lease.token - 1,
        ..lease.clone()
    };
    assert!(
        store
            .purge_runs(&lapsed, now, PurgeRuns::new(now))
            .await
            .expect("fenced")
            .is_empty(),
        "a lapsed lease purges nothing"
    );
    let first = store
        .purge_runs(&lease, now, PurgeRuns::new(now).limit(2))
        .await
        .expect("two");
    assert_eq!(first, [runs[0].id, runs[1].id]);
    assert_not_found(store.get_run(runs[0].id).await);
    store.get_run(runs[2].id).await.expect("the third stays");
}

/// A purge that asks explicitly for runs younger than [`PURGE_MIN_AGE_MS`] (a trial's short
/// retention) takes those ended before its minimum age, and keeps the younger ones; the same
/// purge without asking keeps them all.
pub async fn check_a_purge_asked_for_young_runs_takes_them(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let t = GLOBAL_TIME - 100 * DAY;
    let minute = 60_000;
    let now = t + 10 * minute;
    let lease = super::leader(store, t).await;
    let older = ended(store, RunStatus::Completed, now - 5 * minute).await;
    let younger = ended(store, RunStatus::Completed, now - 30_000).await;
    let mine = [&older, &younger];
    let plain = PurgeRuns::new(now).limit(crate::PURGE_MAX_LIMIT);
    let listed = store
        .purge_runs(&lease, now, plain.dry_run(true))
        .await
        .expect("dry run");
    assert_eq!(only(&listed, mine), [], "younger than an hour: kept");
    let short = plain.min_age(minute);
    let listed = store
        .purge_runs(&lease, now, short.dry_run(true))
        .await
        .expect("dry run");
    assert_eq!(only(&listed, mine), [older.id], "ended over a minute ago");
    let purged = store.purge_runs(&lease, now, short).await.expect("purge");
    assert_eq!(only(&purged, mine), [older.id]);
    assert_not_found(store.get_run(older.id).await);
    store
        .get_run(younger.id)
        .await
        .expect("younger than a minute: kept");
    // Asked for younger than a second, it is held to a second.
    let purged = store
        .purge_runs(&lease, now, plain.min_age(0))
        .await
        .expect("purge");
    assert_eq!(only(&purged, mine), [younger.id]);
}

/// The runs of `runs` as the store has them now.
async fn current(store: &dyn Store, runs: &[&RunRecord]) -> Vec<RunRecord> {
    let mut now = Vec::with_capacity(runs.len());
    for run in runs {
        now.push(store.get_run(run.id).await.expect("get_run"));
    }
    now
}

/// The runs of `runs` as the store has them now, `None` for those not found (and expected
/// gone).
async fn current_or_gone(
    store: &dyn Store,
    runs: &[&RunRecord],
    gone: &[RunId],
) -> Vec<Option<RunRecord>> {
    let mut now = Vec::with_capacity(runs.len());
    for run in runs {
        match store.get_run(run.id).await {
            Ok(found) => now.push(Some(found)),
            Err(StoreError::NotFound { .. }) if gone.contains(&run.id) => now.push(None),
            Err(error) => panic!("{}: {error}", run.id),
        }
    }
    now
}

/// `child` (queued) claimed and completed at `at`.
async fn end_queued(store: &dyn Store, child: RunRecord, at: Millis) -> RunRecord {
    let claimed = store
        .claim_run(claim_request(&child.namespace, "worker", 1, at), child.id)
        .await
        .expect("claim child")
        .runs;
    let child = claimed.into_iter().next().expect("the child is claimed");
    store
        .transition(
            child.id,
            child.revision,
            Transition::to(RunStatus::Completed, at).output(json!(0), "f"),
        )
        .await
        .expect("child ends")
}
