//! Events: per-name queues of received events and recorded timeouts.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, RunId};
use crate::StoreError;

/// The `index`-th event named `name` received by a run, or the timeout of the `index`-th wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// Who sent it, when the sender gave a name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_by: Option<String>,
    /// When it arrived.
    pub received_at: Millis,
}

impl EventRecord {
    /// The `index`-th event named `name`, received at `received_at`.
    pub fn received(
        run_id: RunId,
        name: impl Into<String>,
        index: u32,
        data: Value,
        reference_id: Option<String>,
        received_at: Millis,
    ) -> Self {
        EventRecord {
            run_id,
            name: name.into(),
            index,
            data: Some(data),
            timed_out: false,
            reference_id,
            sent_by: None,
            received_at,
        }
    }

    /// The record that the `index`-th wait for `name` timed out at `at`.
    pub fn timeout(run_id: RunId, name: impl Into<String>, index: u32, at: Millis) -> Self {
        EventRecord {
            run_id,
            name: name.into(),
            index,
            data: None,
            timed_out: true,
            reference_id: None,
            sent_by: None,
            received_at: at,
        }
    }
}

/// An event to deliver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NewEvent {
    /// The run.
    pub run_id: RunId,
    /// The event's name.
    pub name: String,
    /// The payload, already validated against the event's schema.
    pub data: Value,
    /// The sender's idempotency key: a second event with the same key is dropped.
    pub reference_id: Option<String>,
    /// Who sends it (an operator's name, recorded with the event and on the timeline when it
    /// wakes the run).
    #[serde(default)]
    pub actor: Option<String>,
    /// Arrival time.
    pub now: Millis,
}

impl NewEvent {
    /// An event without a reference id.
    pub fn new(run_id: RunId, name: impl Into<String>, data: Value, now: Millis) -> Self {
        NewEvent {
            run_id,
            name: name.into(),
            data,
            reference_id: None,
            actor: None,
            now,
        }
    }

    /// Records who sends it.
    pub fn by(mut self, actor: Option<String>) -> Self {
        self.actor = actor;
        self
    }

    /// Sets the sender's idempotency key.
    pub fn reference_id(mut self, reference_id: Option<String>) -> Self {
        self.reference_id = reference_id;
        self
    }

    /// Refuses a name in the runtime's own namespace: the records a run writes of its waits
    /// (a wait's timeout, a child's observed outcome) are named with
    /// [`RESERVED_EVENT_PREFIX`], and a sent event must never fill their slots.
    pub(crate) fn check_name(&self) -> Result<(), StoreError> {
        if super::Queue::parse(&self.name).is_runtime() {
            return Err(StoreError::Invalid {
                message: format!(
                    "event name {:?} starts with U+0001, which the runtime reserves for the \
                     records of a run's own waits; send the event under its declared name",
                    self.name
                ),
            });
        }
        Ok(())
    }
}

/// The first character of the names of the records a run writes of its own waits, which no
/// sent event may use ([`ClientStore::append_event`](crate::ClientStore::append_event)
/// refuses them).
pub const RESERVED_EVENT_PREFIX: char = '\u{1}';

/// What [`ClientStore::append_event`](crate::ClientStore::append_event) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AppendOutcome {
    /// Stored at this index of the name's queue.
    Appended {
        /// Position in the name's queue.
        index: u32,
        /// `true` when the run was waiting for an event and was woken (`queued`).
        woke: bool,
    },
    /// An event with the same reference id was already there; nothing was written.
    Duplicate,
}

/// One slot of a run's event queues: the queue's name and the index in it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotRef {
    /// The queue's name.
    pub name: String,
    /// The index in the queue.
    pub index: u32,
}

impl SlotRef {
    /// The `index`-th slot of queue `name`.
    pub fn new(name: impl Into<String>, index: u32) -> Self {
        SlotRef {
            name: name.into(),
            index,
        }
    }
}
