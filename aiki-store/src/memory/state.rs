//! The memory store's data, and the rules its operations share (revision checks, status
//! changes with their timeline, wake-ups of waiting parents).

use std::collections::{BTreeMap, HashMap};

use crate::{
    CatalogEntry, ChangeCause, ChangeFacts, CreateOutcome, EntryRecord, EntryStatus, EventRecord,
    Millis, Namespace, NewRun, RunId, RunRecord, RunStatus, SleepRecord, StatusChange, StoreError,
    TaskDeclaration, Transition, WorkerRecord,
};

/// Whether `run`'s claim is confirmed stale at `now` by `timing` (as the SQL stores'
/// `confirmed_stale`): marked at least one window ago and, unless the sweeper has led since
/// the mark, at most two (an older mark proves nothing: no sweep ran between), and not
/// refreshed since.
pub(super) fn confirmed_stale(run: &RunRecord, now: Millis, timing: &crate::ClaimTiming) -> bool {
    let beat = run.heartbeat_at.unwrap_or(run.updated_at);
    run.claim_stale_since.is_some_and(|mark| {
        mark <= now - timing.confirm_ms && timing.mark_holds(mark, now) && beat <= mark
    })
}

/// Releases `run`'s claim at `now` (claim recovery's, an operator's `actor`): back to `queued`,
/// or to `paused` when a pause was requested.
pub(super) fn release(
    state: &mut State,
    id: RunId,
    now: Millis,
    actor: Option<String>,
) -> RunRecord {
    let run = &state.runs[&id];
    let (to, actor) = match run.pause_requested_at {
        Some(_) => (
            RunStatus::Paused,
            actor.or_else(|| run.pause_requested_by.clone()),
        ),
        None => (RunStatus::Queued, actor),
    };
    state.set_status(id, to, None, now, Note::by(actor));
    let run = state.runs.get_mut(&id).expect("BUG: released run vanished");
    run.pause_requested_at = None;
    run.pause_requested_by = None;
    run.claim_stale_since = None;
    run.clone()
}

/// A status change as the memory store keeps it: the change, and the facts its reason is
/// worded from when read (as the SQL stores keep them).
#[derive(Debug, Clone)]
pub(super) struct Change {
    pub(super) change: StatusChange,
    pub(super) facts: ChangeFacts,
}

impl Change {
    /// The change with its reason worded.
    pub(super) fn worded(&self) -> StatusChange {
        let mut change = self.change.clone();
        change.reason = StatusChange::reason_for(change.from, change.to, &self.facts);
        change.cause = self.facts.cause;
        change.error_kind = self.facts.error_kind.clone();
        change
    }
}

/// Who or what makes a status change, beyond what the statuses say.
#[derive(Debug, Clone, Default)]
pub(super) struct Note {
    /// An operator's name.
    pub(super) actor: Option<String>,
    /// What woke the run.
    pub(super) cause: Option<ChangeCause>,
}

impl Note {
    /// A change an operator (or a sender) makes.
    pub(super) fn by(actor: Option<String>) -> Self {
        Note { actor, cause: None }
    }

    /// A wake-up with a cause.
    pub(super) fn cause(mut self, cause: ChangeCause) -> Self {
        self.cause = Some(cause);
        self
    }
}

#[derive(Debug, Default, Clone)]
pub(super) struct State {
    pub(super) runs: HashMap<RunId, RunRecord>,
    /// `(namespace, reference id)` → run.
    pub(super) references: HashMap<(String, String), RunId>,
    pub(super) entries: BTreeMap<(RunId, String, u32), EntryRecord>,
    pub(super) sleeps: BTreeMap<(RunId, String, u32), SleepRecord>,
    pub(super) events: BTreeMap<(RunId, String, u32), EventRecord>,
    /// `(run, revision)` → the change that produced that revision.
    pub(super) timeline: BTreeMap<(RunId, u64), Change>,
    /// The change stream, in order (`seq` is the index plus one).
    pub(super) stream: Vec<crate::Change>,
    pub(super) workers: BTreeMap<String, WorkerRecord>,
    /// `(version, fingerprint)` → the entry of that build.
    pub(super) catalog: BTreeMap<(Namespace, String), CatalogEntry>,
    /// The tasks each build's runs were seen calling, by version and fingerprint, then name.
    pub(super) catalog_tasks: CalledTasks,
    /// The leases, by name.
    pub(super) leases: HashMap<String, crate::Lease>,
    /// The runtime configuration in force.
    pub(super) config: crate::RuntimeConfig,
    /// The API keys, oldest first.
    pub(super) keys: Vec<crate::ApiKeyRecord>,
    /// The push endpoints, by workflow version.
    pub(super) endpoints: std::collections::BTreeMap<(String, String), crate::EndpointRecord>,
    /// The first answers of operations (see [`crate::operation`]) by key.
    pub(super) answers: HashMap<String, Answer>,
    /// The schedules, by name.
    pub(super) schedules: BTreeMap<String, crate::ScheduleRecord>,
    /// The schedules' logs, in order of writing.
    pub(super) schedule_log: Vec<crate::ScheduleLogEntry>,
}

impl State {
    /// Whether `lease` is still held as given at `now`: the fence of every sweep.
    pub(super) fn holds(&self, lease: &crate::Lease, now: Millis) -> bool {
        self.leases.get(&lease.name).is_some_and(|held| {
            held.holder == lease.holder && held.token == lease.token && held.expires_at > now
        })
    }

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
        let actor = new.actor.clone();
        let run = new.into_record();
        self.number(&run, None);
        self.timeline.insert(
            (run.id, run.revision),
            Change {
                change: StatusChange {
                    run_id: run.id,
                    revision: run.revision,
                    from: None,
                    to: run.status,
                    reason: String::new(),
                    cause: None,
                    error_kind: None,
                    actor,
                    at: run.created_at,
                },
                facts: ChangeFacts::default(),
            },
        );
        self.runs.insert(run.id, run.clone());
        CreateOutcome::Created(run)
    }

    /// Sets a run's status, incrementing its revision and keeping the bookkeeping columns
    /// consistent, and appends the change to its timeline. The caller has checked the
    /// transition.
    /// Claims queued run `id` for `owner` at `now`: `running`, owned, its heartbeat now.
    pub(super) fn claim(&mut self, id: RunId, owner: &str, now: Millis) -> RunRecord {
        let note = Note::by(Some(owner.to_owned()));
        self.set_status(id, RunStatus::Running, None, now, note);
        let run = self.runs.get_mut(&id).expect("BUG: claimed run vanished");
        run.owner = Some(owner.to_owned());
        run.heartbeat_at = Some(now);
        run.clone()
    }

    pub(super) fn set_status(
        &mut self,
        id: RunId,
        to: RunStatus,
        due_at: Option<Millis>,
        now: Millis,
        note: Note,
    ) {
        let run = self
            .runs
            .get_mut(&id)
            .expect("BUG: set_status on a missing run");
        let from = run.status;
        let actor = note.actor.or_else(|| {
            (from == RunStatus::Running)
                .then(|| run.owner.clone())
                .flatten()
        });
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
        if to != RunStatus::Running {
            run.pause_requested_at = None;
            run.pause_requested_by = None;
            run.claim_stale_since = None;
        }
        let kind = run.error.as_ref().map(|error| error.kind.as_str());
        let facts = ChangeFacts::default()
            .cause(note.cause)
            .error_kind(kind)
            .by_actor(actor.is_some());
        let revision = run.revision;
        let numbered = run.clone();
        self.number(&numbered, Some(from));
        self.timeline.insert(
            (id, revision),
            Change {
                change: StatusChange {
                    run_id: id,
                    revision,
                    from: Some(from),
                    to,
                    reason: String::new(),
                    cause: None,
                    error_kind: None,
                    actor,
                    at: now,
                },
                facts,
            },
        );
    }

    /// Appends `run`'s latest change (from `from`) to the change stream.
    fn number(&mut self, run: &RunRecord, from: Option<RunStatus>) {
        let seq = self.stream.len() as u64 + 1;
        self.stream.push(crate::Change {
            seq,
            run_id: run.id,
            namespace: run.namespace.clone(),
            pool: run.pool.clone(),
            revision: run.revision,
            from,
            to: run.status,
            at: run.updated_at,
        });
    }

    /// The change that produced the run's current revision.
    pub(super) fn last_change(&mut self, id: RunId) -> Option<&mut Change> {
        let revision = self.runs.get(&id)?.revision;
        self.timeline.get_mut(&(id, revision))
    }

    /// Applies a transition (see [`ExecutorStore::transition`](crate::ExecutorStore::transition)).
    pub(super) fn transition(
        &mut self,
        id: RunId,
        expected: u64,
        mut transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        let state = self;
        state.check_revision(id, expected)?;
        if transition.awaits_retries() {
            let recorded: Vec<(String, u32, Millis)> = state
                .entries
                .range((id, String::new(), 0)..)
                .take_while(|((run, _, _), _)| *run == id)
                .filter(|(_, entry)| entry.status == EntryStatus::AwaitingRetry)
                .filter_map(|(_, entry)| {
                    Some((entry.address.clone(), entry.attempts, entry.retry_at?))
                })
                .collect();
            transition.retry_times_from(&recorded);
        }
        let from = state.runs[&id].status;
        let mut to = transition.to;
        if !from.can_move_to(to) {
            return Err(StoreError::InvalidTransition {
                run_id: id,
                from,
                to,
            });
        }
        let mut due_at = transition.due_at;
        let mut actor = transition.actor.clone();
        let mut cause = None;
        let requested = state.runs[&id].pause_requested_at.is_some();
        if from == RunStatus::Running && requested && to.held_by_pause() {
            // Leaving `running` with a pause requested lands in `paused`.
            to = RunStatus::Paused;
            due_at = None;
            actor = actor.or_else(|| state.runs[&id].pause_requested_by.clone());
        } else if let Some(why) = to
            .is_suspended()
            .then(|| state.wait_already_satisfied(id, &transition))
            .flatten()
        {
            // What it awaits is there: queued at once.
            to = RunStatus::Queued;
            due_at = None;
            cause = Some(why);
        }
        if transition.cancel_sleeps {
            for sleep in state.sleeps.values_mut() {
                if sleep.run_id == id && !sleep.cancelled && sleep.wake_at > transition.now {
                    sleep.cancelled = true;
                }
            }
        }
        for call in &transition.rerun {
            if let Some(entry) = state
                .entries
                .get_mut(&(id, call.address.clone(), call.index))
            {
                entry.status = crate::EntryStatus::AwaitingRetry;
                entry.attempts = 0;
                entry.retry_at = Some(transition.due_at.unwrap_or(transition.now));
                entry.updated_at = transition.now;
            }
        }
        for slot in &transition.forget {
            state.events.remove(&(id, slot.name.clone(), slot.index));
        }
        let attempts_before = state.runs[&id].attempts;
        let note = Note {
            cause,
            ..Note::by(actor)
        };
        state.set_status(id, to, due_at, transition.now, note);
        let run = state
            .runs
            .get_mut(&id)
            .expect("BUG: run vanished under the lock");
        if let Some(output) = transition.output {
            run.output = Some(output);
            run.output_fingerprint = transition.output_fingerprint;
        }
        // A run that ends otherwise than failed keeps no error of an earlier attempt.
        let ended_well = to == RunStatus::Completed
            || (to == RunStatus::Cancelled && transition.error.is_none());
        if ended_well {
            run.error = None;
        } else if transition.error.is_some() {
            run.error = transition.error;
        }
        if let Some(attempts) = transition.attempts {
            run.attempts = attempts;
        }
        if to.is_suspended() {
            run.wait = transition.wait;
        }
        let run = run.clone();
        if let Some(change) = state.last_change(id) {
            let kind = run.error.as_ref().map(|error| error.kind.as_str());
            change.facts = std::mem::take(&mut change.facts)
                .retry(run.attempts > attempts_before)
                .error_kind(kind);
        }
        if to.is_terminal() && !from.is_terminal() {
            state.wake_waiters(&run, transition.now);
        }
        Ok(run)
    }

    /// Wakes the runs waiting on `child`, which just ended: every run whose wait set names it
    /// (one waiting for all of its children only when this was the last, or did not
    /// complete), and its parent if that waits without a wait set (suspended by an older
    /// release).
    pub(super) fn wake_waiters(&mut self, child: &RunRecord, now: Millis) {
        let waiters: Vec<RunId> = self
            .runs
            .values()
            .filter(|run| run.status.is_suspended())
            .filter(|run| match &run.wait {
                None => {
                    run.status == RunStatus::AwaitingChildWorkflow
                        && child.parent.as_ref().is_some_and(|p| p.run_id == run.id)
                }
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
            let note = Note::default().cause(ChangeCause::Child);
            self.set_status(waiter, RunStatus::Queued, None, now, note);
        }
    }

    /// What of a suspension's wait set is already there, if anything: an event it awaits
    /// (first), or the end of children it awaits.
    pub(super) fn wait_already_satisfied(
        &self,
        id: RunId,
        transition: &Transition,
    ) -> Option<ChangeCause> {
        let wait = transition.wait.as_ref()?;
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
        if event_there {
            Some(ChangeCause::Event)
        } else {
            children_there.then_some(ChangeCause::Child)
        }
    }
}

/// The tasks runs were seen calling, by version and fingerprint, then task name.
pub(super) type CalledTasks = BTreeMap<(Namespace, String), BTreeMap<String, TaskDeclaration>>;

/// `entry` with the tasks its build's runs were seen calling.
pub(super) fn with_called_tasks(mut entry: CatalogEntry, called: &CalledTasks) -> CatalogEntry {
    if let Some(tasks) = called.get(&(entry.namespace.clone(), entry.fingerprint.clone())) {
        entry.add_called(tasks.values().cloned());
    }
    entry
}

/// A recorded first answer: the answer, when it was recorded, and the digest of the request
/// it answered (if known).
#[derive(Clone, Debug)]
pub(super) struct Answer {
    pub(super) answer: serde_json::Value,
    pub(super) at: Millis,
    pub(super) asked: Option<String>,
}
