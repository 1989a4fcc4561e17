//! Retention of ended runs: which runs a purge may take, and how many at once.

use serde::{Deserialize, Serialize};

use crate::Millis;

/// The youngest an ended run may be and still be purged (1 h), unless a purge asks for younger
/// explicitly ([`PurgeRuns::min_age`]): a purge asked for runs ended later than this before the
/// store's now takes none of them. A handle awaiting a run's result, a parent reading its
/// child's and a start deduplicated by reference id find the run for at least this long after
/// it ended, whatever the retention or an operator asks for without saying so.
pub const PURGE_MIN_AGE_MS: Millis = 3_600_000;

/// The youngest an ended run may be and be purged when a purge asks for runs younger than
/// [`PURGE_MIN_AGE_MS`] explicitly (1 s): for a trial or a test that wants to see a purge (a
/// run retention of a minute, `aiki runs purge --allow-short-retention`) without waiting an
/// hour.
pub const PURGE_SHORTEST_AGE_MS: Millis = 1_000;

/// The most runs one purge takes (see [`PurgeRuns::limit`]).
pub const PURGE_MAX_LIMIT: u32 = 10_000;

/// A purge of ended runs (see [`Sweeper::purge_runs`](crate::Sweeper::purge_runs)): the
/// runs that ended (`completed`, `failed` or `cancelled`) before `ended_before`, and before
/// the store's now less its minimum age ([`PURGE_MIN_AGE_MS`] unless
/// [`min_age`](PurgeRuns::min_age) says otherwise), whose parent, if any, is gone or purgeable
/// by the same rule; the oldest first, at most `limit` of them.
///
/// ```
/// use aiki_store::PurgeRuns;
///
/// let purge = PurgeRuns::new(1_700_000_000_000).limit(100).dry_run(true);
/// assert_eq!(purge.cutoff(1_700_000_600_000), 1_700_000_000_000 - 3_000_000);
/// // A trial's purge of the runs ended a minute ago, asked for explicitly.
/// let now = 1_700_000_600_000;
/// let short = PurgeRuns::new(now - 60_000).min_age(60_000);
/// assert_eq!(short.cutoff(now), now - 60_000);
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
    /// The youngest a run may be and be taken, in ms: [`PURGE_MIN_AGE_MS`] unless set with
    /// [`min_age`](PurgeRuns::min_age).
    #[serde(default = "min_age_default")]
    pub min_age_ms: Millis,
}

fn min_age_default() -> Millis {
    PURGE_MIN_AGE_MS
}

impl PurgeRuns {
    /// A purge of the runs ended before `ended_before`, at most 500 of them.
    pub fn new(ended_before: Millis) -> Self {
        PurgeRuns {
            ended_before,
            limit: 500,
            dry_run: false,
            min_age_ms: PURGE_MIN_AGE_MS,
        }
    }

    /// Takes runs ended at least `ms` ago, younger than [`PURGE_MIN_AGE_MS`] if asked (clamped
    /// to at least [`PURGE_SHORTEST_AGE_MS`]): for a trial or a test. A handle awaiting a run's
    /// result, a parent reading its child's or a start deduplicated by reference id may then
    /// find the run gone.
    pub fn min_age(mut self, ms: Millis) -> Self {
        self.min_age_ms = ms.max(PURGE_SHORTEST_AGE_MS);
        self
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
    /// the minimum age when that is earlier.
    pub fn cutoff(&self, now: Millis) -> Millis {
        let min_age = self.min_age_ms.max(PURGE_SHORTEST_AGE_MS);
        self.ended_before.min(now.saturating_sub(min_age))
    }
}
