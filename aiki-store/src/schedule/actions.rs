//! The writes of the operator's actions on schedules (create, pause, resume, trigger,
//! backfill, redefine), decided here once; each backend writes one as one atomic operation,
//! with the operation's first answer (see [`crate::operation`]).

use super::MAX_BACKFILL;
use super::plan::next_from;
use super::plan::{Builder, entry};
use crate::{
    DueSchedule, Millis, OverlapPolicy, ScheduleActed, ScheduleAction, ScheduleLogKind,
    ScheduleRecord, ScheduleStatus, ScheduleWrite, StoreError,
};

/// How often an operator's action reads and writes again after losing a race.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) const ATTEMPTS: usize = 8;

/// The write creating `record` at revision 1, its log's first row saying so.
pub(crate) fn plan_create(mut record: ScheduleRecord, actor: Option<String>) -> ScheduleWrite {
    record.revision = 1;
    let mut row = entry(
        &record,
        "status:1".to_owned(),
        ScheduleLogKind::Status,
        None,
        record.created_at,
    );
    row.revision = 1;
    row.status = Some(record.status);
    row.reason = Some("created".to_owned());
    row.actor = actor;
    let mut write = ScheduleWrite::new(record, None);
    write.log.push(row);
    write
}

/// The refusal of a schedule created under a name another definition holds.
pub(crate) fn exists_otherwise(found: &ScheduleRecord) -> StoreError {
    StoreError::AlreadyExists {
        what: format!(
            "schedule `{}` with another definition ({}, runs of {}; delete it first or pick \
             another name)",
            found.name, found.definition.spec, found.definition.namespace
        ),
    }
}

/// What an action's write did, as answered.
pub(crate) fn acted(write: &ScheduleWrite) -> ScheduleActed {
    ScheduleActed {
        schedule: write.record.clone(),
        runs: write.runs.iter().map(|run| run.id).collect(),
        log: write.log.clone(),
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn busy(name: &str) -> StoreError {
    StoreError::Unavailable {
        message: format!("schedule `{name}` changed under every attempt of this action; try again"),
        source: None,
    }
}

/// The write of an operator's action (every action but `delete`).
pub(crate) fn plan_action(
    due: &DueSchedule,
    action: &ScheduleAction,
    actor: Option<String>,
    now: Millis,
) -> Result<ScheduleWrite, StoreError> {
    let mut plan = Builder::new(due, now);
    match action {
        ScheduleAction::Pause { reason } => {
            if due.record.status != ScheduleStatus::Active {
                return Err(not_active(&due.record, "paused"));
            }
            let reason = reason.clone().unwrap_or_else(|| "paused".to_owned());
            plan.status(ScheduleStatus::Paused, reason, actor.clone());
        }
        ScheduleAction::Resume => {
            if due.record.status == ScheduleStatus::Inactive {
                return Err(StoreError::Invalid {
                    message: format!(
                        "schedule `{}` is inactive: no worker serving its workflow version \
                         declares it any more, so it is not resumed; declare it again in the \
                         worker's code, or redefine it (`ScheduleAction::Redefine`)",
                        due.record.name
                    ),
                });
            }
            if due.record.status != ScheduleStatus::Paused {
                return Err(not_active(&due.record, "resumed (only a paused one is)"));
            }
            // The occurrences while paused are not caught up: the next one after now. One
            // buffered before the pause waits on only within its catch-up window.
            plan.write.record.next_at = next_from(&due.record, now)?;
            plan.drop_late_buffered();
            plan.status(ScheduleStatus::Active, "resumed".to_owned(), actor.clone());
        }
        ScheduleAction::Trigger => {
            let key = format!("trigger:{}", uuid::Uuid::new_v4().simple());
            plan.start(key, ScheduleLogKind::Triggered, Some(now));
            if let Some(row) = plan.write.log.last_mut() {
                row.actor.clone_from(&actor);
            }
        }
        ScheduleAction::Backfill { from, to, overlap } => {
            if *from < 0 || *to > now {
                return Err(StoreError::Invalid {
                    message: format!(
                        "a backfill covers the past: give a range from 1970 on that ends at or \
                         before now ({now}); {from}..={to} does not (the sweep fires what is to \
                         come)"
                    ),
                });
            }
            if from > to {
                return Err(StoreError::Invalid {
                    message: format!(
                        "a backfill from {from} to {to} ends before it starts; give from <= to"
                    ),
                });
            }
            let times = super::occurrences(&due.record, *from, *to, MAX_BACKFILL + 1)?;
            if times.len() > MAX_BACKFILL {
                return Err(StoreError::Invalid {
                    message: format!(
                        "a backfill starts at most {MAX_BACKFILL} runs; this range holds more, \
                         split it"
                    ),
                });
            }
            let id = uuid::Uuid::new_v4().simple().to_string();
            // One run per occurrence unless told otherwise: the schedule's policy is for
            // occurrences that come while a run is open, not for a request of past ones.
            let policy = overlap.unwrap_or(OverlapPolicy::Allow);
            // The backfill's buffer is its own: the schedule's waiting occurrence stays.
            let buffered = plan.write.record.buffered_at.take();
            for at in times {
                plan.occur(
                    format!("backfill:{id}:{at}"),
                    ScheduleLogKind::Backfilled,
                    at,
                    policy,
                );
            }
            // An occurrence the backfill buffered cannot wait in the schedule's place.
            if plan.write.record.buffered_at.is_some() {
                for row in &mut plan.write.log {
                    if row.kind == ScheduleLogKind::Buffered {
                        row.kind = ScheduleLogKind::Skipped;
                        row.reason = Some(
                            "the previous run has not ended (a backfill buffers nothing)"
                                .to_owned(),
                        );
                    }
                }
            }
            plan.write.record.buffered_at = buffered;
            for row in &mut plan.write.log {
                row.actor.clone_from(&actor);
            }
        }
        ScheduleAction::Redefine {
            definition,
            generation,
        } => {
            super::check(&due.record.name, definition)?;
            if *generation <= due.record.generation {
                return Err(StoreError::Invalid {
                    message: format!(
                        "generation {generation} of schedule `{}` is not newer than the stored \
                         generation {}: bump the generation when the definition changes",
                        due.record.name, due.record.generation
                    ),
                });
            }
            let record = &mut plan.write.record;
            let retimed = record.definition.spec != definition.spec;
            record.definition = (**definition).clone();
            record.generation = *generation;
            // An inactive one is active again; neither it nor a new timing catches up.
            if due.record.status == ScheduleStatus::Inactive {
                record.status = ScheduleStatus::Active;
                record.was_paused = false;
            }
            if retimed || due.record.status == ScheduleStatus::Inactive {
                record.next_at = next_from(record, now)?;
            }
            let status = plan.write.record.status;
            plan.status(
                status,
                format!("redefined at generation {generation}"),
                actor.clone(),
            );
        }
        ScheduleAction::Delete => unreachable!("delete is not a write"),
    }
    Ok(plan.finish())
}

fn not_active(record: &ScheduleRecord, what: &str) -> StoreError {
    StoreError::Invalid {
        message: format!(
            "schedule `{}` is {} and cannot be {what}",
            record.name,
            record.status.as_str()
        ),
    }
}
