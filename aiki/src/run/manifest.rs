//! The replay manifest: each address's queue of recorded entries, and the one rule.
//!
//! A call takes the next recorded entry at its address. A call that finds none while entries
//! of the previous execution remain unconsumed is a non-determinism error, raised before
//! anything runs. The queues are the record of what was consumed: the unconsumed addresses
//! and the failed entries are read off them; only the number of recorded entries left is kept
//! beside them, by the one method that consumes, so the check on every fresh call costs O(1).

use std::collections::HashMap;
use std::panic::Location;

use aiki_store::{EntryKind, EntryRecord, EntryStatus, RunId};

use super::{Queue, Run, queues};
use crate::error::WorkflowError;

/// Address → its recorded entries, in index order, and how many this execution consumed.
#[derive(Default)]
pub(super) struct Manifest {
    queues: HashMap<String, Queue<EntryRecord>>,
    /// Recorded entries not consumed yet; changed only by [`Manifest::take`].
    remaining: usize,
    /// Entries recorded and reserved: the history's size.
    len: usize,
}

/// What a call at an address gets.
// A transient value, one per call: boxing the entry would cost an allocation per replayed call.
#[allow(clippy::large_enum_variant)]
pub(super) enum Slot {
    /// The next recorded entry there.
    Recorded(EntryRecord),
    /// Nothing recorded: the index a fresh entry takes.
    Fresh(u32),
}

impl Manifest {
    pub(super) fn new(entries: Vec<EntryRecord>) -> Self {
        Manifest {
            remaining: entries.len(),
            len: entries.len(),
            queues: queues(entries, |entry| &entry.address, |entry| entry.index),
        }
    }

    /// Consumes the next recorded entry at `address`, if one is left.
    fn take(&mut self, address: &str) -> Option<EntryRecord> {
        let queue = self.queues.get_mut(address)?;
        let entry = queue.records.get(queue.next).cloned()?;
        queue.next += 1;
        self.remaining -= 1;
        Some(entry)
    }

    /// Reserves the next index at `address` for a fresh entry, so that a concurrent call with
    /// the same address gets the one after.
    fn reserve(&mut self, run_id: RunId, address: &str) -> u32 {
        let queue = self.queues.entry(address.to_owned()).or_default();
        let index = queue.records.len() as u32;
        queue.records.push(placeholder(run_id, address, index));
        queue.next += 1;
        self.len += 1;
        index
    }

    /// Entries recorded and reserved.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// One address per recorded entry not yet consumed by this execution, sorted.
    fn unconsumed(&self) -> Vec<String> {
        let mut unconsumed: Vec<String> = self
            .queues
            .iter()
            .flat_map(|(address, queue)| {
                queue.records[queue.next.min(queue.records.len())..]
                    .iter()
                    .map(move |_| address.clone())
            })
            .collect();
        unconsumed.sort();
        unconsumed
    }

    /// Replaces the manifest's copy of an entry just written (one this execution took, so it
    /// is consumed already).
    pub(super) fn update(&mut self, entry: EntryRecord) {
        let taken = self.queues.get_mut(&entry.address).and_then(|queue| {
            queue.records[..queue.next]
                .iter_mut()
                .rev()
                .find(|taken| taken.index == entry.index)
        });
        match taken {
            Some(taken) => *taken = entry,
            None => debug_assert!(false, "BUG: wrote an entry the manifest never handed out"),
        }
    }
}

impl Run {
    /// Takes the next recorded entry at `address`, or the index a fresh call gets there after
    /// the non-determinism check: a fresh call while recorded entries remain unconsumed fails
    /// before anything runs.
    pub(super) fn take_slot(
        &self,
        address: &str,
        call_site: Option<&'static Location<'static>>,
    ) -> Result<Slot, WorkflowError> {
        let mut replay = self.replay();
        let manifest = &mut replay.manifest;
        if let Some(entry) = manifest.take(address) {
            return Ok(Slot::Recorded(entry));
        }
        if manifest.remaining > 0 {
            let error = WorkflowError::NonDeterminism {
                new_address: address.to_owned(),
                unconsumed: manifest.unconsumed(),
                call_site: call_site.map(ToString::to_string),
            };
            return Err(self.record_fatal(&mut replay, error));
        }
        self.check_history_size(&mut replay)?;
        Ok(Slot::Fresh(replay.manifest.reserve(self.inner.id, address)))
    }
}

/// A fresh entry at `address`, `index`: a running task with no attempt yet.
pub(super) fn placeholder(run_id: RunId, address: &str, index: u32) -> EntryRecord {
    EntryRecord::new(
        run_id,
        address,
        index,
        EntryKind::Task,
        EntryStatus::Running,
        0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(address: &str, index: u32, status: EntryStatus) -> EntryRecord {
        let mut entry = placeholder(RunId::new(), address, index);
        entry.status = status;
        entry
    }

    #[test]
    fn unconsumed_and_failed_entries_are_read_off_the_queues() {
        let mut manifest = Manifest::new(vec![
            entry("b:1", 1, EntryStatus::Completed),
            entry("a:1", 0, EntryStatus::Failed),
            entry("b:1", 0, EntryStatus::Completed),
        ]);
        assert_eq!(manifest.unconsumed(), ["a:1", "b:1", "b:1"]);
        assert_eq!(manifest.remaining, 3);
        assert_eq!(manifest.take("b:1").map(|entry| entry.index), Some(0));
        assert_eq!(manifest.unconsumed(), ["a:1", "b:1"]);
        assert_eq!(manifest.remaining, 2);
        assert!(manifest.take("c:1").is_none());
        assert!(manifest.take("b:1").is_some());
        assert!(manifest.take("b:1").is_none());
        assert!(manifest.take("a:1").is_some());
        assert!(manifest.unconsumed().is_empty());
        assert_eq!(manifest.remaining, 0);

        // A fresh entry is reserved consumed.
        assert_eq!(manifest.reserve(RunId::new(), "b:1"), 2);
        assert!(manifest.unconsumed().is_empty());
    }
}
