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
