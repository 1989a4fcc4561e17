//! What [`Store::run_counts`](crate::Store::run_counts) reports per workflow version.

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};

/// The runs of one workflow version waiting for a worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunCounts {
    /// The workflow version.
    pub namespace: Namespace,
    /// How many of its runs are `queued`.
    pub queued: u64,
    /// Since when the longest-waiting of them has been queued.
    pub oldest_queued_at: Option<Millis>,
}

impl RunCounts {
    /// The counts of one workflow version.
    pub fn new(namespace: Namespace, queued: u64, oldest_queued_at: Option<Millis>) -> Self {
        RunCounts {
            namespace,
            queued,
            oldest_queued_at,
        }
    }
}
