//! The outbox: every status change in one store-wide stream, read from a cursor.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace, RunId};
use crate::RunStatus;

/// Where a reader of the change stream stands: opaque text the store hands out with each page
/// (and accepts back). The empty cursor, [`ChangeCursor::start`], is the beginning of the
/// stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChangeCursor(String);

impl ChangeCursor {
    /// The beginning of the stream: every change the store has numbered.
    pub fn start() -> Self {
        ChangeCursor(String::new())
    }

    /// A cursor as text (one a store handed out).
    pub fn new(text: impl Into<String>) -> Self {
        ChangeCursor(text.into())
    }

    /// The cursor's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChangeCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One status change in the store-wide stream: run X moved to Y.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Change {
    /// Its number in the stream (increasing in the order changes were made; a page lists them
    /// in this order).
    pub seq: u64,
    /// The run.
    pub run_id: RunId,
    /// The run's workflow version.
    pub namespace: Namespace,
    /// The run's pool.
    pub pool: String,
    /// The run's revision after the change.
    pub revision: u64,
    /// The status before (`None` for the run's creation).
    pub from: Option<RunStatus>,
    /// The status after.
    pub to: RunStatus,
    /// When.
    pub at: Millis,
}

/// One page of the change stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChangePage {
    /// The changes, in stream order.
    pub changes: Vec<Change>,
    /// Where the next page starts: pass it back to read on. Every committed change comes
    /// exactly once to a reader that follows the cursors.
    pub next: ChangeCursor,
}
