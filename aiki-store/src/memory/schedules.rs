//! The memory store's schedules: the writes of [`crate::schedule`], each under the one lock.

use super::MemoryStore;
use super::state::State;
use crate::schedule::{
    Declared, MAX_LOG_ROWS, acted, check_declared, exists_otherwise, plan_absent, plan_action,
    plan_create, plan_declared,
};
use crate::{
    CreateOutcome, DueSchedule, Lease, Millis, RunAction, ScheduleActed, ScheduleAction,
    ScheduleCreated, ScheduleLogEntry, ScheduleRecord, ScheduleStatus, ScheduleWrite, StoreError,
};

impl State {
    fn due_schedule(&self, record: &ScheduleRecord) -> DueSchedule {
        let previous_open = record
            .last_run
            .and_then(|id| self.runs.get(&id))
            .is_some_and(|run| !run.status.is_terminal());
        DueSchedule {
            record: record.clone(),
            previous_open,
        }
    }

    pub(super) fn due_schedules(&self, now: crate::Millis, limit: u32) -> Vec<DueSchedule> {
        let mut due: Vec<DueSchedule> = self
            .schedules
            .values()
            .filter(|record| record.status == ScheduleStatus::Active)
            .map(|record| self.due_schedule(record))
            .filter(|due| {
                due.record.fire_at().is_some_and(|at| at <= now)
                    || (due.record.buffered_at.is_some() && !due.previous_open)
            })
            .collect();
        due.sort_by_key(|due| due.record.fire_at());
        due.truncate(limit as usize);
        due
    }

    /// Applies `write` if nothing refuses it; whether it did.
    pub(super) fn write_schedule(&mut self, mut write: ScheduleWrite) -> bool {
        let name = &write.record.name;
        let held = self.schedules.get(name);
        if held.map(|record| record.revision) != write.expected
            || held.is_some_and(|record| record.id != write.record.id)
        {
            return false;
        }
        let taken = |row: &ScheduleLogEntry| {
            self.schedule_log
                .iter()
                .any(|old| old.schedule == row.schedule && old.key == row.key)
        };
        if write.log.iter().any(taken) {
            return false;
        }
        if write.runs.iter().any(|run| {
            run.reference_id.as_ref().is_some_and(|reference| {
                self.references
                    .contains_key(&(run.namespace.to_string(), reference.clone()))
            })
        }) {
            return false;
        }
        if let Some(id) = write.cancel
            && let Some(run) = self.runs.get(&id)
            && RunAction::Cancel.applies_to(run.status)
        {
            let expected = run.revision;
            let actor = Some(format!("schedule {name}"));
            // A run that ended meanwhile stays as it ended.
            let _ = self.transition(
                id,
                expected,
                RunAction::Cancel.transition(write.record.updated_at, actor),
            );
        }
        for run in write.runs.drain(..) {
            let CreateOutcome::Created(_) = self.insert_run(run) else {
                unreachable!("reference ids checked above");
            };
        }
        write.record.revision = write.expected.map_or(1, |revision| revision + 1);
        self.schedule_log.extend(write.log);
        let held = self
            .schedule_log
            .iter()
            .filter(|row| row.schedule == *name)
            .count();
        let mut over = held.saturating_sub(MAX_LOG_ROWS);
        if over > 0 {
            // The oldest rows go first: rows are kept in the order they were written.
            self.schedule_log.retain(|row| {
                let drop = over > 0 && row.schedule == *name;
                over -= usize::from(drop);
                !drop
            });
        }
        self.schedules
            .insert(write.record.name.clone(), write.record);
        true
    }
}

impl MemoryStore {
    pub(super) fn create_schedule_now(
        &self,
        record: ScheduleRecord,
        actor: Option<String>,
    ) -> Result<ScheduleCreated, StoreError> {
        crate::schedule::check(&record.name, &record.definition)?;
        self.once("create_schedule", |state| {
            if let Some(found) = state.schedules.get(&record.name) {
                if found.definition == record.definition {
                    return Ok(ScheduleCreated::Existing(found.clone()));
                }
                return Err(exists_otherwise(found));
            }
            let write = plan_create(record, actor);
            let created = write.record.clone();
            assert!(
                state.write_schedule(write),
                "BUG: nothing races under the lock"
            );
            Ok(ScheduleCreated::Created(created))
        })
    }

    pub(super) fn act_on_schedule_now(
        &self,
        name: &str,
        action: ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<ScheduleActed, StoreError> {
        self.once("act_on_schedule", |state| {
            let due = state
                .schedules
                .get(name)
                .map(|record| state.due_schedule(record))
                .ok_or_else(|| crate::schedule::not_found(name))?;
            if action == ScheduleAction::Delete {
                state.schedules.remove(name);
                state.schedule_log.retain(|row| row.schedule != name);
                return Ok(ScheduleActed {
                    schedule: due.record,
                    runs: Vec::new(),
                    log: Vec::new(),
                });
            }
            let write = plan_action(&due, &action, actor, now)?;
            let answer = acted(&write);
            assert!(
                state.write_schedule(write),
                "BUG: nothing races under the lock"
            );
            Ok(answer)
        })
    }

    pub(super) fn declare_schedules_now(
        &self,
        declared: Vec<ScheduleRecord>,
        serves: &[crate::Namespace],
        worker: &str,
        now: Millis,
    ) -> Result<Vec<Declared>, StoreError> {
        check_declared(&declared)?;
        let mut state = self.lock();
        let mut outcomes = Vec::new();
        for record in &declared {
            let stored = state
                .schedules
                .get(&record.name)
                .map(|stored| state.due_schedule(stored));
            let (outcome, write) = plan_declared(stored.as_ref(), record, worker, now);
            if let Some(write) = write {
                assert!(
                    state.write_schedule(write),
                    "BUG: nothing races under the lock"
                );
            }
            outcomes.push(outcome);
        }
        let stored: Vec<DueSchedule> = state
            .schedules
            .values()
            .map(|record| state.due_schedule(record))
            .collect();
        for due in &stored {
            if let Some((outcome, write)) = plan_absent(due, &declared, serves, worker, now) {
                assert!(
                    state.write_schedule(write),
                    "BUG: nothing races under the lock"
                );
                outcomes.push(outcome);
            }
        }
        Ok(outcomes)
    }

    /// The sweep's write, fenced by `lease`.
    pub(super) fn advance_schedule_now(&self, lease: &Lease, write: ScheduleWrite) -> bool {
        let mut state = self.lock();
        state.holds(lease, write.record.updated_at) && state.write_schedule(write)
    }

    pub(super) fn schedule_log_of(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<ScheduleLogEntry>, StoreError> {
        let state = self.lock();
        if !state.schedules.contains_key(name) {
            return Err(crate::schedule::not_found(name));
        }
        let rows: Vec<_> = state
            .schedule_log
            .iter()
            .filter(|row| row.schedule == name)
            .cloned()
            .collect();
        let skip = rows.len().saturating_sub(limit as usize);
        Ok(rows.into_iter().skip(skip).collect())
    }
}
