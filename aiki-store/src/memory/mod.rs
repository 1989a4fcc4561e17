//! An in-process store: fast, not durable. Honours the whole [`Store`](crate::Store) contract, so it is what
//! the runtime's own tests and quick experiments use; production wants SQLite or PostgreSQL.

use std::sync::Mutex;

use async_trait::async_trait;

mod client;
mod continuation;
mod endpoints;
mod keys;
mod purge;
mod read;
mod schedules;
mod state;
mod sweeper;

use serde::Serialize;
use serde::de::DeserializeOwned;
use state::State;

use crate::limit::PayloadLimit;
use crate::operation;

use crate::ExecutorStore;
use crate::{
    CatalogEntry, ClaimRequest, ClaimState, Claimed, Continuation, Continued, EntryRecord,
    EventRecord, Millis, Namespace, NewRun, RunId, RunRecord, RunStatus, SleepRecord, StoreError,
    TaskDeclaration, Transition, WorkerRecord,
};

/// The in-memory backend. Every call takes one lock, so every call is atomic.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
    /// The largest payload it keeps.
    limit: PayloadLimit,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps payloads of up to `bytes` of JSON text, instead of
    /// [`DEFAULT_PAYLOAD_LIMIT`](crate::limit::DEFAULT_PAYLOAD_LIMIT) (see [`crate::limit`]).
    pub fn with_payload_limit(mut self, bytes: usize) -> Self {
        self.limit = PayloadLimit::new(bytes);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Does `write` under the lock, once per operation in scope (see [`crate::operation`]): a
    /// repeat of a write of `kind` gets its first answer, and a failed write records nothing.
    fn once<T: Serialize + DeserializeOwned>(
        &self,
        kind: &str,
        write: impl FnOnce(&mut State) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.once_if(kind, |_| true, write)
    }

    /// [`once`](Self::once), recording only the answers `changed` says changed something.
    fn once_if<T: Serialize + DeserializeOwned>(
        &self,
        kind: &str,
        changed: impl FnOnce(&T) -> bool,
        write: impl FnOnce(&mut State) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut state = self.lock();
        let Some(id) = operation::current() else {
            return write(&mut state);
        };
        let key = operation::key(&id, kind);
        if let Some(recorded) = state.answers.get(&key) {
            operation::same_request(&id, recorded.asked.as_deref())?;
            return serde_json::from_value(recorded.answer.clone()).map_err(|error| {
                StoreError::Corrupt {
                    message: format!("the recorded answer of operation {id} ({kind}): {error}"),
                }
            });
        }
        let answer = write(&mut state)?;
        if !changed(&answer) {
            return Ok(answer);
        }
        let recorded = serde_json::to_value(&answer).expect("BUG: an answer serializes");
        let kept = state::Answer {
            answer: recorded,
            at: operation::wall_clock_ms(),
            asked: operation::asked(),
        };
        state.answers.insert(key, kept);
        Ok(answer)
    }
}

#[async_trait]
impl ExecutorStore for MemoryStore {
    async fn claim_run(&self, request: ClaimRequest, id: RunId) -> Result<Claimed, StoreError> {
        let changed = |claimed: &Claimed| !claimed.runs.is_empty();
        self.once_if("claim_run", changed, |state| {
            let run = state
                .runs
                .get(&id)
                .ok_or_else(|| StoreError::run_not_found(id))?;
            let idle = state.config.claim_idle_timeout_ms;
            if run.status != RunStatus::Queued || !request.namespaces.contains(&run.namespace) {
                return Ok(Claimed::new(Vec::new(), idle));
            }
            let run = state.claim(id, &request.owner, request.now);
            Ok(Claimed::new(vec![run], idle))
        })
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Claimed, StoreError> {
        // An empty claim changed nothing: a long poll claims anew.
        let changed = |claimed: &Claimed| !claimed.runs.is_empty();
        self.once_if("claim", changed, |state| Ok(claim(state, &request)))
    }

    async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<ClaimState, StoreError> {
        let mut state = self.lock();
        state.check_revision(id, expected)?;
        let run = state
            .runs
            .get_mut(&id)
            .expect("BUG: run vanished under the lock");
        if run.owner.as_deref() != Some(owner) {
            return Err(StoreError::RevisionConflict {
                run_id: id,
                expected,
                actual: run.revision,
            });
        }
        run.heartbeat_at = Some(now);
        run.claim_stale_since = None;
        Ok(ClaimState {
            pause_requested: run.pause_requested_at.is_some(),
        })
    }

    async fn put_entry(&self, expected: u64, mut entry: EntryRecord) -> Result<(), StoreError> {
        self.limit.check_entry(&entry)?;
        let mut state = self.lock();
        state.check_revision(entry.run_id, expected)?;
        let run = &state.runs[&entry.run_id];
        if entry.status == crate::EntryStatus::Running && run.pause_requested_at.is_some() {
            return Err(StoreError::PauseRequested {
                run_id: entry.run_id,
            });
        }
        let key = (entry.run_id, entry.address.clone(), entry.index);
        if entry.input.is_none() {
            entry.input = state.entries.get(&key).and_then(|kept| kept.input.clone());
        }
        state.entries.insert(key, entry);
        Ok(())
    }

    fn payload_limit(&self) -> Option<crate::limit::PayloadLimit> {
        Some(self.limit)
    }

    async fn start_child(
        &self,
        expected: u64,
        mut entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        self.limit.check_new_run(&child)?;
        self.once("start_child", |state| {
            state.check_revision(entry.run_id, expected)?;
            if state.runs[&entry.run_id].pause_requested_at.is_some() {
                return Err(StoreError::PauseRequested {
                    run_id: entry.run_id,
                });
            }
            if state.runs.contains_key(&child.id) {
                return Err(StoreError::AlreadyExists {
                    what: format!("run {}", child.id),
                });
            }
            let child = state.insert_run(child).run().clone();
            entry.output = Some(serde_json::Value::String(child.id.to_string()));
            state
                .entries
                .insert((entry.run_id, entry.address.clone(), entry.index), entry);
            Ok(child)
        })
    }

    async fn put_sleep(
        &self,
        expected: u64,
        sleep: SleepRecord,
        _from: Option<Millis>,
    ) -> Result<SleepRecord, StoreError> {
        // Timed by its callers: `from` is the store's time, and the wake time stays as given.
        let mut state = self.lock();
        state.check_revision(sleep.run_id, expected)?;
        state.sleeps.insert(
            (sleep.run_id, sleep.name.clone(), sleep.index),
            sleep.clone(),
        );
        Ok(sleep)
    }

    async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError> {
        let mut state = self.lock();
        state.check_revision(slot.run_id, expected)?;
        let held = state
            .events
            .entry((slot.run_id, slot.name.clone(), slot.index))
            .or_insert(slot);
        Ok(held.clone())
    }

    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        self.limit.check_transition(id, &transition)?;
        self.once("transition", |state| {
            state.transition(id, expected, transition)
        })
    }

    async fn continue_run(
        &self,
        id: RunId,
        expected: u64,
        continuation: Continuation,
    ) -> Result<Continued, StoreError> {
        self.limit.check_new_run(&continuation.successor)?;
        self.once("continue_run", |state| {
            state.continue_run(id, expected, continuation)
        })
    }

    async fn record_worker(
        &self,
        mut worker: WorkerRecord,
        now: Millis,
    ) -> Result<WorkerRecord, StoreError> {
        worker.last_seen_at = now;
        self.lock()
            .workers
            .insert(worker.id.clone(), worker.clone());
        Ok(worker)
    }

    async fn publish_catalog(
        &self,
        mut entry: CatalogEntry,
        now: Millis,
    ) -> Result<CatalogEntry, StoreError> {
        entry.published_at = now;
        let mut state = self.lock();
        let stored = state
            .catalog
            .entry((entry.namespace.clone(), entry.fingerprint.clone()))
            .or_insert(entry);
        Ok(state::with_called_tasks(
            stored.clone(),
            &state.catalog_tasks,
        ))
    }

    async fn add_catalog_tasks(
        &self,
        namespace: &Namespace,
        fingerprint: &str,
        tasks: Vec<TaskDeclaration>,
    ) -> Result<(), StoreError> {
        let mut state = self.lock();
        let known = state
            .catalog_tasks
            .entry((namespace.clone(), fingerprint.to_owned()))
            .or_default();
        for task in tasks {
            known.entry(task.name.clone()).or_insert(task);
        }
        Ok(())
    }

    async fn declare_schedules(
        &self,
        declared: Vec<crate::ScheduleRecord>,
        serves: Vec<Namespace>,
        worker: &str,
        now: Millis,
    ) -> Result<Vec<crate::schedule::Declared>, StoreError> {
        for schedule in &declared {
            self.limit
                .check_schedule(&schedule.name, &schedule.definition)?;
        }
        self.declare_schedules_now(declared, &serves, worker, now)
    }
}

/// Claims the oldest queued runs `request` may take.
fn claim(state: &mut State, request: &ClaimRequest) -> Claimed {
    let mut candidates: Vec<(Millis, RunId)> = state
        .runs
        .values()
        .filter(|run| {
            run.status == RunStatus::Queued
                && run.pool == request.pool
                && request.namespaces.contains(&run.namespace)
                && !request.skip.contains(&run.id)
        })
        .map(|run| (run.queued_at.unwrap_or(run.created_at), run.id))
        .collect();
    candidates.sort();
    candidates.truncate(request.limit as usize);
    let claimed = candidates
        .into_iter()
        .map(|(_, id)| state.claim(id, &request.owner, request.now))
        .collect();
    Claimed::new(claimed, state.config.claim_idle_timeout_ms)
}
