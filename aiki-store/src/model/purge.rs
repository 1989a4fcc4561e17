//! Retention of ended runs: which runs a purge may take, and how many at once.

use serde::{Deserialize, Serialize};

use crate::Millis;

/// The youngest an ended run may be and still be purged (1 h): a purge asked for runs ended
/// later than this before the store's now takes none of them. A handle awaiting a run's
/// result, a parent reading its child's and a start deduplicated by reference id find the run
/// for at least this long after it ended, whatever the retention or an operator asks for.
pub const PURGE_MIN_AGE_MS: Millis = 3_600_000;

/// The most runs one purge takes (see [`PurgeRuns::limit`]).
pub const PURGE_MAX_LIMIT: u32 = 10_000;

/// A purge of ended runs (see [`Sweeper::purge_runs`](crate::Sweeper::purge_runs)): the
/// runs that ended (`completed`, `failed` or `cancelled`) before `ended_before`, and before
/// the store's now less [`PURGE_MIN_AGE_MS`], whose parent, if any, is gone or purgeable by
/// the same rule; the oldest first, at most `limit` of them.
///
/// ```
/// use aiki_store::PurgeRuns;
///
/// let purge = PurgeRuns::new(1_700_000_000_000).limit(100).dry_run(true);
/// assert_eq!(purge.cutoff(1_700_000_600_000), 1_700_000_000_000 - 3_000_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PurgeRuns {
    /// Runs that ended at or after this (ms since the epoch) are kept.
    pub ended_before: Millis,
    /// The most runs this purge takes (at most [`PURGE_MAX_LIMIT`]).
    pub limit: u32,
    /// Only list the runs the purge would take, changing nothing.
    pub dry_run: bool,
}

impl PurgeRuns {
    /// A purge of the runs ended before `ended_before`, at most 500 of them.
    pub fn new(ended_before: Millis) -> Self {
        PurgeRuns {
            ended_before,
            limit: 500,
            dry_run: false,
        }
    }

    /// At most `limit` runs (clamped to 1..=[`PURGE_MAX_LIMIT`]).
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit.clamp(1, PURGE_MAX_LIMIT);
        self
    }

    /// Only list what would go (`true`), or purge it.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }

    /// The end time before which runs go, at the store's `now`: `ended_before`, or `now` less
    /// [`PURGE_MIN_AGE_MS`] when that is earlier.
    pub fn cutoff(&self, now: Millis) -> Millis {
        self.ended_before.min(now.saturating_sub(PURGE_MIN_AGE_MS))
    }
}
