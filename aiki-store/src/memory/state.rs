//! The memory store's data, and the rules its operations share (revision checks, status
//! changes with their timeline, wake-ups of waiting parents).

use std::collections::{BTreeMap, HashMap};

use crate::{
    CatalogEntry, CreateOutcome, EntryRecord, EventRecord, Millis, Namespace, NewRun, RunId,
    RunRecord, RunStatus, SleepRecord, StatusChange, StoreError, Transition, WorkerRecord,
};

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) runs: HashMap<RunId, RunRecord>,
    /// `(namespace, reference id)` → run.
    pub(super) references: HashMap<(String, String), RunId>,
    pub(super) entries: BTreeMap<(RunId, String, u32), EntryRecord>,
    pub(super) sleeps: BTreeMap<(RunId, String, u32), SleepRecord>,
    pub(super) events: BTreeMap<(RunId, String, u32), EventRecord>,
    /// `(run, revision)` → the change that produced that revision.
    pub(super) timeline: BTreeMap<(RunId, u64), StatusChange>,
    pub(super) workers: BTreeMap<String, WorkerRecord>,
    pub(super) catalog: BTreeMap<Namespace, CatalogEntry>,
}

impl State {
    pub(super) fn run(&self, id: RunId) -> Result<&RunRecord, StoreError> {
        self.runs
            .get(&id)
            .ok_or_else(|| StoreError::run_not_found(id))
    }

    pub(super) fn check_revision(&self, id: RunId, expected: u64) -> Result<(), StoreError> {
        let run = self.run(id)?;
        if run.revision != expected {
            return Err(StoreError::RevisionConflict {
                run_id: id,
                expected,
                actual: run.revision,
            });
        }
        Ok(())
    }

    pub(super) fn insert_run(&mut self, new: NewRun) -> CreateOutcome {
        if let Some(reference) = &new.reference_id {
            let key = (new.namespace.to_string(), reference.clone());
            if let Some(existing) = self.references.get(&key) {
                return CreateOutcome::Existing(self.runs[existing].clone());
            }
            self.references.insert(key, new.id);
        }
        let run = new.into_record();
        self.timeline.insert(
            (run.id, run.revision),
            StatusChange {
                run_id: run.id,
                revision: run.revision,
                from: None,
                to: run.status,
                reason: StatusChange::reason_for(None, run.status, false, None),
                actor: None,
                at: run.created_at,
            },
        );
        self.runs.insert(run.id, run.clone());
        CreateOutcome::Created(run)
    }

    /// Sets a run's status, incrementing its revision and keeping the bookkeeping columns
    /// consistent. The caller has checked the transition.
    pub(super) fn set_status(
        &mut self,
        id: RunId,
        to: RunStatus,
        due_at: Option<Millis>,
        now: Millis,
    ) {
        let run = self
            .runs
            .get_mut(&id)
            .expect("BUG: set_status on a missing run");
        let from = run.status;
        let actor = (from == RunStatus::Running)
            .then(|| run.owner.clone())
            .flatten();
        run.status = to;
        run.revision += 1;
        run.due_at = due_at;
        run.updated_at = now;
        if to != RunStatus::Running {
            run.owner = None;
            run.heartbeat_at = None;
        }
        if to == RunStatus::Queued {
            run.queued_at = Some(now);
        }
        if !to.is_suspended() {
            run.wait = None;
        }
        let kind = run.error.as_ref().map(|error| error.kind.clone());
        let revision = run.revision;
        self.timeline.insert(
            (id, revision),
            StatusChange {
                run_id: id,
                revision,
                from: Some(from),
                to,
                reason: StatusChange::reason_for(Some(from), to, false, kind.as_deref()),
                actor,
                at: now,
            },
        );
    }

    /// The change that produced the run's current revision.
    pub(super) fn last_change(&mut self, id: RunId) -> Option<&mut StatusChange> {
        let revision = self.runs.get(&id)?.revision;
        self.timeline.get_mut(&(id, revision))
    }

    /// Wakes the runs waiting on `child`, which just ended: every run whose wait set names it
    /// (one waiting for all of its children only when this was the last, or did not
    /// complete), and its parent if that waits without a wait set (suspended by an older
    /// release).
    pub(super) fn wake_waiters(&mut self, child: &RunRecord, now: Millis) {
        let waiters: Vec<RunId> = self
            .runs
            .values()
            .filter(|run| run.status == RunStatus::AwaitingChildWorkflow)
            .filter(|run| match &run.wait {
                None => child.parent.as_ref().is_some_and(|p| p.run_id == run.id),
                Some(wait) => {
                    wait.children.iter().any(|awaited| awaited.id == child.id)
                        && (!wait.all_children
                            || child.status.is_unsuccessful()
                            || wait.children.iter().all(|awaited| {
                                awaited.id == child.id
                                    || self
                                        .runs
                                        .get(&awaited.id)
                                        .is_none_or(|run| run.status.is_terminal())
                            }))
                }
            })
            .map(|run| run.id)
            .collect();
        for waiter in waiters {
            self.set_status(waiter, RunStatus::Scheduled, Some(now), now);
        }
    }

    pub(super) fn wait_already_satisfied(&self, id: RunId, transition: &Transition) -> bool {
        let Some(wait) = &transition.wait else {
            return false;
        };
        let event_there = wait.events.iter().any(|event| {
            self.events
                .contains_key(&(id, event.name.clone(), event.index))
        });
        let status = |id: &RunId| self.runs.get(id).map(|run| run.status);
        let children_there = if wait.all_children && !wait.children.is_empty() {
            wait.children
                .iter()
                .any(|child| status(&child.id).is_some_and(RunStatus::is_unsuccessful))
                || wait
                    .children
                    .iter()
                    .all(|child| status(&child.id).is_none_or(RunStatus::is_terminal))
        } else {
            wait.children
                .iter()
                .any(|child| status(&child.id).is_some_and(RunStatus::is_terminal))
        };
        event_there || children_there
    }
}
