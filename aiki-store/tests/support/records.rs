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
