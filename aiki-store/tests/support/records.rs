//! Records the backend tests build.

use aiki_store::{ClaimRequest, EntryKind, EntryRecord, EntryStatus, Namespace, NewRun, RunId};
use serde_json::json;

/// A queued run of `namespace`, created at `now`.
pub fn new_run(namespace: &Namespace, now: i64) -> NewRun {
    NewRun::new(namespace.clone(), json!({"n": 1}), "h", now)
}

/// A claim of one run of `namespace` at `now`.
pub fn claim(namespace: &Namespace, now: i64) -> ClaimRequest {
    ClaimRequest::new("w", vec![namespace.clone()], "default", 1, now)
}

/// A completed task entry at `address`, index 0.
pub fn entry(run_id: RunId, address: &str) -> EntryRecord {
    EntryRecord::new(
        run_id,
        address,
        0,
        EntryKind::Task,
        EntryStatus::Completed,
        5,
    )
    .output(json!({"ok": true}), Some("fp".to_owned()))
    .attempts(1)
}

/// A failed run of a fresh namespace whose error names its failed entry `ship:1`#0, for the
/// retry tests; returns the run.
pub async fn failed_run(store: &dyn aiki_store::Store, now: i64) -> aiki_store::RunRecord {
    use aiki_store::{CallRef, Failure, RunStatus, Transition};
    let namespace = Namespace::new(format!("retry-{}", RunId::new()), "1");
    store
        .create_run(new_run(&namespace, now))
        .await
        .expect("create");
    let run = store
        .claim(claim(&namespace, now))
        .await
        .expect("claim")
        .runs
        .pop()
        .expect("claimed");
    let failed = EntryRecord::new(
        run.id,
        "ship:1",
        0,
        EntryKind::Task,
        EntryStatus::Failed,
        now,
    )
    .attempts(1)
    .error(Failure::new("task_failed", "carrier down"));
    store.put_entry(run.revision, failed).await.expect("entry");
    store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Failed, now)
                .error(Failure::new("task_failed", "ship").call(CallRef::new("ship:1", 0))),
        )
        .await
        .expect("fail")
}

/// The retry transition of `run` (see [`failed_run`]).
pub fn retry(run: &aiki_store::RunRecord, now: i64) -> aiki_store::Transition {
    aiki_store::Transition::to(aiki_store::RunStatus::Queued, now)
        .attempts(run.attempts + 1)
        .rerun(vec![aiki_store::CallRef::new("ship:1", 0)])
}

/// Asserts that a refused retry left `run`, its entry and its timeline as they were.
pub async fn assert_unchanged(store: &dyn aiki_store::Store, run: &aiki_store::RunRecord) {
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(
        (
            history.run.status,
            history.run.revision,
            history.run.attempts
        ),
        (run.status, run.revision, run.attempts),
        "the run is unchanged"
    );
    assert_eq!(history.entries.len(), 1);
    assert_eq!(
        (history.entries[0].status, history.entries[0].attempts),
        (EntryStatus::Failed, 1),
        "the entry is unchanged"
    );
    let timeline = store.timeline(run.id).await.expect("timeline");
    assert_eq!(
        timeline.last().map(|change| change.revision),
        Some(run.revision),
        "no change appended"
    );
}

/// A lease nobody holds: a sweep under it runs its statement and changes nothing.
pub fn unheld_lease() -> aiki_store::Lease {
    aiki_store::Lease {
        name: "nobody's".to_owned(),
        holder: "nobody".to_owned(),
        token: 0,
        expires_at: 0,
    }
}

/// A lease of its own for a test's sweeps, taken at `now` for an hour.
pub async fn lease(store: &dyn aiki_store::Sweeper, now: i64) -> aiki_store::Lease {
    store
        .acquire_lease(&format!("test-{}", RunId::new()), "test", 3_600_000, now)
        .await
        .expect("acquire_lease")
}
