//! The memory store's continue-as-new (see [`crate::ExecutorStore::continue_run`]).

use super::state::{Note, State};
use crate::model::held_reference;
use crate::{
    Continuation, Continued, CreateOutcome, EventRecord, Queue, RunId, RunStatus, StoreError,
};

impl State {
    pub(super) fn continue_run(
        &mut self,
        id: RunId,
        expected: u64,
        continuation: Continuation,
    ) -> Result<Continued, StoreError> {
        self.check_revision(id, expected)?;
        let predecessor = self.runs[&id].clone();
        if predecessor.status != RunStatus::Running {
            return Err(StoreError::InvalidTransition {
                run_id: id,
                from: predecessor.status,
                to: RunStatus::Completed,
            });
        }
        let now = continuation.now;
        let new = continuation.successor_of(&predecessor);
        if self.runs.contains_key(&new.id) {
            return Err(StoreError::AlreadyExists {
                what: format!("run {}", new.id),
            });
        }
        // The predecessor gives its reference id up first: the successor may be of the same
        // workflow version.
        let reference = predecessor
            .reference_id
            .clone()
            .map(|reference| (predecessor.namespace.to_string(), reference));
        if let Some(key) = &reference {
            self.references.remove(key);
        }
        let successor = match self.insert_run(new) {
            CreateOutcome::Created(run) => run,
            CreateOutcome::Existing(holder) => {
                if let Some(key) = reference {
                    self.references.insert(key, id);
                }
                return Err(held_reference(&holder));
            }
        };
        self.carry_events(id, successor.id, &continuation.consumed);
        for run in self.runs.values_mut() {
            let Some(wait) = run.wait.as_mut().filter(|_| run.status.is_suspended()) else {
                continue;
            };
            for child in &mut wait.children {
                if child.id == id {
                    child.id = successor.id;
                }
            }
        }
        for schedule in self.schedules.values_mut() {
            if schedule.last_run == Some(id) {
                schedule.last_run = Some(successor.id);
            }
        }
        self.set_status(id, RunStatus::Completed, None, now, Note::default());
        let run = self
            .runs
            .get_mut(&id)
            .expect("BUG: run vanished under the lock");
        run.output = None;
        run.output_fingerprint = None;
        run.error = None;
        run.reference_id = None;
        run.continued_as = Some(successor.id);
        Ok(Continued::new(run.clone(), successor))
    }

    /// The last run of the chain `id` starts (`id` itself unless it continued as new).
    pub(super) fn chain_end(&self, mut id: RunId) -> Result<RunId, StoreError> {
        while let Some(next) = self.run(id)?.continued() {
            id = next;
        }
        Ok(id)
    }

    /// Copies the events `from` received and did not consume to `to`, numbered from 0 in each
    /// name's queue.
    fn carry_events(
        &mut self,
        from: RunId,
        to: RunId,
        consumed: &std::collections::BTreeMap<String, u32>,
    ) {
        let carried: Vec<EventRecord> = self
            .events
            .range((from, String::new(), 0)..)
            .take_while(|((run, _, _), _)| *run == from)
            .map(|(_, record)| record)
            .filter(|record| matches!(record.queue(), Queue::Named(_)) && !record.timed_out)
            .filter(|record| record.index >= consumed.get(&record.name).copied().unwrap_or(0))
            .cloned()
            .collect();
        let mut next: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        for mut record in carried {
            let index = next.entry(record.name.clone()).or_insert(0);
            record.run_id = to;
            record.index = *index;
            *index += 1;
            self.events
                .insert((to, record.name.clone(), record.index), record);
        }
    }
}
