//! Checks of the schedule sweep: exactly once per occurrence under racing sweepers, a frozen
//! leader and a version move; the overlap policies and the catch-up window after an outage.
//! Each holds [`SWEEPS`](super::SWEEPS) (see [`super::schedules`] for the times they use).

use super::schedules::{
    HOUR, MINUTE, SCHEDULE_TIME, create, definition, delete, every, lease, log, of_kind, published,
    runs_of,
};
use super::{SWEEPS, namespace};
use crate::schedule::{Fired, fire_due, plan_due};
use crate::{
    Millis, Namespace, OverlapPolicy, RunAction, RunId, RunStatus, ScheduleAction, ScheduleLogKind,
    Store, StoreError,
};

/// Four sweepers racing over one schedule through 100 occurrences fire each exactly once.
pub async fn check_racing_sweepers_fire_each_occurrence_once(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let ns = namespace();
    let start = SCHEDULE_TIME;
    let mut def = definition(&ns, every(1_000));
    def.overlap = OverlapPolicy::Allow;
    let record = create(store, def, start).await;
    let lease = lease(store, "racers", start).await;
    let mut total = Fired::default();
    for step in 1..=100 {
        let now = start + step * 1_000;
        let racers = (0..4).map(|_| fire_due(store, &lease, now, 1_000));
        for fired in futures_join(racers).await {
            let fired = fired.expect("sweep");
            total.runs += fired.runs;
            total.lost += fired.lost;
        }
    }
    let rows = log(store, &record.name).await;
    let fired = of_kind(&rows, ScheduleLogKind::Fired);
    assert_eq!(fired.len(), 100, "each occurrence fired once");
    let mut times: Vec<_> = fired.iter().filter_map(|row| row.nominal_at).collect();
    times.dedup();
    assert_eq!(
        times,
        (1..=100).map(|k| start + k * 1_000).collect::<Vec<_>>()
    );
    assert_eq!(
        runs_of(store, &ns).await.len(),
        100,
        "one run per occurrence"
    );
    assert_eq!(total.runs, 100);
    delete(store, &record.name).await;
}

/// Polls every future to its end, together (the conformance suite has no `futures` crate).
async fn futures_join<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|output| output.expect("ready"))
        .collect()
}

/// A leader frozen between reading a schedule and writing its advance writes nothing once
/// another took the lease over, whether or not the other fired first; a write whose occurrence
/// key is taken is refused even at the current revision; moving the schedule to another
/// workflow version between two occurrences fires each once.
pub async fn check_a_frozen_leader_and_a_version_move_fire_each_occurrence_once(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let ns = namespace();
    let start = SCHEDULE_TIME + 1_000 * HOUR;
    let mut def = definition(&ns, every(MINUTE));
    def.overlap = OverlapPolicy::Allow;
    let record = create(store, def.clone(), start).await;
    let name = format!("leader-{}", RunId::new());
    let frozen = store
        .acquire_lease(&name, "frozen", 5_000, start)
        .await
        .expect("frozen");
    // The frozen leader reads and plans the first occurrence, then stalls past its lease.
    let due = store
        .due_schedules(start + MINUTE, 1_000)
        .await
        .expect("due");
    let mine = due
        .iter()
        .find(|due| due.record.name == record.name)
        .expect("due");
    let stale = plan_due(mine, start + MINUTE).unwrap().expect("a plan");
    let successor = store
        .acquire_lease(&name, "successor", 5 * HOUR, start + MINUTE + 6_000)
        .await
        .expect("successor");
    assert_eq!(successor.holder, "successor");
    assert!(
        !store
            .advance_schedule(&frozen, stale.clone())
            .await
            .expect("fenced"),
        "a lapsed leader's advance is refused before anyone fired"
    );
    let now = start + MINUTE + 6_000;
    fire_due(store, &successor, now, 1_000)
        .await
        .expect("sweep");
    assert!(
        !store
            .advance_schedule(&successor, stale)
            .await
            .expect("stale"),
        "an advance planned before the successor's is refused"
    );
    // A write at the current revision whose occurrence was fired already is refused by the
    // occurrence's key (the run's reference id alone would not stop it in another version).
    let current = store.due_schedules(now, 1_000).await.expect("due");
    assert!(current.iter().all(|due| due.record.name != record.name));
    let read = store.schedule(&record.name).await.expect("read");
    let mut replay = crate::ScheduleWrite::new(read.clone(), Some(read.revision));
    let mut moved_def = def.clone();
    moved_def.namespace = Namespace::new(ns.workflow.clone(), "2.0.0");
    published(store, &moved_def.namespace).await;
    replay.record.definition = moved_def.clone();
    let mut row = of_kind(&log(store, &record.name).await, ScheduleLogKind::Fired)[0].clone();
    row.revision = read.revision + 1;
    replay.log.push(row);
    assert!(
        !store
            .advance_schedule(&successor, replay)
            .await
            .expect("replay")
    );
    // Moved to 2.0.0 between the first and second occurrence: the second fires there, once.
    let plan_v1 = plan_due(
        &crate::DueSchedule {
            record: read.clone(),
            previous_open: false,
        },
        start + 2 * MINUTE,
    )
    .unwrap()
    .expect("a plan");
    store
        .act_on_schedule(
            &record.name,
            ScheduleAction::Redefine {
                definition: Box::new(moved_def.clone()),
                generation: 2,
            },
            None,
            start + 2 * MINUTE - 1,
        )
        .await
        .expect("moved");
    for _ in 0..2 {
        fire_due(store, &successor, start + 2 * MINUTE, 1_000)
            .await
            .expect("sweep");
    }
    assert!(
        !store
            .advance_schedule(&successor, plan_v1)
            .await
            .expect("v1")
    );
    let fired = of_kind(&log(store, &record.name).await, ScheduleLogKind::Fired)
        .into_iter()
        .map(|row| row.nominal_at)
        .collect::<Vec<_>>();
    assert_eq!(fired, vec![Some(start + MINUTE), Some(start + 2 * MINUTE)]);
    assert_eq!(runs_of(store, &ns).await.len(), 1, "the first in 1.0.0");
    assert_eq!(
        runs_of(store, &moved_def.namespace).await.len(),
        1,
        "the second in 2.0.0"
    );
    delete(store, &record.name).await;
}

/// After a 3 h outage an every-15-minutes schedule whose last run is still open does what its
/// overlap policy and catch-up window say: the occurrences older than the window are one
/// missed row, the ones within it are fired, skipped, buffered or supersede each other.
pub async fn check_an_outage_under_each_policy_and_window(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    // (policy, window, fired, skipped, buffered, missed, previous cancelled)
    let cases = [
        (OverlapPolicy::Skip, None, 0, 1, 0, 11, false),
        (OverlapPolicy::Allow, None, 1, 0, 0, 11, false),
        (OverlapPolicy::BufferOne, None, 0, 0, 1, 11, false),
        (OverlapPolicy::CancelPrevious, None, 1, 0, 0, 11, true),
        (OverlapPolicy::Skip, Some(HOUR), 0, 4, 0, 8, false),
        (OverlapPolicy::Allow, Some(HOUR), 4, 0, 0, 8, false),
        (OverlapPolicy::BufferOne, Some(HOUR), 0, 3, 1, 8, false),
        (OverlapPolicy::CancelPrevious, Some(HOUR), 1, 3, 0, 8, true),
    ];
    for (index, (policy, window, fired, skipped, buffered, missed, cancelled)) in
        cases.into_iter().enumerate()
    {
        let case = format!("{policy:?} with window {window:?}");
        let ns = namespace();
        let start = SCHEDULE_TIME + 2_000 * HOUR + index as Millis * 10 * HOUR;
        let mut def = definition(&ns, every(15 * MINUTE));
        def.overlap = policy;
        def.catchup_window_ms = window;
        let record = create(store, def, start).await;
        let lease = lease(store, "outage", start).await;
        fire_due(store, &lease, start + 15 * MINUTE, 1_000)
            .await
            .expect("first");
        let first = store.schedule(&record.name).await.expect("read").last_run;
        // Down from just after the first occurrence until 3 h later.
        let back = start + 15 * MINUTE + 3 * HOUR;
        fire_due(store, &lease, back, 1_000).await.expect("after");
        let rows = log(store, &record.name).await;
        let count = |kind| of_kind(&rows, kind).len();
        assert_eq!(count(ScheduleLogKind::Fired), 1 + fired, "{case}: fired");
        assert_eq!(count(ScheduleLogKind::Skipped), skipped, "{case}: skipped");
        assert_eq!(
            count(ScheduleLogKind::Buffered),
            buffered,
            "{case}: buffered"
        );
        let gaps = of_kind(&rows, ScheduleLogKind::Missed);
        assert_eq!(gaps.len(), 1, "{case}: one row for the gap");
        assert_eq!(gaps[0].count, missed, "{case}: missed");
        assert_eq!(gaps[0].nominal_at, Some(start + 30 * MINUTE), "{case}");
        let first_run = store.get_run(first.expect("a run")).await.expect("run");
        assert_eq!(
            first_run.status == RunStatus::Cancelled,
            cancelled,
            "{case}: the previous run"
        );
        assert_eq!(
            runs_of(store, &ns).await.len(),
            1 + fired,
            "{case}: the runs started"
        );
        if buffered == 1 {
            // The buffered occurrence starts once the run before it has ended.
            store
                .act(first_run.id, RunAction::Cancel, None, back + 1)
                .await
                .expect("cancel");
            fire_due(store, &lease, back + 2, 1_000)
                .await
                .expect("buffered");
            let rows = log(store, &record.name).await;
            let waited = of_kind(&rows, ScheduleLogKind::Buffered)[0].nominal_at;
            let last = of_kind(&rows, ScheduleLogKind::Fired)
                .last()
                .map(|row| row.nominal_at);
            assert_eq!(last, Some(waited), "{case}: the buffered one fired");
            assert_eq!(runs_of(store, &ns).await.len(), 2, "{case}");
        }
        delete(store, &record.name).await;
    }
}

/// Writes planned from an earlier state never land: a sweep planned before the schedule was
/// deleted and created again under its name writes nothing; backfills buffering the same time
/// twice both land; a backfill reaching into the future is refused; a cron expression that
/// never matches is refused at creation.
pub async fn check_stale_writes_and_backfills_are_refused_or_kept_apart(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let ns = namespace();
    let start = SCHEDULE_TIME + 3_000 * HOUR;
    let lease = lease(store, "stale", start).await;
    let mut def = definition(&ns, every(MINUTE));
    def.overlap = OverlapPolicy::BufferOne;
    let first = create(store, def.clone(), start).await;
    let due = store
        .due_schedules(start + MINUTE, 1_000)
        .await
        .expect("due");
    let mine = due
        .iter()
        .find(|due| due.record.name == first.name)
        .expect("due");
    let stale = plan_due(mine, start + MINUTE).unwrap().expect("a plan");
    // Deleted and created again under the same name (revision 1 again): another schedule.
    delete(store, &first.name).await;
    let again = crate::ScheduleRecord::new(
        first.name.clone(),
        def.clone(),
        crate::ScheduleOrigin::Client,
        1,
        start + 30_000,
    )
    .unwrap();
    store.create_schedule(again, None).await.expect("again");
    assert!(
        !store.advance_schedule(&lease, stale).await.expect("stale"),
        "a write read from the deleted schedule does not land on the new one"
    );
    assert!(runs_of(store, &ns).await.is_empty());
    // Two backfills under buffer_one over the same time, a run open: both land.
    let now = start + 10 * MINUTE;
    store
        .act_on_schedule(&first.name, ScheduleAction::Trigger, None, now)
        .await
        .expect("trigger");
    for _ in 0..2 {
        let backfill = ScheduleAction::Backfill {
            from: start - 2 * MINUTE + 30_000,
            to: start + 30_000,
            overlap: Some(OverlapPolicy::BufferOne),
        };
        let done = store
            .act_on_schedule(&first.name, backfill, None, now)
            .await
            .expect("backfill");
        assert!(done.runs.is_empty(), "the triggered run is open: {done:?}");
        assert_eq!(done.log.len(), 3, "{done:?}");
    }
    let future = ScheduleAction::Backfill {
        from: now,
        to: now + HOUR,
        overlap: None,
    };
    assert!(matches!(
        store.act_on_schedule(&first.name, future, None, now).await,
        Err(StoreError::Invalid { .. })
    ));
    delete(store, &first.name).await;
    let never = crate::ScheduleRecord::new(
        format!("never-{}", RunId::new()),
        definition(&ns, super::schedules::cron("0 0 30 2 *", "UTC")),
        crate::ScheduleOrigin::Client,
        1,
        start,
    );
    assert!(matches!(never, Err(StoreError::Invalid { .. })));
}

/// An occurrence buffered while the run before it was open, then held across a pause, is
/// caught up after the resume only within its catch-up window: resumed later than that, it is
/// logged as missed and starts nothing (a paused schedule catches nothing up); resumed within
/// it, it starts once the run before it has ended.
pub async fn check_an_occurrence_buffered_across_a_pause_keeps_its_window(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    // (minutes paused after the buffered occurrence's time, whether it starts)
    for (index, (resumed_after, starts)) in [(51, false), (5, true)].into_iter().enumerate() {
        let case = format!("resumed {resumed_after} min after the buffered occurrence");
        let ns = namespace();
        let start = SCHEDULE_TIME + 4_000 * HOUR + index as Millis * 10 * HOUR;
        let mut def = definition(&ns, every(15 * MINUTE));
        def.overlap = OverlapPolicy::BufferOne;
        def.catchup_window_ms = Some(10 * MINUTE);
        let record = create(store, def, start).await;
        let name = record.name.as_str();
        let lease = lease(store, "buffered", start).await;
        fire_due(store, &lease, start + 15 * MINUTE, 1_000)
            .await
            .expect("first");
        let first = store.schedule(name).await.expect("read").last_run;
        let buffered_at = start + 30 * MINUTE;
        fire_due(store, &lease, buffered_at, 1_000)
            .await
            .expect("buffer");
        assert_eq!(
            store.schedule(name).await.expect("read").buffered_at,
            Some(buffered_at),
            "{case}"
        );
        let pause = ScheduleAction::Pause { reason: None };
        store
            .act_on_schedule(name, pause, None, buffered_at + MINUTE)
            .await
            .expect("pause");
        let first = first.expect("a run");
        store
            .act(first, RunAction::Cancel, None, buffered_at + 2 * MINUTE)
            .await
            .expect("the run before it ends while paused");
        let back = buffered_at + resumed_after * MINUTE;
        let resumed = store
            .act_on_schedule(name, ScheduleAction::Resume, None, back)
            .await
            .expect("resume");
        fire_due(store, &lease, back + 1, 1_000)
            .await
            .expect("after the resume");
        let rows = log(store, name).await;
        let fired: Vec<_> = of_kind(&rows, ScheduleLogKind::Fired)
            .iter()
            .map(|row| row.nominal_at)
            .collect();
        let missed: Vec<_> = of_kind(&rows, ScheduleLogKind::Missed)
            .iter()
            .map(|row| (row.nominal_at, row.count))
            .collect();
        if starts {
            assert_eq!(
                fired,
                vec![Some(start + 15 * MINUTE), Some(buffered_at)],
                "{case}: the buffered one fired"
            );
            assert!(missed.is_empty(), "{case}: {missed:?}");
            assert_eq!(runs_of(store, &ns).await.len(), 2, "{case}");
        } else {
            assert_eq!(
                fired,
                vec![Some(start + 15 * MINUTE)],
                "{case}: nothing fired after the resume"
            );
            assert_eq!(
                missed,
                vec![(Some(buffered_at), 1)],
                "{case}: logged missed"
            );
            assert_eq!(resumed.schedule.buffered_at, None, "{case}");
            assert_eq!(runs_of(store, &ns).await.len(), 1, "{case}");
        }
        delete(store, name).await;
    }
}
