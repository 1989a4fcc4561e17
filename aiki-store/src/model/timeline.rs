//! The timeline: every status change of a run, in order.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Millis, RunId};
use crate::RunStatus;

/// What woke a suspended run, when its two statuses do not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeCause {
    /// An event arrived (any event, for a run whose wait set awaits one).
    Event,
    /// A child run it awaits ended.
    Child,
}

impl ChangeCause {
    /// The cause as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChangeCause::Event => "event",
            ChangeCause::Child => "child",
        }
    }
}

impl fmt::Display for ChangeCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ChangeCause {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "event" => Ok(ChangeCause::Event),
            "child" => Ok(ChangeCause::Child),
            other => Err(format!("unknown change cause `{other}`")),
        }
    }
}

/// The facts a store records with a status change beyond its two statuses, from which
/// [`StatusChange::reason_for`] words its reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeFacts {
    /// What woke the run, when a wake-up's statuses do not say.
    pub cause: Option<ChangeCause>,
    /// The change scheduled a workflow retry (the run's attempts grew).
    pub retry: bool,
    /// The run's error kind after the change.
    pub error_kind: Option<String>,
    /// Somebody is named as the change's actor: an operator's action (an early wake-up, say)
    /// rather than the store's own sweep (a timer that came due).
    pub by_actor: bool,
}

impl ChangeFacts {
    /// Facts with a cause.
    pub fn cause(mut self, cause: Option<ChangeCause>) -> Self {
        self.cause = cause;
        self
    }

    /// Facts of a change that did (or did not) schedule a workflow retry.
    pub fn retry(mut self, retry: bool) -> Self {
        self.retry = retry;
        self
    }

    /// Facts with the run's error kind.
    pub fn error_kind(mut self, kind: Option<&str>) -> Self {
        self.error_kind = kind.map(str::to_owned);
        self
    }

    /// Facts of a change made by a named actor (or not).
    pub fn by_actor(mut self, by_actor: bool) -> Self {
        self.by_actor = by_actor;
        self
    }
}

/// One status change of a run, as its timeline holds it. The store appends it inside the
/// statement that changes the status (a trigger on the SQL stores), so it costs no round trip.
/// The store keeps the facts; the reason is worded from them when read
/// ([`StatusChange::reason_for`]).
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
    /// What woke the run, for a wake-up by an event or a child's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<ChangeCause>,
    /// The kind of the run's recorded error after the change, if it has one (a failure's,
    /// a workflow retry's, a hand-back's when its execution budget ran out): a typed fact,
    /// read as it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// Who made the change: the operator who acted (a start, fork, cancel, pause, resume,
    /// wake-up, requeue, retry, release or event sent with an actor), else the executor that
    /// left or took `running`; `None` for the store's own sweeps and for callers that gave no
    /// name.
    pub actor: Option<String>,
    /// When.
    pub at: Millis,
}

impl StatusChange {
    /// The reason a change from `from` to `to` with `facts` is worded as. Rows written before
    /// the store kept facts hold the words the store wrote then.
    pub fn reason_for(from: Option<RunStatus>, to: RunStatus, facts: &ChangeFacts) -> String {
        use RunStatus::*;
        let Some(from) = from else {
            return "started".to_owned();
        };
        let reason = match (from, to) {
            (_, Running) => "claimed",
            (_, Completed) => "completed",
            (_, Failed) => {
                let kind = facts.error_kind.as_deref().unwrap_or("unknown");
                return format!("failed: {kind}");
            }
            (_, Cancelled) => "cancelled",
            (_, Paused) => "paused",
            (Paused, _) => "resumed",
            (_, Stalled) => "stalled: no worker claimed it in time",
            (Stalled, Queued) => "requeued",
            (Failed, Queued) => "retried",
            // Older releases landed such a suspension in `scheduled`, without a cause.
            (Running, Queued) if facts.cause.is_some() => {
                "suspended, and woken at once: what it awaits is there"
            }
            (Running, Queued) => "claim released",
            (Running, _) if facts.retry => "workflow retry scheduled",
            (Running, Scheduled) => "suspended, and woken at once: what it awaits is there",
            (Running, _) => "suspended",
            (_, Queued | Scheduled) => match facts.cause {
                Some(ChangeCause::Event) => "an event arrived",
                Some(ChangeCause::Child) => "a child run ended",
                // Woken to `scheduled` without a cause (by a release that did not record one).
                None if to == Scheduled && from == AwaitingChildWorkflow => "a child run ended",
                None if to == Scheduled && from == AwaitingEvent => "an event arrived",
                None if to == Scheduled || facts.by_actor => "woken up",
                None => "due",
            },
            _ => "changed",
        };
        reason.to_owned()
    }
}
