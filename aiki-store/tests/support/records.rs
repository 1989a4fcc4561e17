//! Records the backend tests build.

use aiki_store::{
    ClaimRequest, EntryKind, EntryRecord, EntryStatus, Namespace, NewRun, RunId, RunStatus,
};
use serde_json::json;

/// A queued run of `namespace`, created at `now`.
pub fn new_run(namespace: &Namespace, now: i64) -> NewRun {
    NewRun {
        id: RunId::new(),
        namespace: namespace.clone(),
        input: json!({"n": 1}),
        input_hash: "h".to_owned(),
        reference_id: None,
        pool: "default".to_owned(),
        status: RunStatus::Queued,
        due_at: None,
        parent: None,
        now,
    }
}

/// A claim of one run of `namespace` at `now`.
pub fn claim(namespace: &Namespace, now: i64) -> ClaimRequest {
    ClaimRequest {
        owner: "w".to_owned(),
        namespaces: vec![namespace.clone()],
        pool: "default".to_owned(),
        limit: 1,
        now,
    }
}

/// A completed task entry at `address`, index 0.
pub fn entry(run_id: RunId, address: &str) -> EntryRecord {
    EntryRecord {
        run_id,
        address: address.to_owned(),
        index: 0,
        kind: EntryKind::Task,
        status: EntryStatus::Completed,
        output: Some(json!({"ok": true})),
        fingerprint: Some("fp".to_owned()),
        attempts: 1,
        error: None,
        retry_at: None,
        updated_at: 5,
    }
}
