//! What [`ReadStore::run_counts`](crate::ReadStore::run_counts) reports per workflow version.

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};
use crate::RunStatus;

/// How many runs of one workflow version are in each status, and since when its oldest
/// queued run has waited for a worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunCounts {
    /// The workflow version.
    pub namespace: Namespace,
    /// The statuses that have runs, in [`RunStatus`] order, with their counts.
    pub by_status: Vec<(RunStatus, u64)>,
    /// Since when the longest-waiting `queued` run has been queued.
    pub oldest_queued_at: Option<Millis>,
}

impl RunCounts {
    /// The counts of a workflow version with no runs yet.
    pub fn new(namespace: Namespace) -> Self {
        RunCounts {
            namespace,
            by_status: Vec::new(),
            oldest_queued_at: None,
        }
    }

    /// Adds `count` runs in `status`, keeping [`by_status`](RunCounts::by_status) in order.
    pub fn add(mut self, status: RunStatus, count: u64) -> Self {
        self.record(status, count);
        self
    }

    /// As [`add`](RunCounts::add), in place (for a store tallying rows).
    pub fn record(&mut self, status: RunStatus, count: u64) {
        match self.by_status.binary_search_by_key(&status, |(s, _)| *s) {
            Ok(at) => self.by_status[at].1 += count,
            Err(at) => self.by_status.insert(at, (status, count)),
        }
    }

    /// Sets since when the oldest queued run has waited.
    pub fn oldest_queued_at(mut self, at: Option<Millis>) -> Self {
        self.oldest_queued_at = at;
        self
    }

    /// How many runs are in `status`.
    pub fn count(&self, status: RunStatus) -> u64 {
        self.by_status
            .iter()
            .find(|(s, _)| *s == status)
            .map_or(0, |(_, count)| *count)
    }

    /// How many runs wait for a worker.
    pub fn queued(&self) -> u64 {
        self.count(RunStatus::Queued)
    }
}
