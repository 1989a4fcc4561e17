//! The timeline: every status change of a run, in order.

use serde::{Deserialize, Serialize};

use super::{Millis, RunId};
use crate::RunStatus;

/// One status change of a run, as its timeline holds it. The store appends it inside the
/// statement that changes the status (a trigger on the SQL stores), so it costs no round trip.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StatusChange {
    /// The run.
    pub run_id: RunId,
    /// The run's revision after the change.
    pub revision: u64,
    /// The status before; `None` for the run's creation.
    pub from: Option<RunStatus>,
    /// The status after.
    pub to: RunStatus,
    /// Why, in a few words (see [`StatusChange::reason_for`]).
    pub reason: String,
    /// The executor that made the change (leaving `running`) or took the run (entering it);
    /// `None` for the store's own sweeps and for callers outside an execution (an operator's
    /// pause, cancel, resume, requeue or wake-up; an event; a child's end).
    pub actor: Option<String>,
    /// When.
    pub at: Millis,
}

impl StatusChange {
    /// The reason a change from `from` to `to` is recorded with: `attempts_grew` says the
    /// change scheduled a workflow retry, `error_kind` is the run's error kind after it. The
    /// SQL stores' timeline trigger computes the same words (a conformance check holds them to
    /// it).
    pub fn reason_for(
        from: Option<RunStatus>,
        to: RunStatus,
        attempts_grew: bool,
        error_kind: Option<&str>,
    ) -> String {
        use RunStatus::*;
        let Some(from) = from else {
            return "started".to_owned();
        };
        let reason = match (from, to) {
            (_, Running) => "claimed",
            (_, Completed) => "completed",
            (_, Failed) => return format!("failed: {}", error_kind.unwrap_or("unknown")),
            (_, Cancelled) => "cancelled",
            (_, Paused) => "paused",
            (Paused, _) => "resumed",
            (_, Stalled) => "stalled: no worker claimed it in time",
            (Stalled, Queued) => "requeued",
            (Failed, Queued) => "retried",
            (Running, Queued) => "claim released",
            (Running, Scheduled) if attempts_grew => "workflow retry scheduled",
            (Running, Scheduled) => "suspended, and woken at once: what it awaits is there",
            (Running, _) => "suspended",
            (AwaitingChildWorkflow, Scheduled) => "a child run ended",
            (AwaitingEvent, Scheduled) => "an event arrived",
            (_, Scheduled) => "woken up",
            (_, Queued) => "due",
            _ => "changed",
        };
        reason.to_owned()
    }
}
