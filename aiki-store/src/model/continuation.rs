//! Continue-as-new: a run ends and hands its reference id, its waiters and the events it has
//! not consumed to a successor, in one operation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Millis, NewRun, RunRecord};

/// A running run's continuation (see
/// [`ExecutorStore::continue_run`](crate::ExecutorStore::continue_run)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Continuation {
    /// The successor: its id, workflow version, input and input hash. The store takes its
    /// reference id, pool, parent link and `traceparent` from the predecessor, and queues it
    /// at once; what the caller set for those is ignored.
    pub successor: NewRun,
    /// How many events of each name the predecessor consumed. Every event it received and
    /// did not consume (of a name absent here: all of them) is carried over to the successor,
    /// in order, numbered from 0.
    #[serde(default)]
    pub consumed: BTreeMap<String, u32>,
    /// The time of the continuation.
    pub now: Millis,
}

impl Continuation {
    /// Continues as `successor`, having consumed `consumed` events of each name.
    pub fn new(successor: NewRun, consumed: BTreeMap<String, u32>, now: Millis) -> Self {
        Continuation {
            successor,
            consumed,
            now,
        }
    }

    /// The successor as the store creates it after `predecessor`: queued now, with what it
    /// takes over.
    pub(crate) fn successor_of(&self, predecessor: &RunRecord) -> NewRun {
        let mut new = self.successor.clone();
        new.reference_id = predecessor.reference_id.clone();
        new.pool = predecessor.pool.clone();
        new.parent = predecessor.parent.clone();
        new.traceparent = predecessor.traceparent.clone();
        new.status = crate::RunStatus::Queued;
        new.due_at = None;
        new.lineage = None;
        new.actor = None;
        new.continued_from = Some(predecessor.id);
        new.now = self.now;
        new
    }
}

/// What a continuation wrote: the predecessor, now `completed` with
/// [`continued_as`](RunRecord::continued_as) set, and its successor, `queued`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Continued {
    /// The run that continued.
    pub predecessor: RunRecord,
    /// The run it continued as.
    pub successor: RunRecord,
}

impl Continued {
    /// The two runs of a continuation.
    pub fn new(predecessor: RunRecord, successor: RunRecord) -> Self {
        Continued {
            predecessor,
            successor,
        }
    }
}

/// The refusal of a successor whose workflow version has a run of the reference id already.
pub(crate) fn held_reference(holder: &RunRecord) -> crate::StoreError {
    crate::StoreError::AlreadyExists {
        what: format!(
            "run {} of {} with reference id {:?} (the successor cannot take the reference id \
             over; continue as the same workflow version, or end that run first)",
            holder.id,
            holder.namespace,
            holder.reference_id.as_deref().unwrap_or_default()
        ),
    }
}
