//! Identities and shared values: times, run ids, namespaces, failures.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

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
#[non_exhaustive]
pub struct Failure {
    /// A short `snake_case` kind, e.g. `task_failed`, `non_determinism`, `interrupted`.
    pub kind: String,
    /// What went wrong, in words.
    pub message: String,
    /// For a run's error: the task call whose unhandled failure failed the run, which a retry
    /// runs again (`None` for other errors, and in an entry's own error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallRef>,
}

impl Failure {
    /// A failure of the given kind.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Failure {
            kind: kind.into(),
            message: message.into(),
            call: None,
        }
    }

    /// The task call this failure comes from.
    pub fn call(mut self, call: CallRef) -> Self {
        self.call = Some(call);
        self
    }
}

/// One recorded call of a run: its content address and its index in that address's queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CallRef {
    /// The content address.
    pub address: String,
    /// The call's index among the calls with this address.
    pub index: u32,
}

impl CallRef {
    /// The `index`-th call at `address`.
    pub fn new(address: impl Into<String>, index: u32) -> Self {
        CallRef {
            address: address.into(),
            index,
        }
    }
}

impl fmt::Display for CallRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.address, self.index)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}
