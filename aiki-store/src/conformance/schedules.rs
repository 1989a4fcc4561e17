//! Checks of schedules: creation (idempotent, refused when invalid), the operator's actions,
//! and the sweep: exactly once per occurrence under racing sweepers, a frozen leader and a
//! version move, the overlap policies and the catch-up window after an outage, and
//! daylight-saving changes in three time zones, all by the store's clock.
//!
//! The sweeping checks hold [`SWEEPS`](super::SWEEPS) and work between 2026 and 2033, after
//! [`GLOBAL_TIME`](super::GLOBAL_TIME) and long before [`LOCAL_TIME`], so no other check's
//! sweep reaches their runs and no schedule of a non-sweeping check (made at `LOCAL_TIME`) is
//! due in their sweeps. Each removes its schedules when done.

use serde_json::json;

use super::{LOCAL_TIME, SWEEPS, namespace};
use crate::schedule::{Fired, fire_due, plan_due};
use crate::{
    Lease, ListRuns, Millis, Namespace, OverlapPolicy, RunAction, RunFilter, RunId, RunStatus,
    ScheduleAction, ScheduleCreated, ScheduleDefinition, ScheduleLogEntry, ScheduleLogKind,
    ScheduleOrigin, ScheduleRecord, ScheduleSpec, ScheduleStatus, Store, StoreError,
};

const MINUTE: Millis = 60_000;
const HOUR: Millis = 60 * MINUTE;

/// 2030-01-01T00:00:00Z: where the sweeping checks that need no calendar start.
const SCHEDULE_TIME: Millis = 1_893_456_000_000;

fn definition(namespace: &Namespace, spec: ScheduleSpec) -> ScheduleDefinition {
    ScheduleDefinition {
        spec,
        namespace: namespace.clone(),
        input: json!({"order": 1}),
        input_hash: "0".repeat(64),
        pool: "default".to_owned(),
        overlap: OverlapPolicy::Skip,
        catchup_window_ms: None,
        jitter_ms: 0,
    }
}

fn every(ms: Millis) -> ScheduleSpec {
    ScheduleSpec::Every { every_ms: ms }
}

fn cron(expression: &str, timezone: &str) -> ScheduleSpec {
    ScheduleSpec::Cron {
        expression: expression.to_owned(),
        timezone: timezone.to_owned(),
    }
}

async fn create(store: &dyn Store, definition: ScheduleDefinition, now: Millis) -> ScheduleRecord {
    let name = format!("schedule-{}", RunId::new());
    let record =
        ScheduleRecord::new(name, definition, ScheduleOrigin::Client, 1, now).expect("valid");
    match store.create_schedule(record, None).await.expect("create") {
        ScheduleCreated::Created(record) => record,
        existing => panic!("a new name found {existing:?}"),
    }
}

async fn lease(store: &dyn Store, holder: &str, now: Millis) -> Lease {
    let name = format!("schedules-{}", RunId::new());
    store
        .acquire_lease(&name, holder, 10 * HOUR * 24 * 365 * 10, now)
        .await
        .expect("lease")
}

async fn log(store: &dyn Store, name: &str) -> Vec<ScheduleLogEntry> {
    store.schedule_log(name, 10_000).await.expect("log")
}

fn of_kind(rows: &[ScheduleLogEntry], kind: ScheduleLogKind) -> Vec<&ScheduleLogEntry> {
    rows.iter().filter(|row| row.kind == kind).collect()
}

async fn runs_of(store: &dyn Store, namespace: &Namespace) -> Vec<crate::RunRecord> {
    let filter = RunFilter::default()
        .workflow(namespace.workflow.clone())
        .version(namespace.version.clone());
    store
        .list_runs(ListRuns::new(filter, 1_000))
        .await
        .expect("list")
        .runs
}

async fn delete(store: &dyn Store, name: &str) {
    store
        .act_on_schedule(name, ScheduleAction::Delete, None, LOCAL_TIME)
        .await
        .expect("delete");
}

/// Creating a schedule twice with one definition gives the first; another definition under
/// the same name is refused; invalid definitions are refused with nothing stored.
pub async fn check_schedules_are_created_once_and_checked(store: &dyn Store) {
    let ns = namespace();
    let spec = cron("0 9 * * MON-FRI", "Europe/Berlin");
    let first = create(store, definition(&ns, spec.clone()), LOCAL_TIME).await;
    assert_eq!(first.revision, 1);
    assert_eq!(first.status, ScheduleStatus::Active);
    assert!(first.next_at.is_some_and(|at| at > LOCAL_TIME));
    let again = ScheduleRecord::new(
        first.name.clone(),
        definition(&ns, spec),
        ScheduleOrigin::Client,
        1,
        LOCAL_TIME + 5,
    )
    .unwrap();
    match store.create_schedule(again, None).await.expect("again") {
        ScheduleCreated::Existing(found) => assert_eq!(found, first),
        created => panic!("created twice: {created:?}"),
    }
    let other = ScheduleRecord::new(
        first.name.clone(),
        definition(&ns, every(HOUR)),
        ScheduleOrigin::Client,
        1,
        LOCAL_TIME,
    )
    .unwrap();
    assert!(matches!(
        store.create_schedule(other, None).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    assert_eq!(store.schedule(&first.name).await.expect("get"), first);
    let mut invalid = first.clone();
    invalid.name = format!("schedule-{}", RunId::new());
    for spec in [
        cron("0 25 * * *", "UTC"),
        cron("0 9 * * *", "Nowhere/City"),
        every(0),
    ] {
        invalid.definition.spec = spec;
        assert!(matches!(
            store.create_schedule(invalid.clone(), None).await,
            Err(StoreError::Invalid { .. })
        ));
    }
    assert!(matches!(
        store.schedule(&invalid.name).await,
        Err(StoreError::NotFound { .. })
    ));
    let rows = log(store, &first.name).await;
    assert_eq!(rows.len(), 1, "one row: created");
    assert_eq!(rows[0].status, Some(ScheduleStatus::Active));
    delete(store, &first.name).await;
    assert!(matches!(
        store.schedule(&first.name).await,
        Err(StoreError::NotFound { .. })
    ));
}

/// Pause stops and records; resume starts from the next occurrence after now; trigger starts
/// a run under a key of its own; backfill starts the range's occurrences under the policy
/// given; a redefinition must be newer.
pub async fn check_schedule_actions(store: &dyn Store) {
    let ns = namespace();
    let now = LOCAL_TIME;
    let record = create(store, definition(&ns, every(HOUR)), now).await;
    let name = record.name.as_str();
    let paused = store
        .act_on_schedule(
            name,
            ScheduleAction::Pause {
                reason: Some("maintenance".to_owned()),
            },
            Some("ops".to_owned()),
            now + 1,
        )
        .await
        .expect("pause");
    assert_eq!(paused.schedule.status, ScheduleStatus::Paused);
    assert_eq!(paused.schedule.revision, 2);
    assert!(matches!(
        store
            .act_on_schedule(name, ScheduleAction::Pause { reason: None }, None, now + 2)
            .await,
        Err(StoreError::Invalid { .. })
    ));
    let resumed = store
        .act_on_schedule(name, ScheduleAction::Resume, None, now + 5 * HOUR + 1)
        .await
        .expect("resume");
    assert_eq!(resumed.schedule.status, ScheduleStatus::Active);
    assert_eq!(
        resumed.schedule.next_at,
        Some(now + 6 * HOUR),
        "the hours while paused are not caught up"
    );
    let triggered = store
        .act_on_schedule(name, ScheduleAction::Trigger, None, now + 5 * HOUR + 2)
        .await
        .expect("trigger");
    assert_eq!(triggered.runs.len(), 1);
    assert!(triggered.log[0].key.starts_with("trigger:"));
    let run = store.get_run(triggered.runs[0]).await.expect("run");
    assert_eq!(run.namespace, ns);
    assert_eq!(run.status, RunStatus::Queued);
    // The triggered run is open: a backfill under the schedule's `skip` starts nothing, one
    // told `allow` starts every occurrence in range.
    let skipped = store
        .act_on_schedule(
            name,
            ScheduleAction::Backfill {
                from: now - 3 * HOUR,
                to: now - HOUR,
                overlap: None,
            },
            None,
            now + 5 * HOUR + 3,
        )
        .await
        .expect("backfill");
    assert!(skipped.runs.is_empty());
    assert_eq!(of_kind(&skipped.log, ScheduleLogKind::Skipped).len(), 3);
    let backfilled = store
        .act_on_schedule(
            name,
            ScheduleAction::Backfill {
                from: now - 3 * HOUR,
                to: now - HOUR,
                overlap: Some(OverlapPolicy::Allow),
            },
            None,
            now + 5 * HOUR + 4,
        )
        .await
        .expect("backfill");
    assert_eq!(backfilled.runs.len(), 3);
    let mut started: Vec<RunId> = store
        .list_runs(ListRuns::new(RunFilter::default().schedule(name), 100))
        .await
        .expect("list by schedule")
        .runs
        .iter()
        .map(|run| run.id)
        .collect();
    started.sort();
    let mut expected = [triggered.runs.clone(), backfilled.runs.clone()].concat();
    expected.sort();
    assert_eq!(
        started, expected,
        "the runs the schedule started, and only those"
    );
    let nominal: Vec<_> = backfilled.log.iter().map(|row| row.nominal_at).collect();
    assert_eq!(
        nominal,
        vec![Some(now - 3 * HOUR), Some(now - 2 * HOUR), Some(now - HOUR)]
    );
    assert!(
        backfilled
            .log
            .iter()
            .all(|row| row.key.starts_with("backfill:")),
        "backfilled runs never take an occurrence's key"
    );
    assert!(matches!(
        store
            .act_on_schedule(
                name,
                ScheduleAction::Backfill {
                    from: now,
                    to: now - 1,
                    overlap: None
                },
                None,
                now + 5 * HOUR + 5,
            )
            .await,
        Err(StoreError::Invalid { .. })
    ));
    let newer = definition(&Namespace::new(ns.workflow.clone(), "2.0.0"), every(HOUR));
    let stale = ScheduleAction::Redefine {
        definition: Box::new(newer.clone()),
        generation: 1,
    };
    assert!(matches!(
        store
            .act_on_schedule(name, stale, None, now + 6 * HOUR)
            .await,
        Err(StoreError::Invalid { .. })
    ));
    let moved = store
        .act_on_schedule(
            name,
            ScheduleAction::Redefine {
                definition: Box::new(newer),
                generation: 2,
            },
            None,
            now + 6 * HOUR,
        )
        .await
        .expect("redefine");
    assert_eq!(moved.schedule.generation, 2);
    assert_eq!(moved.schedule.definition.namespace.version, "2.0.0");
    let rows = log(store, name).await;
    let statuses: Vec<_> = of_kind(&rows, ScheduleLogKind::Status)
        .iter()
        .map(|row| (row.status, row.reason.clone()))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (Some(ScheduleStatus::Active), Some("created".to_owned())),
            (Some(ScheduleStatus::Paused), Some("maintenance".to_owned())),
            (Some(ScheduleStatus::Active), Some("resumed".to_owned())),
            (
                Some(ScheduleStatus::Active),
                Some("redefined at generation 2".to_owned())
            ),
        ]
    );
    assert_eq!(
        of_kind(&rows, ScheduleLogKind::Status)[1].actor.as_deref(),
        Some("ops")
    );
    assert!(matches!(
        store
            .act_on_schedule("no-such-schedule", ScheduleAction::Trigger, None, now)
            .await,
        Err(StoreError::NotFound { .. })
    ));
    delete(store, name).await;
}

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

/// RFC 3339 to ms.
fn at(text: &str) -> Millis {
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("a time")
        .timestamp_millis()
}

/// Both daylight-saving changes in Europe/Berlin, America/New_York and Australia/Lord_Howe
/// (a 30-minute shift), fired by the sweep skipping from one occurrence to the next by the
/// schedule's own next time: a fixed local time that does not exist fires once at the first
/// instant after the gap, one that exists twice fires once (the first), and a wildcard hour
/// follows absolute time (both 02:00s at fall-back).
pub async fn check_daylight_saving_changes(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let cases = [
        // Berlin, spring forward 2027-03-28 02:00 CET -> 03:00 CEST.
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2027-03-26T12:00:00Z",
            vec![
                "2027-03-27T01:30:00Z",
                "2027-03-28T01:00:00Z",
                "2027-03-29T00:30:00Z",
            ],
        ),
        // Berlin, fall back 2027-10-31 03:00 CEST -> 02:00 CET.
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2027-10-29T12:00:00Z",
            vec![
                "2027-10-30T00:30:00Z",
                "2027-10-31T00:30:00Z",
                "2027-11-01T01:30:00Z",
            ],
        ),
        (
            "0 * * * *",
            "Europe/Berlin",
            "2027-10-30T22:30:00Z",
            vec![
                "2027-10-30T23:00:00Z",
                "2027-10-31T00:00:00Z",
                "2027-10-31T01:00:00Z",
                "2027-10-31T02:00:00Z",
            ],
        ),
        // New York, spring forward 2027-03-14 02:00 EST -> 03:00 EDT.
        (
            "30 2 * * *",
            "America/New_York",
            "2027-03-12T12:00:00Z",
            vec![
                "2027-03-13T07:30:00Z",
                "2027-03-14T07:00:00Z",
                "2027-03-15T06:30:00Z",
            ],
        ),
        // New York, fall back 2027-11-07 02:00 EDT -> 01:00 EST.
        (
            "30 1 * * *",
            "America/New_York",
            "2027-11-05T12:00:00Z",
            vec![
                "2027-11-06T05:30:00Z",
                "2027-11-07T05:30:00Z",
                "2027-11-08T06:30:00Z",
            ],
        ),
        (
            "0 * * * *",
            "America/New_York",
            "2027-11-07T04:30:00Z",
            vec![
                "2027-11-07T05:00:00Z",
                "2027-11-07T06:00:00Z",
                "2027-11-07T07:00:00Z",
            ],
        ),
        // Lord Howe, spring forward 2027-10-03 02:00 (+10:30) -> 02:30 (+11).
        (
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2027-10-01T00:00:00Z",
            vec![
                "2027-10-01T15:45:00Z",
                "2027-10-02T15:30:00Z",
                "2027-10-03T15:15:00Z",
            ],
        ),
        // Lord Howe, fall back 2027-04-04 02:00 (+11) -> 01:30 (+10:30).
        (
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2027-04-02T00:00:00Z",
            vec![
                "2027-04-02T14:45:00Z",
                "2027-04-03T14:45:00Z",
                "2027-04-04T15:15:00Z",
            ],
        ),
    ];
    for (expression, timezone, created, expected) in cases {
        let case = format!("`{expression}` in {timezone}");
        let ns = namespace();
        let mut def = definition(&ns, cron(expression, timezone));
        def.overlap = OverlapPolicy::Allow;
        let created = at(created);
        let record = create(store, def, created).await;
        let lease = lease(store, "dst", created).await;
        for _ in &expected {
            // Skip to the next occurrence by the schedule's own record, as TestEnv does.
            let next = store
                .schedule(&record.name)
                .await
                .expect("read")
                .fire_at()
                .expect("a next occurrence");
            fire_due(store, &lease, next, 1_000).await.expect("sweep");
        }
        let fired: Vec<_> = of_kind(&log(store, &record.name).await, ScheduleLogKind::Fired)
            .iter()
            .filter_map(|row| row.nominal_at)
            .collect();
        let expected: Vec<_> = expected.iter().map(|text| at(text)).collect();
        assert_eq!(fired, expected, "{case}");
        delete(store, &record.name).await;
    }
}

/// An operator's action on a schedule sent twice as one operation (an answer lost on the way)
/// is done once: one triggered run, a pause answered as paused the second time too.
pub async fn check_a_repeated_schedule_action_is_done_once(store: &dyn Store) {
    use crate::operation::{self, OperationId};
    let ns = namespace();
    let record = create(store, definition(&ns, every(HOUR)), LOCAL_TIME).await;
    let name = record.name.as_str();
    for action in [
        ScheduleAction::Trigger,
        ScheduleAction::Pause { reason: None },
    ] {
        let id = OperationId::new(format!("conformance-{}", RunId::new())).expect("an id");
        let send = || store.act_on_schedule(name, action.clone(), None, LOCAL_TIME + 1);
        let first = operation::scope(id.clone(), send()).await.expect("first");
        let again = operation::scope(id, send()).await.expect("the repeat");
        assert_eq!(again, first, "{action:?}: the first answer");
    }
    assert_eq!(runs_of(store, &ns).await.len(), 1, "one triggered run");
    let rows = log(store, name).await;
    assert_eq!(of_kind(&rows, ScheduleLogKind::Triggered).len(), 1);
    assert_eq!(
        of_kind(&rows, ScheduleLogKind::Status).len(),
        2,
        "created, paused"
    );
    delete(store, name).await;
}

fn in_code(name: &str, namespace: &Namespace, generation: i64) -> ScheduleRecord {
    let def = definition(namespace, every(HOUR));
    ScheduleRecord::new(name, def, ScheduleOrigin::Code, generation, LOCAL_TIME).expect("valid")
}

/// Schedules declared in code are reconciled forward only: created when new, redefined by a
/// higher generation and never by a lower one, made inactive when a worker serving their
/// version no longer declares them (still listed), active again when declared again; a
/// client's schedule of the same name is left alone; an invalid set writes nothing.
pub async fn check_schedules_in_code_are_reconciled_forward_only(store: &dyn Store) {
    use crate::schedule::Declared;
    let (v1, v2) = (namespace(), namespace());
    let a = format!("code-a-{}", RunId::new());
    let b = format!("code-b-{}", RunId::new());
    let now = LOCAL_TIME;
    let first = store
        .declare_schedules(
            vec![in_code(&a, &v1, 1), in_code(&b, &v1, 1)],
            vec![v1.clone()],
            "w1",
            now,
        )
        .await
        .expect("declare");
    assert_eq!(
        first,
        vec![
            Declared::Created { name: a.clone() },
            Declared::Created { name: b.clone() }
        ]
    );
    // A newer binary moves `a` to another version at generation 2.
    let newer = store
        .declare_schedules(
            vec![in_code(&a, &v2, 2), in_code(&b, &v1, 1)],
            vec![v1.clone(), v2.clone()],
            "w2",
            now + 1,
        )
        .await
        .expect("declare");
    assert_eq!(
        newer[0],
        Declared::Redefined {
            name: a.clone(),
            from: 1,
            to: 2
        }
    );
    assert!(matches!(&newer[1], Declared::Kept { differs: false, .. }));
    // An older binary still running declares generation 1: kept as stored.
    let older = store
        .declare_schedules(
            vec![in_code(&a, &v1, 1), in_code(&b, &v1, 1)],
            vec![v1.clone()],
            "w-old",
            now + 2,
        )
        .await
        .expect("declare");
    assert!(matches!(&older[0], Declared::Kept { stored: 2, .. }));
    let stored = store.schedule(&a).await.expect("a");
    assert_eq!(
        stored.definition.namespace, v2,
        "never overwritten by generation 1"
    );
    assert_eq!(stored.generation, 2);
    // A binary without `b`: inactive, still listed.
    let dropped = store
        .declare_schedules(
            vec![in_code(&a, &v2, 2)],
            vec![v1.clone(), v2.clone()],
            "w3",
            now + 3,
        )
        .await
        .expect("declare");
    assert!(dropped.contains(&Declared::Deactivated { name: b.clone() }));
    let listed = store.schedules().await.expect("list");
    let b_now = listed.iter().find(|s| s.name == b).expect("still listed");
    assert_eq!(b_now.status, ScheduleStatus::Inactive);
    // Declared again: active.
    let again = store
        .declare_schedules(
            vec![in_code(&a, &v2, 2), in_code(&b, &v1, 1)],
            vec![v1.clone(), v2.clone()],
            "w4",
            now + 4,
        )
        .await
        .expect("declare");
    assert_eq!(again[1], Declared::Reactivated { name: b.clone() });
    assert_eq!(
        store.schedule(&b).await.expect("b").status,
        ScheduleStatus::Active
    );
    // A client's schedule of a declared name is not the code's.
    let client = create(store, definition(&v1, every(HOUR)), now).await;
    let theirs = store
        .declare_schedules(vec![in_code(&client.name, &v1, 5)], vec![], "w5", now + 5)
        .await
        .expect("declare");
    assert_eq!(
        theirs,
        vec![Declared::NotOurs {
            name: client.name.clone()
        }]
    );
    assert_eq!(store.schedule(&client.name).await.expect("c").generation, 1);
    // Declared twice: refused, nothing written.
    let c = format!("code-c-{}", RunId::new());
    assert!(matches!(
        store
            .declare_schedules(
                vec![in_code(&c, &v1, 1), in_code(&c, &v1, 1)],
                vec![],
                "w6",
                now
            )
            .await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(matches!(
        store.schedule(&c).await,
        Err(StoreError::NotFound { .. })
    ));
    for name in [&a, &b, &client.name] {
        delete(store, name).await;
    }
}
