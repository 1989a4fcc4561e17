//! The catalog: what each registered workflow version accepts and declares, published by the
//! workers that have its code, read by the tools that do not (the generic `aiki` CLI, later the
//! server and the dashboard).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, Namespace};

/// One workflow version as its code declares it: input, output and event schemas with their
/// fingerprints, the retry policy, and the tasks its worker declares.
///
/// A worker publishes one entry per version it registers when it starts. The store keeps one
/// entry per build of a version (by `fingerprint`): during a rolling deploy two builds serve one
/// version, and an older pod restarting must not hide the newer build's entry; a later publish
/// of the same build replaces its entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CatalogEntry {
    /// The version.
    pub namespace: Namespace,
    /// `hex(sha256)` of the entry's declarations (schemas, events, retry policies, tasks):
    /// equal for two workers that run the same code.
    pub fingerprint: String,
    /// The schema of a run's input.
    pub input: SchemaRecord,
    /// The schema of a completed run's output.
    pub output: SchemaRecord,
    /// The events the version declares, by name.
    pub events: Vec<EventDeclaration>,
    /// The retry policy of whole runs, as JSON (`{"kind": "never", ...}`).
    pub retry: Value,
    /// The tasks the publishing worker declares (`WorkerBuilder::task`), by name.
    pub tasks: Vec<TaskDeclaration>,
    /// The worker that published the entry last.
    pub published_by: String,
    /// When (on PostgreSQL, by the server's clock unless told otherwise).
    pub published_at: Millis,
}

impl CatalogEntry {
    /// Adds the tasks the build's runs were seen calling that the entry does not declare, and
    /// keeps the tasks in name order.
    pub(crate) fn add_called(&mut self, tasks: impl IntoIterator<Item = TaskDeclaration>) {
        for task in tasks {
            if !self.tasks.iter().any(|known| known.name == task.name) {
                self.tasks.push(task);
            }
        }
        self.tasks.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// A JSON schema and its fingerprint, `hex(sha256(canonical JSON))`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SchemaRecord {
    /// The schema.
    pub schema: Value,
    /// Its fingerprint.
    pub fingerprint: String,
}

impl SchemaRecord {
    /// A schema with its fingerprint.
    pub fn new(schema: Value, fingerprint: impl Into<String>) -> Self {
        SchemaRecord {
            schema,
            fingerprint: fingerprint.into(),
        }
    }
}

/// An event a version declares: its name and its payload's schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EventDeclaration {
    /// The event's name.
    pub name: String,
    /// Its payload's schema.
    pub payload: SchemaRecord,
}

impl EventDeclaration {
    /// Event `name` with its payload's schema.
    pub fn new(name: impl Into<String>, payload: SchemaRecord) -> Self {
        EventDeclaration {
            name: name.into(),
            payload,
        }
    }
}

/// A task a worker declares: its durable name, output schema and retry policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TaskDeclaration {
    /// The task's durable name.
    pub name: String,
    /// The schema of its output.
    pub output: SchemaRecord,
    /// Its retry policy, as JSON.
    pub retry: Value,
}

impl TaskDeclaration {
    /// Task `name` with its output schema and retry policy.
    pub fn new(name: impl Into<String>, output: SchemaRecord, retry: Value) -> Self {
        TaskDeclaration {
            name: name.into(),
            output,
            retry,
        }
    }
}

impl CatalogEntry {
    /// An entry for `namespace` with its input and output schemas, no events, retry `null`, no
    /// tasks; `published_at` is set by the store.
    pub fn new(namespace: Namespace, input: SchemaRecord, output: SchemaRecord) -> Self {
        CatalogEntry {
            namespace,
            fingerprint: String::new(),
            input,
            output,
            events: Vec::new(),
            retry: Value::Null,
            tasks: Vec::new(),
            published_by: String::new(),
            published_at: 0,
        }
    }

    /// The fingerprint of the declarations.
    pub fn fingerprint(mut self, fingerprint: impl Into<String>) -> Self {
        self.fingerprint = fingerprint.into();
        self
    }

    /// The declared events.
    pub fn events(mut self, events: Vec<EventDeclaration>) -> Self {
        self.events = events;
        self
    }

    /// The retry policy of whole runs, as JSON.
    pub fn retry(mut self, retry: Value) -> Self {
        self.retry = retry;
        self
    }

    /// The declared tasks.
    pub fn tasks(mut self, tasks: Vec<TaskDeclaration>) -> Self {
        self.tasks = tasks;
        self
    }

    /// The publishing worker.
    pub fn published_by(mut self, worker: impl Into<String>) -> Self {
        self.published_by = worker.into();
        self
    }

    /// The declaration of event `name`, if the version declares it.
    pub fn event(&self, name: &str) -> Option<&EventDeclaration> {
        self.events.iter().find(|event| event.name == name)
    }
}
