//! The schedule sweep: one of the daemons, run by the holder of their lease.

use super::plan_due;
use crate::{Lease, Millis, ScheduleLogKind, StoreError, Sweeper};

/// What one sweep of the schedules did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fired {
    /// The schedules written.
    pub schedules: u64,
    /// The runs started.
    pub runs: u64,
    /// The occurrences skipped or buffered by an overlap policy.
    pub skipped: u64,
    /// The occurrences found outside their catch-up window.
    pub missed: u64,
    /// The writes another sweeper came first to (nothing written by this one).
    pub lost: u64,
    /// Whether the batch came back full (more may be due).
    pub full: bool,
}

/// Fires the due occurrences of up to `limit` schedules at `now`, each schedule's in one
/// atomic write fenced by `lease` (see [`crate::schedule`]). Racing callers fire each
/// occurrence once: a write that finds the schedule moved on since it read it writes nothing
/// and counts as lost.
pub async fn fire_due<S: Sweeper + ?Sized>(
    store: &S,
    lease: &Lease,
    now: Millis,
    limit: u32,
) -> Result<Fired, StoreError> {
    let due = store.due_schedules(now, limit).await?;
    let mut fired = Fired {
        full: due.len() >= limit as usize,
        ..Fired::default()
    };
    for schedule in due {
        let write = match plan_due(&schedule, now) {
            Ok(Some(write)) => write,
            Ok(None) => continue,
            Err(error) => {
                // One schedule this release cannot compute stops no other (nor the daemons).
                tracing::error!(schedule = %schedule.record.name, %error, "schedule not fired");
                continue;
            }
        };
        // Cut at the most one write decides: the rest at the next pass, at once.
        let more = write.record.fire_at().is_some_and(|at| at <= now);
        let runs = write.runs.len() as u64;
        let count = |kinds: &[ScheduleLogKind]| -> u64 {
            write
                .log
                .iter()
                .filter(|row| kinds.contains(&row.kind))
                .map(|row| u64::try_from(row.count).unwrap_or(0))
                .sum()
        };
        let skipped = count(&[ScheduleLogKind::Skipped, ScheduleLogKind::Buffered]);
        let missed = count(&[ScheduleLogKind::Missed]);
        if store.advance_schedule(lease, write).await? {
            fired.schedules += 1;
            fired.runs += runs;
            fired.skipped += skipped;
            fired.missed += missed;
            fired.full |= more;
        } else {
            fired.lost += 1;
        }
    }
    Ok(fired)
}
