//! Manifest entries: recorded task calls and child starts.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Failure, Millis, RunId};

/// The state of one manifest entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    /// Recorded before the handler started. Found on replay, it means the executor died
    /// mid-task: it counts as a failed attempt.
    Running,
    /// Finished with an output.
    Completed,
    /// An attempt failed and another is due at `retry_at`.
    AwaitingRetry,
    /// Failed for good (attempts exhausted, or not retryable).
    Failed,
}

impl EntryStatus {
    /// The status as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Running => "running",
            EntryStatus::Completed => "completed",
            EntryStatus::AwaitingRetry => "awaiting_retry",
            EntryStatus::Failed => "failed",
        }
    }
}

impl FromStr for EntryStatus {
    type Err = UnknownEntryStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            EntryStatus::Running,
            EntryStatus::Completed,
            EntryStatus::AwaitingRetry,
            EntryStatus::Failed,
        ]
        .into_iter()
        .find(|status| status.as_str() == s)
        .ok_or_else(|| UnknownEntryStatus(s.to_owned()))
    }
}

/// An entry status string that is not one of the four [`EntryStatus`] values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown entry status `{0}`; expected one of: running, completed, awaiting_retry, failed")]
pub struct UnknownEntryStatus(pub String);

/// What a manifest entry records: a task call or a child-workflow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A task call, addressed `name:input-hash`.
    Task,
    /// A child-workflow start, addressed `name:version:reference-id-or-input-hash`. Its output
    /// is the child's run id.
    Child,
}

impl EntryKind {
    /// The kind as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            EntryKind::Task => "task",
            EntryKind::Child => "child",
        }
    }
}

impl FromStr for EntryKind {
    type Err = UnknownEntryStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "task" => Ok(EntryKind::Task),
            "child" => Ok(EntryKind::Child),
            other => Err(UnknownEntryStatus(other.to_owned())),
        }
    }
}

/// One recorded result in a run's manifest: the `index`-th call at `address`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EntryRecord {
    /// The run.
    pub run_id: RunId,
    /// The content address.
    pub address: String,
    /// Position in the address's queue (0 for the first call with this address).
    pub index: u32,
    /// Task call or child start.
    pub kind: EntryKind,
    /// Its state.
    pub status: EntryStatus,
    /// The output of a completed entry (for a child start: the child's run id as a string).
    pub output: Option<Value>,
    /// The fingerprint of the output schema that produced `output`.
    pub fingerprint: Option<String>,
    /// Attempts made so far, counting the one in progress.
    pub attempts: u32,
    /// The last attempt's error.
    pub error: Option<Failure>,
    /// When the next attempt is due (`awaiting_retry`).
    pub retry_at: Option<Millis>,
    /// What the call was given, as JSON: written with the call's first record and kept by the
    /// later ones (which may leave it `None`). A runtime may leave out a large input (see
    /// `aiki`'s task calls for the cap). `None` for calls recorded before inputs were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Time of this write.
    pub updated_at: Millis,
}

impl EntryRecord {
    /// An entry with no output, error or retry time and no attempt yet; the setters below add
    /// them.
    pub fn new(
        run_id: RunId,
        address: impl Into<String>,
        index: u32,
        kind: EntryKind,
        status: EntryStatus,
        updated_at: Millis,
    ) -> Self {
        EntryRecord {
            run_id,
            address: address.into(),
            index,
            kind,
            status,
            output: None,
            fingerprint: None,
            attempts: 0,
            error: None,
            retry_at: None,
            input: None,
            updated_at,
        }
    }

    /// Sets what the call was given.
    pub fn input(mut self, input: Option<Value>) -> Self {
        self.input = input;
        self
    }

    /// Sets the output and the fingerprint of the schema that produced it.
    pub fn output(mut self, output: Value, fingerprint: Option<String>) -> Self {
        self.output = Some(output);
        self.fingerprint = fingerprint;
        self
    }

    /// Sets the attempts made.
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// Sets the last attempt's error.
    pub fn error(mut self, error: Failure) -> Self {
        self.error = Some(error);
        self
    }

    /// Moves the entry onto the clock of a store that reads `now` at this moment (see
    /// [`ExecutorStore::put_entry`](crate::ExecutorStore::put_entry)): `updated_at` becomes
    /// `now`, and a retry time keeps its distance from it.
    pub fn rebase(&mut self, now: Millis) {
        let shift = now.saturating_sub(self.updated_at);
        if let Some(at) = &mut self.retry_at {
            *at = at.saturating_add(shift);
        }
        self.updated_at = now;
    }

    /// Sets when the next attempt is due.
    pub fn retry_at(mut self, retry_at: Millis) -> Self {
        self.retry_at = Some(retry_at);
        self
    }
}
