//! The memory store's client and operator operations.

use async_trait::async_trait;

use super::MemoryStore;
use super::state::{self, Note};
use crate::ClientStore;
use crate::{
    AppendOutcome, CreateOutcome, EventRecord, Millis, NewEvent, NewFork, NewRun, RunAction, RunId,
    RunRecord, RunStatus, StoreError,
};

#[async_trait]
impl ClientStore for MemoryStore {
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        self.limit.check_new_run(&run)?;
        self.once("create_run", |state| {
            if state.runs.contains_key(&run.id) {
                return Err(StoreError::AlreadyExists {
                    what: format!("run {}", run.id),
                });
            }
            Ok(state.insert_run(run))
        })
    }

    async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError> {
        self.limit.check_fork(&fork)?;
        self.once("fork_run", |state| {
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
        })
    }

    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        event.check_name()?;
        self.limit.check_event(&event)?;
        self.once("append_event", |state| {
            // A run that continued as new hands its events on to the last run of its chain.
            let mut event = event;
            event.run_id = state.chain_end(event.run_id)?;
            let run = state.run(event.run_id)?;
            if run.status.is_terminal() {
                return Err(StoreError::InvalidTransition {
                    run_id: run.id,
                    from: run.status,
                    to: RunStatus::Queued,
                });
            }
            // Any event wakes a run awaiting one, whatever its status label (see `WaitSpec`).
            let woke = crate::WaitSpec::woken_by_event(run.status, run.wait.as_ref());
            let queue = state.events.range(
                (event.run_id, event.name.clone(), 0)
                    ..=(event.run_id, event.name.clone(), u32::MAX),
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
                state.set_status(event.run_id, RunStatus::Queued, None, event.now, note);
            }
            Ok(AppendOutcome::Appended { index: next, woke })
        })
    }

    async fn act(
        &self,
        id: RunId,
        action: RunAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<RunRecord, StoreError> {
        self.once("act", |state| {
            let run = state
                .runs
                .get_mut(&id)
                .ok_or_else(|| StoreError::run_not_found(id))?;
            if !action.applies_to(run.status) {
                return Err(StoreError::InvalidTransition {
                    run_id: id,
                    from: run.status,
                    to: action.to(),
                });
            }
            if action == RunAction::Pause && run.status == RunStatus::Running {
                if run.pause_requested_at.is_none() {
                    run.pause_requested_at = Some(now);
                    run.pause_requested_by = actor;
                }
                return Ok(run.clone());
            }
            let expected = run.revision;
            state.transition(id, expected, action.transition(now, actor))
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
        self.once("release_claim", |state| {
            state.check_revision(id, expected)?;
            let run = &state.runs[&id];
            if run.status != RunStatus::Running {
                return Err(StoreError::InvalidTransition {
                    run_id: id,
                    from: run.status,
                    to: RunStatus::Queued,
                });
            }
            // An operator leads nothing: a mark older than two windows is not trusted.
            let confirmed = confirm_ms.is_none_or(|window| {
                let timing = crate::ClaimTiming {
                    confirm_ms: window,
                    ..crate::ClaimTiming::new(0, 0)
                };
                state::confirmed_stale(run, now, &timing)
            });
            if !confirmed {
                return Ok(None);
            }
            Ok(Some(state::release(state, id, now, actor)))
        })
    }

    async fn transition_all(&self, moves: Vec<crate::Move>) -> Result<Vec<RunRecord>, StoreError> {
        for change in &moves {
            self.limit.check_transition(change.id, &change.transition)?;
        }
        self.once("transition_all", |state| {
            // All or nothing: applied to a copy, which replaces the state only if every one applies.
            let mut copy = state.clone();
            let runs = moves
                .into_iter()
                .map(|change| copy.transition(change.id, change.expected, change.transition))
                .collect::<Result<Vec<_>, _>>()?;
            *state = copy;
            Ok(runs)
        })
    }

    async fn set_config(
        &self,
        key: crate::ConfigKey,
        value: i64,
        _now: Millis,
    ) -> Result<crate::RuntimeConfig, StoreError> {
        let mut state = self.lock();
        state.config = state.config.with(key, value)?;
        Ok(state.config)
    }

    async fn create_schedule(
        &self,
        schedule: crate::ScheduleRecord,
        actor: Option<String>,
    ) -> Result<crate::ScheduleCreated, StoreError> {
        self.limit
            .check_schedule(&schedule.name, &schedule.definition)?;
        self.create_schedule_now(schedule, actor)
    }

    async fn act_on_schedule(
        &self,
        name: &str,
        action: crate::ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<crate::ScheduleActed, StoreError> {
        self.limit.check_schedule_action(name, &action)?;
        self.act_on_schedule_now(name, action, actor, now)
    }
}
