//! Forks: a new run that starts with what an ended run recorded and may safely carry.

use serde::{Deserialize, Serialize};

use super::{EntryRecord, EventRecord, NewRun, SleepRecord};

/// A run to create with a carried history, in one atomic operation
/// ([`ClientStore::fork_run`](crate::ClientStore::fork_run)). The records' `run_id`s are the new run's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NewFork {
    /// The run (with its [`lineage`](NewRun::lineage)); its reference id makes the fork
    /// idempotent.
    pub run: NewRun,
    /// Manifest entries carried over.
    pub entries: Vec<EntryRecord>,
    /// Sleeps carried over, with their wake times.
    pub sleeps: Vec<SleepRecord>,
    /// Events (and event-wait timeouts) carried over, with their indexes and reference ids.
    pub events: Vec<EventRecord>,
}

impl NewFork {
    /// A fork of `run` carrying these records.
    pub fn new(
        run: NewRun,
        entries: Vec<EntryRecord>,
        sleeps: Vec<SleepRecord>,
        events: Vec<EventRecord>,
    ) -> Self {
        NewFork {
            run,
            entries,
            sleeps,
            events,
        }
    }
}
