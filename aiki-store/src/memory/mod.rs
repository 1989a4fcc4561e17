//! An in-process store: fast, not durable. Honours the whole [`Store`] contract, so it is what
//! the runtime's own tests and quick experiments use; production wants SQLite or PostgreSQL.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

mod state;

use state::{Note, State};

use crate::{
    AppendOutcome, CatalogEntry, ClaimRequest, ClaimState, ClaimTiming, CreateOutcome, EntryKind,
    EntryRecord, EventRecord, History, ListRuns, MAX_PAGE, Millis, Namespace, NewEvent, NewFork,
    NewRun, RunCounts, RunId, RunPage, RunRecord, RunStatus, SleepRecord, StatusChange, Store,
    StoreError, TaskDeclaration, Transition, WorkerRecord,
};

/// The in-memory backend. Every call takes one lock, so every call is atomic.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        let mut state = self.lock();
        if state.runs.contains_key(&run.id) {
            return Err(StoreError::AlreadyExists {
                what: format!("run {}", run.id),
            });
        }
        Ok(state.insert_run(run))
    }

    async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError> {
        let mut state = self.lock();
        let outcome = state.insert_run(fork.run);
        let CreateOutcome::Created(run) = &outcome else {
            return Ok(outcome);
        };
        let id = run.id;
        for mut entry in fork.entries {
            entry.run_id = id;
            state
                .entries
                .insert((id, entry.address.clone(), entry.index), entry);
        }
        for mut sleep in fork.sleeps {
            sleep.run_id = id;
            state
                .sleeps
                .insert((id, sleep.name.clone(), sleep.index), sleep);
        }
        for mut event in fork.events {
            event.run_id = id;
            state
                .events
                .insert((id, event.name.clone(), event.index), event);
        }
        Ok(outcome)
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.lock().run(id).cloned()
    }

    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        let state = self.lock();
        let run = state.run(id)?.clone();
        let in_run = |key: &(RunId, String, u32)| key.0 == id;
        Ok(History {
            entries: state
                .entries
                .iter()
                .filter(|(key, _)| in_run(key))
                .map(|(_, entry)| entry.clone())
                .collect(),
            sleeps: state
                .sleeps
                .iter()
                .filter(|(key, _)| in_run(key))
                .map(|(_, sleep)| sleep.clone())
                .collect(),
            events: state
                .events
                .iter()
                .filter(|(key, _)| in_run(key))
                .map(|(_, event)| event.clone())
                .collect(),
            children: state
                .entries
                .values()
                .filter(|entry| entry.run_id == id && entry.kind == EntryKind::Child)
                .filter_map(|entry| entry.output.as_ref()?.as_str()?.parse::<RunId>().ok())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter_map(|child| state.runs.get(&child))
                .map(|child| RunRecord {
                    input: serde_json::Value::Null,
                    ..child.clone()
                })
                .collect(),
            run,
        })
    }

    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        self.lock().transition(id, expected, transition)
    }

    async fn transition_all(&self, moves: Vec<crate::Move>) -> Result<Vec<RunRecord>, StoreError> {
        let mut state = self.lock();
        // All or nothing: applied to a copy, which replaces the state only if every one applies.
        let mut copy = state.clone();
        let runs = moves
            .into_iter()
            .map(|change| copy.transition(change.id, change.expected, change.transition))
            .collect::<Result<Vec<_>, _>>()?;
        *state = copy;
        Ok(runs)
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Vec<RunRecord>, StoreError> {
        let mut state = self.lock();
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
        let mut claimed = Vec::with_capacity(candidates.len());
        for (_, id) in candidates {
            let note = Note::by(Some(request.owner.clone()));
            state.set_status(id, RunStatus::Running, None, request.now, note);
            let run = state.runs.get_mut(&id).expect("BUG: claimed run vanished");
            run.owner = Some(request.owner.clone());
            run.heartbeat_at = Some(request.now);
            claimed.push(run.clone());
        }
        Ok(claimed)
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

    async fn release_claim(
        &self,
        id: RunId,
        expected: u64,
        now: Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<RunRecord>, StoreError> {
        let mut state = self.lock();
        state.check_revision(id, expected)?;
        let run = &state.runs[&id];
        if run.status != RunStatus::Running {
            return Err(StoreError::InvalidTransition {
                run_id: id,
                from: run.status,
                to: RunStatus::Queued,
            });
        }
        let confirmed = confirm_ms.is_none_or(|window| state::confirmed_stale(run, now, window));
        if !confirmed {
            return Ok(None);
        }
        Ok(Some(state::release(&mut state, id, now, actor)))
    }

    async fn request_pause(
        &self,
        id: RunId,
        actor: Option<String>,
        now: Millis,
    ) -> Result<Option<RunRecord>, StoreError> {
        let mut state = self.lock();
        let run = state
            .runs
            .get_mut(&id)
            .ok_or_else(|| StoreError::run_not_found(id))?;
        if run.status != RunStatus::Running {
            return Ok(None);
        }
        if run.pause_requested_at.is_none() {
            run.pause_requested_at = Some(now);
            run.pause_requested_by = actor;
        }
        Ok(Some(run.clone()))
    }

    async fn put_entry(&self, expected: u64, mut entry: EntryRecord) -> Result<(), StoreError> {
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

    async fn start_child(
        &self,
        expected: u64,
        mut entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        let mut state = self.lock();
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
    }

    async fn put_sleep(&self, expected: u64, sleep: SleepRecord) -> Result<(), StoreError> {
        let mut state = self.lock();
        state.check_revision(sleep.run_id, expected)?;
        state
            .sleeps
            .insert((sleep.run_id, sleep.name.clone(), sleep.index), sleep);
        Ok(())
    }

    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        let mut state = self.lock();
        let run = state.run(event.run_id)?;
        if run.status.is_terminal() {
            return Err(StoreError::InvalidTransition {
                run_id: run.id,
                from: run.status,
                to: RunStatus::Scheduled,
            });
        }
        // Any event wakes a run awaiting one, whatever its status label (see `WaitSpec`).
        let woke = crate::WaitSpec::woken_by_event(run.status, run.wait.as_ref());
        let queue = state.events.range(
            (event.run_id, event.name.clone(), 0)..=(event.run_id, event.name.clone(), u32::MAX),
        );
        let mut next = 0;
        for (_, existing) in queue {
            if event.reference_id.is_some() && existing.reference_id == event.reference_id {
                return Ok(AppendOutcome::Duplicate);
            }
            next = existing.index + 1;
        }
        state.events.insert(
            (event.run_id, event.name.clone(), next),
            EventRecord {
                sent_by: event.actor.clone(),
                ..EventRecord::received(
                    event.run_id,
                    event.name,
                    next,
                    event.data,
                    event.reference_id,
                    event.now,
                )
            },
        );
        if woke {
            let note = Note::by(event.actor).cause(crate::ChangeCause::Event);
            state.set_status(
                event.run_id,
                RunStatus::Scheduled,
                Some(event.now),
                event.now,
                note,
            );
        }
        Ok(AppendOutcome::Appended { index: next, woke })
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

    async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError> {
        let state = self.lock();
        state.run(id)?;
        Ok(state
            .timeline
            .range((id, 0)..=(id, u64::MAX))
            .map(|(_, change)| change.worded())
            .collect())
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

    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError> {
        let since = now.saturating_sub(within_ms);
        Ok(self
            .lock()
            .workers
            .values()
            .filter(|worker| worker.last_seen_at >= since)
            .cloned()
            .collect())
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

    async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        let state = self.lock();
        let mut entries: Vec<CatalogEntry> = state
            .catalog
            .values()
            .map(|entry| state::with_called_tasks(entry.clone(), &state.catalog_tasks))
            .collect();
        entries.sort_by(|a, b| {
            (&a.namespace, a.published_at, &a.fingerprint).cmp(&(
                &b.namespace,
                b.published_at,
                &b.fingerprint,
            ))
        });
        Ok(entries)
    }

    async fn prune_workers(&self, now: Millis, older_than_ms: i64) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let before = state.workers.len();
        let since = now.saturating_sub(older_than_ms);
        state
            .workers
            .retain(|_, worker| worker.last_seen_at >= since);
        Ok((before - state.workers.len()) as u64)
    }

    async fn wake_due(&self, now: Millis) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let due: Vec<RunId> = state
            .runs
            .values()
            .filter(|run| run.status.wakes_on_timer() && run.due_at.is_some_and(|due| due <= now))
            .map(|run| run.id)
            .collect();
        for id in &due {
            state.set_status(*id, RunStatus::Queued, None, now, Note::default());
        }
        Ok(due.len() as u64)
    }

    async fn release_stale_claims(
        &self,
        now: Millis,
        timing: ClaimTiming,
    ) -> Result<Vec<RunId>, StoreError> {
        let mut state = self.lock();
        let beat = |run: &RunRecord| run.heartbeat_at.unwrap_or(run.updated_at);
        let stale: Vec<RunId> = state
            .runs
            .values()
            .filter(|run| {
                run.status == RunStatus::Running
                    && beat(run) < now - timing.idle_timeout_ms
                    && state::confirmed_stale(run, now, timing.confirm_ms)
            })
            .map(|run| run.id)
            .collect();
        for id in &stale {
            state::release(&mut state, *id, now, None);
        }
        let window = timing.confirm_ms;
        for run in state.runs.values_mut() {
            let current = run
                .claim_stale_since
                .is_some_and(|mark| beat(run) <= mark && mark > now - 2 * window);
            if run.status == RunStatus::Running && beat(run) < now - window && !current {
                run.claim_stale_since = Some(now);
            }
        }
        Ok(stale)
    }

    async fn stall_undelivered(&self, now: Millis, max_age_ms: i64) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let stalled: Vec<RunId> = state
            .runs
            .values()
            .filter(|run| {
                run.status == RunStatus::Queued
                    && run.queued_at.unwrap_or(run.created_at) < now - max_age_ms
            })
            .map(|run| run.id)
            .collect();
        for id in &stalled {
            state.set_status(*id, RunStatus::Stalled, None, now, Note::default());
        }
        Ok(stalled.len() as u64)
    }

    async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError> {
        let limit = request.limit.min(MAX_PAGE);
        let state = self.lock();
        let mut runs: Vec<&RunRecord> = state
            .runs
            .values()
            .filter(|run| request.filter.matches(run))
            .filter(|run| {
                request
                    .after
                    .is_none_or(|cursor| (run.created_at, run.id) < (cursor.created_at, cursor.id))
            })
            .collect();
        runs.sort_by_key(|run| std::cmp::Reverse((run.created_at, run.id)));
        let page = runs.into_iter().take(limit as usize + 1).cloned().collect();
        Ok(RunPage::of(page, limit))
    }

    async fn changes_since(
        &self,
        cursor: &crate::ChangeCursor,
        limit: u32,
    ) -> Result<crate::ChangePage, StoreError> {
        let after: usize = match cursor.as_str() {
            "" => 0,
            text => text.parse().map_err(|_| StoreError::bad_cursor(cursor))?,
        };
        let state = self.lock();
        let limit = limit.min(MAX_PAGE) as usize;
        let (changes, next) = if limit == 0 {
            (Vec::new(), state.stream.len().max(after))
        } else {
            let changes: Vec<crate::Change> = state
                .stream
                .iter()
                .skip(after)
                .take(limit)
                .cloned()
                .collect();
            let next = after + changes.len();
            (changes, next)
        };
        Ok(crate::ChangePage {
            changes,
            next: crate::ChangeCursor::new(next.to_string()),
        })
    }

    async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError> {
        let state = self.lock();
        let mut counts: BTreeMap<(&str, &str), RunCounts> = BTreeMap::new();
        for run in state.runs.values() {
            let key = (
                run.namespace.workflow.as_str(),
                run.namespace.version.as_str(),
            );
            let entry = counts
                .entry(key)
                .or_insert_with(|| RunCounts::new(run.namespace.clone()));
            entry.record(run.status, 1);
            if run.status == RunStatus::Queued {
                let since = run.queued_at.unwrap_or(run.created_at);
                let oldest = entry.oldest_queued_at.map_or(since, |at| at.min(since));
                entry.oldest_queued_at = Some(oldest);
            }
        }
        Ok(counts.into_values().collect())
    }
}
