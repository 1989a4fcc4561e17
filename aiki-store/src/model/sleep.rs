//! Durable sleeps: per-name queues of recorded sleeps.

use serde::{Deserialize, Serialize};

use super::{Millis, RunId};

/// The `index`-th durable sleep named `name` in a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SleepRecord {
    /// The run.
    pub run_id: RunId,
    /// The sleep's name (its queue).
    pub name: String,
    /// Position in the name's queue.
    pub index: u32,
    /// The duration asked for, in ms (an extension folds the new duration in here).
    pub duration_ms: i64,
    /// When the sleep ends.
    pub wake_at: Millis,
    /// Ended early by `wakeup()`.
    pub cancelled: bool,
}

impl SleepRecord {
    /// The `index`-th sleep named `name`, for `duration_ms`, ending at `wake_at`, not
    /// cancelled.
    pub fn new(
        run_id: RunId,
        name: impl Into<String>,
        index: u32,
        duration_ms: i64,
        wake_at: Millis,
    ) -> Self {
        SleepRecord {
            run_id,
            name: name.into(),
            index,
            duration_ms,
            wake_at,
            cancelled: false,
        }
    }

    /// Moves a wake time counted from the writer's `from` onto the clock of a store that
    /// reads `now` at this moment (see
    /// [`ExecutorStore::put_sleep`](crate::ExecutorStore::put_sleep)): it keeps its distance
    /// from the writer's time.
    pub fn rebase(&mut self, from: Millis, now: Millis) {
        self.wake_at = self.wake_at.saturating_add(now.saturating_sub(from));
    }
}
