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

use super::{LOCAL_TIME, namespace};
use crate::{
    Lease, ListRuns, Millis, Namespace, OverlapPolicy, RunFilter, RunId, RunStatus, ScheduleAction,
    ScheduleCreated, ScheduleDefinition, ScheduleLogEntry, ScheduleLogKind, ScheduleOrigin,
    ScheduleRecord, ScheduleSpec, ScheduleStatus, Store, StoreError,
};

pub(super) const MINUTE: Millis = 60_000;
pub(super) const HOUR: Millis = 60 * MINUTE;

/// 2030-01-01T00:00:00Z: where the sweeping checks that need no calendar start.
pub(super) const SCHEDULE_TIME: Millis = 1_893_456_000_000;

pub(super) fn definition(namespace: &Namespace, spec: ScheduleSpec) -> ScheduleDefinition {
    ScheduleDefinition {
        spec,
        namespace: namespace.clone(),
        input: json!({"order": 1}),
        input_hash: super::input_hash(&json!({"order": 1})),
        pool: "default".to_owned(),
        overlap: OverlapPolicy::Skip,
        catchup_window_ms: None,
        jitter_ms: 0,
    }
}

pub(super) fn every(ms: Millis) -> ScheduleSpec {
    ScheduleSpec::Every { every_ms: ms }
}

pub(super) fn cron(expression: &str, timezone: &str) -> ScheduleSpec {
    ScheduleSpec::Cron {
        expression: expression.to_owned(),
        timezone: timezone.to_owned(),
    }
}

/// Publishes `namespace` in the catalog, taking any input: an aiki server checks a schedule's
/// workflow version and input against the catalog, and refuses a version no worker has
/// published (a store itself checks neither).
pub(super) async fn published(store: &dyn Store, namespace: &Namespace) {
    let schema = |value| crate::SchemaRecord::new(value, "conformance");
    let entry = crate::CatalogEntry::new(namespace.clone(), schema(json!({})), schema(json!({})));
    store
        .publish_catalog(entry, LOCAL_TIME)
        .await
        .expect("publish");
}

pub(super) async fn create(
    store: &dyn Store,
    definition: ScheduleDefinition,
    now: Millis,
) -> ScheduleRecord {
    published(store, &definition.namespace).await;
    let name = format!("schedule-{}", RunId::new());
    let record =
        ScheduleRecord::new(name, definition, ScheduleOrigin::Client, 1, now).expect("valid");
    match store.create_schedule(record, None).await.expect("create") {
        ScheduleCreated::Created(record) => record,
        existing => panic!("a new name found {existing:?}"),
    }
}

pub(super) async fn lease(store: &dyn Store, holder: &str, now: Millis) -> Lease {
    let name = format!("schedules-{}", RunId::new());
    store
        .acquire_lease(&name, holder, 10 * HOUR * 24 * 365 * 10, now)
        .await
        .expect("lease")
}

pub(super) async fn log(store: &dyn Store, name: &str) -> Vec<ScheduleLogEntry> {
    store.schedule_log(name, 10_000).await.expect("log")
}

pub(super) fn of_kind(rows: &[ScheduleLogEntry], kind: ScheduleLogKind) -> Vec<&ScheduleLogEntry> {
    rows.iter().filter(|row| row.kind == kind).collect()
}

pub(super) async fn runs_of(store: &dyn Store, namespace: &Namespace) -> Vec<crate::RunRecord> {
    let filter = RunFilter::default()
        .workflow(namespace.workflow.clone())
        .version(namespace.version.clone());
    store
        .list_runs(ListRuns::new(filter, 1_000))
        .await
        .expect("list")
        .runs
}

pub(super) async fn delete(store: &dyn Store, name: &str) {
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
    // The triggered run is open: a backfill told `skip` starts nothing, one told `allow`
    // starts every occurrence in range.
    let skipped = store
        .act_on_schedule(
            name,
            ScheduleAction::Backfill {
                from: now - 3 * HOUR,
                to: now - HOUR,
                overlap: Some(OverlapPolicy::Skip),
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
    published(store, &newer.namespace).await;
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

/// A backfill starts one run per occurrence in its range whatever the schedule's overlap
/// policy (`skip` here): the policy governs occurrences that come while a run is open, not a
/// request for past ones. An overlap policy given to the backfill applies among its runs.
pub async fn check_a_backfill_starts_one_run_per_occurrence(store: &dyn Store) {
    let ns = namespace();
    let now = LOCAL_TIME;
    let record = create(store, definition(&ns, every(HOUR)), now).await;
    assert_eq!(record.definition.overlap, OverlapPolicy::Skip);
    let name = record.name.as_str();
    let range = |overlap| ScheduleAction::Backfill {
        from: now - 4 * HOUR,
        to: now - HOUR,
        overlap,
    };
    let all = store
        .act_on_schedule(name, range(None), None, now + 1)
        .await
        .expect("backfill");
    assert_eq!(all.runs.len(), 4, "one run per occurrence: {:?}", all.log);
    assert_eq!(of_kind(&all.log, ScheduleLogKind::Backfilled).len(), 4);
    assert!(of_kind(&all.log, ScheduleLogKind::Skipped).is_empty());
    // Told `skip`, a backfill while those runs are open starts nothing.
    let told = store
        .act_on_schedule(name, range(Some(OverlapPolicy::Skip)), None, now + 2)
        .await
        .expect("backfill");
    assert!(told.runs.is_empty(), "{:?}", told.log);
    assert_eq!(of_kind(&told.log, ScheduleLogKind::Skipped).len(), 4);
    assert_eq!(runs_of(store, &ns).await.len(), 4);
    delete(store, name).await;
}

/// A schedule's log keeps its newest [`MAX_LOG_ROWS`](crate::schedule::MAX_LOG_ROWS) rows: the
/// write that passes the bound removes the oldest, whatever their kind.
pub async fn check_a_schedule_log_keeps_its_newest_rows(store: &dyn Store) {
    use crate::schedule::MAX_LOG_ROWS;
    let ns = namespace();
    let now = LOCAL_TIME;
    let record = create(store, definition(&ns, every(MINUTE)), now).await;
    let name = record.name.as_str();
    let triggered = store
        .act_on_schedule(name, ScheduleAction::Trigger, None, now + 1)
        .await
        .expect("trigger");
    // Skipped while the triggered run is open: one row per occurrence, no run.
    let mut last = Vec::new();
    for (round, count) in [(0, MAX_LOG_ROWS as Millis), (1, 10)] {
        let backfill = ScheduleAction::Backfill {
            from: now - (count - 1) * MINUTE,
            to: now,
            overlap: Some(OverlapPolicy::Skip),
        };
        let done = store
            .act_on_schedule(name, backfill, None, now + 2 + round)
            .await
            .expect("backfill");
        assert_eq!(done.log.len(), count as usize, "the answer keeps every row");
        last = done.log;
    }
    let rows = log(store, name).await;
    assert_eq!(rows.len(), MAX_LOG_ROWS, "bounded");
    assert_eq!(
        rows[MAX_LOG_ROWS - last.len()..],
        last[..],
        "the newest rows kept, in order"
    );
    assert!(
        rows.iter().all(|row| row.kind != ScheduleLogKind::Triggered
            && row.reason.as_deref() != Some("created")),
        "the oldest rows removed"
    );
    assert_eq!(runs_of(store, &ns).await.len(), triggered.runs.len());
    delete(store, name).await;
}
