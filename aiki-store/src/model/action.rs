//! The operator's actions on one run, each applied by the store as one compare-and-set.

use serde::{Deserialize, Serialize};

use super::{Millis, Transition};
use crate::RunStatus;

/// An operator's action on a run ([`ClientStore::act`](crate::ClientStore::act)): the store
/// reads the run's status, checks that the action applies to it and applies it, in one atomic
/// operation, so a run that moved meanwhile is never acted on as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunAction {
    /// Ends a `sleeping` run's durable sleeps early, as cancelled: back to `queued`.
    Wakeup,
    /// Pauses a run that has not ended: at once, or, a `running` one, at its executor's next
    /// durable point (a pause request; no write of the executor is fenced).
    Pause,
    /// Puts a `paused` run back to `queued`.
    Resume,
    /// Puts a `stalled` run back into delivery (`queued`).
    Requeue,
    /// Cancels a run that has not ended.
    Cancel,
}

impl RunAction {
    /// Every action.
    pub const ALL: [RunAction; 5] = [
        RunAction::Wakeup,
        RunAction::Pause,
        RunAction::Resume,
        RunAction::Requeue,
        RunAction::Cancel,
    ];

    /// Its name in words (`wake up`, `pause`, …), for messages.
    pub fn name(self) -> &'static str {
        match self {
            RunAction::Wakeup => "wake up",
            RunAction::Pause => "pause",
            RunAction::Resume => "resume",
            RunAction::Requeue => "requeue",
            RunAction::Cancel => "cancel",
        }
    }

    /// Whether it applies to a run in `status`.
    pub fn applies_to(self, status: RunStatus) -> bool {
        match self {
            RunAction::Wakeup => status == RunStatus::Sleeping,
            RunAction::Pause => status.can_move_to(RunStatus::Paused),
            RunAction::Resume => status == RunStatus::Paused,
            RunAction::Requeue => status == RunStatus::Stalled,
            RunAction::Cancel => !status.is_terminal(),
        }
    }

    /// The statuses it applies to.
    pub fn applies_from(self) -> Vec<RunStatus> {
        RunStatus::ALL
            .into_iter()
            .filter(|status| self.applies_to(*status))
            .collect()
    }

    /// The status it moves a run to.
    pub fn to(self) -> RunStatus {
        match self {
            RunAction::Wakeup | RunAction::Resume | RunAction::Requeue => RunStatus::Queued,
            RunAction::Pause => RunStatus::Paused,
            RunAction::Cancel => RunStatus::Cancelled,
        }
    }

    /// The transition it writes at `now`, recorded as done by `actor`.
    pub fn transition(self, now: Millis, actor: Option<String>) -> Transition {
        let transition = Transition::to(self.to(), now).by(actor);
        match self {
            RunAction::Wakeup => transition.cancel_sleeps(),
            _ => transition,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_applies_where_the_client_loop_applied_it() {
        assert_eq!(RunAction::Wakeup.applies_from(), [RunStatus::Sleeping]);
        assert_eq!(RunAction::Resume.applies_from(), [RunStatus::Paused]);
        assert_eq!(RunAction::Requeue.applies_from(), [RunStatus::Stalled]);
        for status in RunStatus::ALL {
            assert_eq!(RunAction::Cancel.applies_to(status), !status.is_terminal());
            assert_eq!(
                RunAction::Pause.applies_to(status),
                status.can_move_to(RunStatus::Paused)
            );
        }
        assert!(RunAction::Pause.applies_to(RunStatus::Running));
        let json = serde_json::to_string(&RunAction::ALL).unwrap();
        assert_eq!(json, r#"["wakeup","pause","resume","requeue","cancel"]"#);
    }

    #[test]
    fn an_unknown_action_is_refused() {
        for bad in [r#""explode""#, r#""Pause""#, r#""""#, "3", "null"] {
            assert!(
                serde_json::from_str::<RunAction>(bad).is_err(),
                "{bad} is refused"
            );
        }
    }
}
