//! The worker view: a worker's record and how it stands.

use aiki_store::{Millis, WorkerRecord};
use serde::Serialize;

use super::words::{relative, span};
use crate::liveness::Liveness;

/// A worker as an operator sees it: its record (flattened in JSON) and whether it is live,
/// stopped or gone. Its JSON shape is `aiki workers --format json`'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct WorkerView {
    /// What its heartbeats said.
    #[serde(flatten)]
    pub worker: WorkerRecord,
    /// How it stands.
    pub liveness: Liveness,
}

impl WorkerView {
    /// How `worker` stands at `now` (by the clock its heartbeats are timed by).
    pub fn new(worker: WorkerRecord, now: Millis) -> WorkerView {
        let liveness = Liveness::of(&worker, now);
        WorkerView { worker, liveness }
    }

    /// Its state in words at `now`: `live`, `stopped 3 min ago`, `gone since 5 min`.
    pub fn state(&self, now: Millis) -> String {
        match self.liveness {
            Liveness::Live => "live".to_owned(),
            Liveness::Stopped { at } => format!("stopped {}", relative(at, now)),
            Liveness::Gone { since } => format!("gone since {}", span(now - since)),
        }
    }
}
