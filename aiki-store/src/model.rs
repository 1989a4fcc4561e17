//! The records a run's history is made of.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::RunStatus;

/// Milliseconds since the Unix epoch. Every time the store keeps is one of these, read from the
/// runtime's clock (so tests can skip time), never from the database server's clock.
pub type Millis = i64;

/// A run's identity: a random UUID, printed in its hyphenated form.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(uuid::Uuid);

impl RunId {
    /// A fresh random id.
    pub fn new() -> Self {
        RunId(uuid::Uuid::new_v4())
    }

    /// The id as a UUID.
    pub fn as_uuid(&self) -> uuid::Uuid {
        self.0
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl From<uuid::Uuid> for RunId {
    fn from(id: uuid::Uuid) -> Self {
        RunId(id)
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunId({})", self.0.hyphenated())
    }
}

impl FromStr for RunId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        uuid::Uuid::parse_str(s).map(RunId)
    }
}

/// A workflow version's namespace: `name@version`. Each namespace has its own cache and its own
/// delivery queue; a run is pinned to the namespace it was started in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Namespace {
    /// The workflow's name, e.g. `order-processing`.
    pub workflow: String,
    /// The version, e.g. `1.0.0`.
    pub version: String,
}

impl Namespace {
    /// A namespace from a workflow name and version.
    pub fn new(workflow: impl Into<String>, version: impl Into<String>) -> Self {
        Namespace {
            workflow: workflow.into(),
            version: version.into(),
        }
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.workflow, self.version)
    }
}

/// Why something failed, as recorded: a machine-readable kind and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// A short `snake_case` kind, e.g. `task_failed`, `non_determinism`, `interrupted`.
    pub kind: String,
    /// What went wrong, in words.
    pub message: String,
}

impl Failure {
    /// A failure of the given kind.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Failure {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The run that started a child run, and the manifest address of that start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentLink {
    /// The parent run.
    pub run_id: RunId,
    /// The child-start address in the parent's manifest.
    pub address: String,
}

/// A run to create.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The new run's id.
    pub id: RunId,
    /// The workflow version it is pinned to.
    pub namespace: Namespace,
    /// The input, as JSON.
    pub input: Value,
    /// `hex(sha256(canonical({"input": input})))`.
    pub input_hash: String,
    /// The caller's idempotency key, unique per namespace.
    pub reference_id: Option<String>,
    /// The worker pool that may run it (`default` unless routed elsewhere).
    pub pool: String,
    /// `queued` (deliver now) or `scheduled` (deliver at `due_at`).
    pub status: RunStatus,
    /// When a `scheduled` run becomes deliverable.
    pub due_at: Option<Millis>,
    /// The parent run, for a child run.
    pub parent: Option<ParentLink>,
    /// Creation time.
    pub now: Millis,
}

/// What [`Store::create_run`](crate::Store::create_run) did.
#[derive(Clone, Debug, PartialEq)]
pub enum CreateOutcome {
    /// The run was created.
    Created(RunRecord),
    /// A run with the same namespace and reference id already exists; nothing was written. The
    /// caller compares input hashes and applies its conflict policy.
    Existing(RunRecord),
}

impl CreateOutcome {
    /// The run, new or existing.
    pub fn run(&self) -> &RunRecord {
        match self {
            CreateOutcome::Created(run) | CreateOutcome::Existing(run) => run,
        }
    }
}

/// A run as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Its id.
    pub id: RunId,
    /// The workflow version it is pinned to.
    pub namespace: Namespace,
    /// Its input.
    pub input: Value,
    /// The hash of its input (see [`NewRun::input_hash`]).
    pub input_hash: String,
    /// The caller's idempotency key.
    pub reference_id: Option<String>,
    /// The worker pool it is routed to.
    pub pool: String,
    /// Its status.
    pub status: RunStatus,
    /// Incremented by every transition; every executor write names the revision it expects.
    pub revision: u64,
    /// Workflow attempts so far (1 for the first).
    pub attempts: u32,
    /// The executor holding the claim while `running`.
    pub owner: Option<String>,
    /// The last claim refresh while `running`.
    pub heartbeat_at: Option<Millis>,
    /// When a suspended or scheduled run is due (its timer).
    pub due_at: Option<Millis>,
    /// When the run last became `queued` (the clock `max_age` runs against).
    pub queued_at: Option<Millis>,
    /// The output of a completed run.
    pub output: Option<Value>,
    /// The fingerprint of the output schema that produced `output`.
    pub output_fingerprint: Option<String>,
    /// Why the run (or its last attempt) failed.
    pub error: Option<Failure>,
    /// The parent, for a child run.
    pub parent: Option<ParentLink>,
    /// Creation time.
    pub created_at: Millis,
    /// Time of the last transition.
    pub updated_at: Millis,
}

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
    /// Time of this write.
    pub updated_at: Millis,
}

/// The `index`-th durable sleep named `name` in a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// The `index`-th event named `name` received by a run, or the timeout of the `index`-th wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// The run.
    pub run_id: RunId,
    /// The event's name (its queue).
    pub name: String,
    /// Position in the name's queue.
    pub index: u32,
    /// The payload (`None` for a timeout).
    pub data: Option<Value>,
    /// `true` when this slot records that the wait timed out.
    pub timed_out: bool,
    /// The sender's idempotency key, unique per run and name.
    pub reference_id: Option<String>,
    /// When it arrived.
    pub received_at: Millis,
}

/// An event to deliver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// The run.
    pub run_id: RunId,
    /// The event's name.
    pub name: String,
    /// The payload, already validated against the event's schema.
    pub data: Value,
    /// The sender's idempotency key: a second event with the same key is dropped.
    pub reference_id: Option<String>,
    /// Arrival time.
    pub now: Millis,
}

/// What [`Store::append_event`](crate::Store::append_event) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// Stored at this index of the name's queue.
    Appended {
        /// Position in the name's queue.
        index: u32,
        /// `true` when the run was waiting for this event and was woken (`scheduled`).
        woke: bool,
    },
    /// An event with the same reference id was already there; nothing was written.
    Duplicate,
}

/// Everything a run has recorded, loaded in one call.
#[derive(Clone, Debug, PartialEq)]
pub struct History {
    /// The run itself.
    pub run: RunRecord,
    /// Manifest entries, ordered by address then index.
    pub entries: Vec<EntryRecord>,
    /// Sleeps, ordered by name then index.
    pub sleeps: Vec<SleepRecord>,
    /// Events and recorded timeouts, ordered by name then index.
    pub events: Vec<EventRecord>,
    /// The runs this run started as children.
    pub children: Vec<RunRecord>,
}

/// What a suspended run waits on, so that the store can refuse to suspend a run whose wake-up
/// has already happened (an event or a child's end that raced with the suspension).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitSpec {
    /// `(event name, index)`: the run waits for the `index`-th event of that name.
    pub events: Vec<(String, u32)>,
    /// Child runs it waits to end.
    pub children: Vec<RunId>,
}

/// A change of a run's status, applied atomically with the revision check and increment.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// The new status. The store refuses moves that [`RunStatus::can_move_to`] forbids.
    pub to: RunStatus,
    /// The new due time (a wake time, a retry time, a scheduled start); `None` clears it.
    pub due_at: Option<Millis>,
    /// The output, when completing.
    pub output: Option<Value>,
    /// The output schema's fingerprint, when completing.
    pub output_fingerprint: Option<String>,
    /// The error, when failing (or scheduling a workflow retry).
    pub error: Option<Failure>,
    /// A new attempt count, when a workflow retry is scheduled.
    pub attempts: Option<u32>,
    /// For suspensions: if any of these already happened, the run goes to `scheduled` (due
    /// now) instead, so a wake-up that raced the suspension is never lost.
    pub wait: Option<WaitSpec>,
    /// Mark every sleep of the run still pending at `now` as cancelled (`wakeup()`).
    pub cancel_sleeps: bool,
    /// Time of the transition.
    pub now: Millis,
}

impl Transition {
    /// A bare move to `to` at `now`: no due time, output or error.
    pub fn to(to: RunStatus, now: Millis) -> Self {
        Transition {
            to,
            due_at: None,
            output: None,
            output_fingerprint: None,
            error: None,
            attempts: None,
            wait: None,
            cancel_sleeps: false,
            now,
        }
    }

    /// Sets the due time.
    pub fn due_at(mut self, due_at: Millis) -> Self {
        self.due_at = Some(due_at);
        self
    }

    /// Sets the error.
    pub fn error(mut self, error: Failure) -> Self {
        self.error = Some(error);
        self
    }
}

/// A worker asking for runs to execute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The executor's identity, recorded as the owner.
    pub owner: String,
    /// The workflow versions it serves.
    pub namespaces: Vec<Namespace>,
    /// The pool it serves.
    pub pool: String,
    /// At most this many runs.
    pub limit: u32,
    /// Claim time (also the first heartbeat).
    pub now: Millis,
}
