//! The replay manifest: each address's queue of recorded entries, and the one rule.
//!
//! A call takes the next recorded entry at its address. A call that finds none while entries
//! of the previous execution remain unconsumed is a non-determinism error, raised before
//! anything runs.

use aiki_store::{EntryKind, EntryRecord, EntryStatus, RunId};

use super::Run;
use crate::error::WorkflowError;

/// What a call at an address gets.
pub(super) enum Slot {
    /// The next recorded entry there.
    Recorded(EntryRecord),
    /// Nothing recorded: the index a fresh entry takes.
    Fresh(u32),
}

impl Run {
    /// Takes the next recorded entry at `address`, or the index a fresh call gets there after
    /// the non-determinism check: a fresh call while recorded entries remain unconsumed fails
    /// before anything runs.
    pub(super) fn take_slot(&self, address: &str) -> Result<Slot, WorkflowError> {
        let mut replay = self.replay();
        let replay = &mut *replay;
        let queue = replay.manifest.entry(address.to_owned()).or_default();
        if let Some(entry) = queue.records.get(queue.next).cloned() {
            queue.next += 1;
            replay.unconsumed -= 1;
            return Ok(Slot::Recorded(entry));
        }
        let index = queue.records.len() as u32;
        if replay.unconsumed > 0 {
            let mut unconsumed: Vec<String> = replay
                .manifest
                .iter()
                .flat_map(|(address, queue)| {
                    queue.records[queue.next.min(queue.records.len())..]
                        .iter()
                        .map(move |_| address.clone())
                })
                .collect();
            unconsumed.sort();
            let error = WorkflowError::NonDeterminism {
                new_address: address.to_owned(),
                unconsumed,
            };
            return Err(self.record_fatal(replay, error));
        }
        // Reserve the slot, so that a concurrent call with the same address gets the next one.
        queue
            .records
            .push(placeholder(self.inner.id, address, index));
        queue.next += 1;
        Ok(Slot::Fresh(index))
    }
}

/// A fresh entry at `address`, `index`: a running task with no attempt yet.
pub(super) fn placeholder(run_id: RunId, address: &str, index: u32) -> EntryRecord {
    EntryRecord {
        run_id,
        address: address.to_owned(),
        index,
        kind: EntryKind::Task,
        status: EntryStatus::Running,
        output: None,
        fingerprint: None,
        attempts: 0,
        error: None,
        retry_at: None,
        updated_at: 0,
    }
}
