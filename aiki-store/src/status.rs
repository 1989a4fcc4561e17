use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a workflow run is in its life.
///
/// The allowed moves between statuses are one table, [`RunStatus::can_move_to`]; every
/// backend refuses a transition the table does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Created, waiting for its due time (a start delayed to a later time). Wake-ups and
    /// resumes that are due go to [`Queued`](RunStatus::Queued) at once.
    Scheduled,
    /// Due and deliverable: the next worker serving its version and pool may claim it.
    Queued,
    /// Claimed by an executor, which holds it by refreshing its claim.
    Running,
    /// Paused by an operator; `resume` queues it again.
    Paused,
    /// Suspended on a durable sleep until its wake time.
    Sleeping,
    /// Suspended until an event arrives (or its timeout passes).
    AwaitingEvent,
    /// Suspended until a failed task or workflow attempt is due to be retried.
    AwaitingRetry,
    /// Suspended until a child workflow run ends (or its timeout passes).
    AwaitingChildWorkflow,
    /// Left undelivered past the maximum age (`daemons.stallUndeliverableRuns.maxAgeMs`): not terminal, never retried on its own; leaves by
    /// `requeue` or `cancel`.
    Stalled,
    /// Finished with an output. Terminal.
    Completed,
    /// Finished with an error. Terminal.
    Failed,
    /// Cancelled. Terminal.
    Cancelled,
}

impl RunStatus {
    /// Every status, in declaration order.
    pub const ALL: [RunStatus; 12] = [
        RunStatus::Scheduled,
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::Sleeping,
        RunStatus::AwaitingEvent,
        RunStatus::AwaitingRetry,
        RunStatus::AwaitingChildWorkflow,
        RunStatus::Stalled,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// The status as stored and displayed (`snake_case`).
    pub const fn as_str(self) -> &'static str {
        match self {
            RunStatus::Scheduled => "scheduled",
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Sleeping => "sleeping",
            RunStatus::AwaitingEvent => "awaiting_event",
            RunStatus::AwaitingRetry => "awaiting_retry",
            RunStatus::AwaitingChildWorkflow => "awaiting_child_workflow",
            RunStatus::Stalled => "stalled",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// `completed`, `failed` and `cancelled`: nothing moves a run out of these.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// Ended without completing: `failed` or `cancelled`.
    pub const fn is_unsuccessful(self) -> bool {
        matches!(self, RunStatus::Failed | RunStatus::Cancelled)
    }

    /// Suspended on something durable (a sleep, an event, a child, a retry): a timer or an
    /// outside signal wakes it.
    pub const fn is_suspended(self) -> bool {
        matches!(
            self,
            RunStatus::Sleeping
                | RunStatus::AwaitingEvent
                | RunStatus::AwaitingRetry
                | RunStatus::AwaitingChildWorkflow
        )
    }

    /// `scheduled` or suspended: a timer moves the run to `queued` once its `due_at` has
    /// passed ([`Sweeper::wake_due`](crate::Sweeper::wake_due)).
    pub const fn wakes_on_timer(self) -> bool {
        matches!(self, RunStatus::Scheduled) || self.is_suspended()
    }

    /// Whether a run leaving `running` for `self` with a pause requested lands in `paused`
    /// instead: every move but an end.
    pub const fn held_by_pause(self) -> bool {
        RunStatus::Running.can_move_to(self) && !self.is_terminal()
    }

    /// The transition table. `true` when a run in `self` may move to `to`.
    ///
    /// * `scheduled` becomes `queued` when due; `queued` becomes `running` when claimed, or
    ///   `stalled` when nobody claims it within the maximum age
    ///   (`daemons.stallUndeliverableRuns.maxAgeMs`).
    /// * `running` ends (`completed`, `failed`), suspends (`sleeping`, `awaiting_*`), or is
    ///   released back to `queued` (claim recovery, shutdown).
    /// * suspended runs wake to `queued`: their timer is due, or they are woken early (`wakeup`,
    ///   an event, a child that ended). Older releases woke them early to `scheduled`, due
    ///   at once, for the next sweep to queue; a store still accepts that move.
    /// * `paused` resumes to `queued` (`scheduled` by older releases); `stalled` is
    ///   requeued to `queued`.
    /// * every non-terminal status may be cancelled; every non-terminal, non-stalled status
    ///   may be paused.
    /// * `failed` is retried to `queued` by an operator (`retry`); no other move leaves a
    ///   terminal status.
    pub const fn can_move_to(self, to: RunStatus) -> bool {
        use RunStatus::*;
        if self.is_terminal() {
            return matches!((self, to), (Failed, Queued));
        }
        match (self, to) {
            (_, Cancelled) => true,
            (Stalled, Paused) => false,
            (Paused, Paused) => false,
            (_, Paused) => true,
            (Scheduled, Queued) => true,
            (Queued, Running | Stalled) => true,
            (
                Running,
                Completed
                | Failed
                | Sleeping
                | AwaitingEvent
                | AwaitingRetry
                | AwaitingChildWorkflow
                | Queued
                | Scheduled,
            ) => true,
            (Sleeping | AwaitingEvent | AwaitingChildWorkflow, Queued | Scheduled) => true,
            (AwaitingRetry, Queued) => true,
            (Paused, Queued | Scheduled) => true,
            (Stalled, Queued) => true,
            _ => false,
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status string that is not one of the twelve [`RunStatus`] values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown run status `{0}`; expected one of: scheduled, queued, running, paused, sleeping, awaiting_event, awaiting_retry, awaiting_child_workflow, stalled, completed, failed, cancelled"
)]
pub struct UnknownStatus(pub String);

impl FromStr for RunStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::RunStatus::{self, *};

    /// The whole table, written out: every allowed move. Anything not listed is refused.
    const ALLOWED: &[(RunStatus, &[RunStatus])] = &[
        (Scheduled, &[Queued, Paused, Cancelled]),
        (Queued, &[Running, Stalled, Paused, Cancelled]),
        (
            Running,
            &[
                Queued,
                Scheduled,
                Paused,
                Sleeping,
                AwaitingEvent,
                AwaitingRetry,
                AwaitingChildWorkflow,
                Completed,
                Failed,
                Cancelled,
            ],
        ),
        (Paused, &[Queued, Scheduled, Cancelled]),
        (Sleeping, &[Queued, Scheduled, Paused, Cancelled]),
        (AwaitingEvent, &[Queued, Scheduled, Paused, Cancelled]),
        (AwaitingRetry, &[Queued, Paused, Cancelled]),
        (
            AwaitingChildWorkflow,
            &[Queued, Scheduled, Paused, Cancelled],
        ),
        (Stalled, &[Queued, Cancelled]),
        (Completed, &[]),
        (Failed, &[Queued]),
        (Cancelled, &[]),
    ];

    #[test]
    fn transition_table_is_exactly_the_documented_one() {
        for from in RunStatus::ALL {
            let allowed = ALLOWED
                .iter()
                .find(|(status, _)| *status == from)
                .map(|(_, to)| *to)
                .expect("every status has a row");
            for to in RunStatus::ALL {
                assert_eq!(
                    from.can_move_to(to),
                    allowed.contains(&to),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn statuses_round_trip_through_their_names() {
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>(), Ok(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::json!(status.as_str())
            );
        }
        assert!("done".parse::<RunStatus>().is_err());
    }
}
