//! Child outcomes as the parent observed them. The first time a parent sees a child ended, it
//! records the outcome in the child wait's own queue (where a wait's timeout is recorded too);
//! every later replay returns that record, never the child's live row, which a retry of the
//! child could change under the parent's feet.

use aiki_store::{EventRecord, Failure, Queue, RunId, RunRecord, RunStatus};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Run;
use crate::error::WorkflowError;

/// The stored name of a child wait's queue (its timer, its timeout, or the outcome it
/// observed), by the child start's address.
pub(crate) fn queue(address: &str) -> String {
    Queue::ChildWait(address.to_owned()).stored_name()
}

/// Whether `record` (of a child wait's queue) holds the outcome of `child` its parent observed.
pub(crate) fn holds_outcome_of(record: &EventRecord, child: RunId) -> bool {
    Outcome::recorded(record, child).is_some()
}

/// The child outcomes a run has recorded: where each is (its slot) and the child's id and
/// status, in the order of the records.
pub(crate) fn observed(events: &[EventRecord]) -> Vec<(aiki_store::SlotRef, RunId, RunStatus)> {
    events
        .iter()
        .filter(|record| matches!(record.queue(), Queue::ChildWait(_)) && !record.timed_out)
        .filter_map(|record| {
            let outcome: Outcome = serde_json::from_value(record.data.clone()?).ok()?;
            let slot = aiki_store::SlotRef::new(record.name.clone(), record.index);
            Some((slot, outcome.run_id, outcome.status))
        })
        .collect()
}

/// An ended child as its parent observed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    pub(crate) run_id: RunId,
    pub(crate) status: RunStatus,
    pub(crate) output: Option<Value>,
    pub(crate) fingerprint: Option<String>,
    pub(crate) error: Option<Failure>,
}

impl Outcome {
    fn of(child: &RunRecord) -> Self {
        Outcome {
            run_id: child.id,
            status: child.status,
            output: child.output.clone(),
            fingerprint: child.output_fingerprint.clone(),
            error: child.error.clone(),
        }
    }

    /// A child assumed completed with `output` (the impact check looking past a child wait).
    pub(super) fn assumed(run_id: RunId, output: Value) -> Self {
        Outcome {
            run_id,
            status: RunStatus::Completed,
            output: Some(output),
            fingerprint: None,
            error: None,
        }
    }

    /// The outcome a record of a child wait's queue holds, if it holds one of `child`.
    pub(crate) fn recorded(record: &EventRecord, child: RunId) -> Option<Self> {
        let data = record.data.clone().filter(|_| !record.timed_out)?;
        serde_json::from_value::<Outcome>(data)
            .ok()
            .filter(|outcome| outcome.run_id == child)
    }
}

impl Run {
    /// The outcome of child `id` for the wait at slot `index` of the queue of `address`: the
    /// recorded one; else, once the child has ended, its outcome, recorded now (when the slot
    /// is free). `None` while the child has not ended.
    pub(super) async fn observe_child(
        &self,
        id: RunId,
        address: &str,
        index: u32,
        recorded: Option<EventRecord>,
    ) -> Result<Option<Outcome>, WorkflowError> {
        if let Some(outcome) = recorded.as_ref().and_then(|r| Outcome::recorded(r, id)) {
            return Ok(Some(outcome));
        }
        // A child that continued as new ends when the last run of its chain does; the outcome
        // is recorded as the child's own.
        let child = self.child_chain_end(id).await?;
        if !child.status.is_terminal() {
            return Ok(None);
        }
        let outcome = Outcome {
            run_id: id,
            ..Outcome::of(&child)
        };
        if recorded.is_none() && !self.probing() {
            let data = serde_json::to_value(&outcome).expect("BUG: an outcome serializes");
            let slot =
                EventRecord::received(self.inner.id, queue(address), index, data, None, self.now());
            let revision = self.inner.revision;
            self.write(move |store| {
                let slot = slot.clone();
                async move { store.record_event_slot(revision, slot).await }
            })
            .await?;
        }
        Ok(Some(outcome))
    }
}
