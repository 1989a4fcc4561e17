//! The rules of schedules, written once for every backend: when occurrences are, which are
//! too late to start, what the overlap policy does with each, and the sweep that fires them.
//!
//! # Occurrences and time zones
//!
//! A cron schedule's occurrences are the instants whose local time in its time zone matches
//! the expression (croner, which follows Vixie cron and the Open Cron Pattern Specification
//! across daylight-saving changes):
//!
//! * an expression with a **fixed hour** fires once per matching local time: one that does not
//!   exist (spring forward: 02:30 in Europe/Berlin on the last Sunday of March) fires once at
//!   the first valid instant after the gap (03:00), one that exists twice (fall back) fires
//!   once, at its first instant;
//! * an expression with a **wildcard or stepped hour** follows absolute time: `0 * * * *` fires
//!   every hour, both 02:00s at fall-back included, and none in the skipped hour.
//!
//! An interval schedule (`every`) fires at its creation time plus whole intervals, whatever
//! the time zone.
//!
//! # Identity and exactly once
//!
//! An occurrence is identified by its schedule and its time (`at:<ms>`): the key of its row in
//! the schedule's log, unique in the store. The sweep writes the schedule's advance, the run it
//! starts and the row in one atomic [`ScheduleWrite`](crate::ScheduleWrite), checked against the revision it read and
//! fenced by the daemons' lease, so sweepers racing over one schedule (or a frozen leader
//! waking up) fire each occurrence once, whichever workflow version the schedule names by
//! then. Jitter moves when the sweep takes an occurrence, never its key. Runs started by
//! "trigger now" (`trigger:<id>`) and by a backfill (`backfill:<id>:<ms>`) have keys of their
//! own.
//!
//! # Catch-up
//!
//! An occurrence found at most its catch-up window late starts (by default one interval: the
//! time to the occurrence after it, so of a gap only the last one starts); older ones are
//! recorded as one `missed` row per gap (first, last, count). A paused schedule's occurrences
//! are neither caught up nor recorded: resuming starts from the next one. An occurrence
//! buffered before the pause (`buffer_one`) waits on after the resume only if the resume
//! comes within its catch-up window; later, it is recorded as missed.

mod actions;
mod cron;
mod declare;
mod plan;
mod sweep;
mod time;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use actions::{ATTEMPTS, busy};
pub(crate) use actions::{acted, exists_otherwise, plan_action, plan_create};
pub use declare::Declared;
pub use declare::check_declared as check_declarations;
pub(crate) use declare::{check_declared, plan_absent, plan_declared};
pub use plan::plan_due;
pub use sweep::{Fired, fire_due};
pub use time::{catchup_window, check, jitter_offset, next_after, occurrences, words};

/// The most rows a schedule's log keeps: the write that passes it removes the oldest rows,
/// whatever their kind (an occurrence's row is not what keeps it from firing twice: the
/// schedule's `decided_to` and the runs' reference ids are).
pub const MAX_LOG_ROWS: usize = 1_000;

/// The most runs one backfill starts (a longer range is refused: split it).
pub const MAX_BACKFILL: usize = 1_000;

/// The most occurrences one write of the sweep decides; a schedule with more due is taken
/// again at the next pass.
pub const MAX_PER_WRITE: usize = 100;

/// The longest interval of an `every` schedule: 366 days.
pub const MAX_EVERY_MS: crate::Millis = 366 * 86_400_000;

/// The shortest interval of an `every` schedule: 1 s.
pub const MIN_EVERY_MS: crate::Millis = 1_000;

/// The key of the occurrence at `at` in a schedule's log.
pub fn occurrence_key(at: crate::Millis) -> String {
    format!("at:{at}")
}

/// The error for an unknown schedule.
pub(crate) fn not_found(name: &str) -> crate::StoreError {
    crate::StoreError::NotFound {
        what: format!("schedule `{name}`"),
    }
}
