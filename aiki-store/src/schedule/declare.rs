//! Schedules declared in code, reconciled at a worker's start, forward only.
//!
//! Each declaration carries a generation, bumped in code whenever its definition changes. The
//! stored schedule keeps the highest generation declared: a declaration of a higher one
//! replaces the definition, one of the same or a lower one (an older binary during a rolling
//! deploy) leaves it. A schedule in code that a worker serving its workflow version no longer
//! declares becomes inactive (kept, listed, never fired, never resumed), whether it was active
//! or paused by an operator; declared again at its generation or a higher one, it is active
//! again, or paused again if it was paused. During a rolling deploy that adds or removes a
//! schedule, an old worker starting may flip it until the next new worker starts; each new
//! worker's start restores what its code declares.

use serde::{Deserialize, Serialize};

use super::plan::Builder;
use super::plan::next_from;
use super::plan_create;
use crate::{
    DueSchedule, Millis, Namespace, ScheduleOrigin, ScheduleRecord, ScheduleStatus, ScheduleWrite,
    StoreError,
};

/// What a worker's start did with one schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Declared {
    /// It was new: created.
    Created {
        /// The schedule.
        name: String,
    },
    /// Its definition was replaced by a newer generation's.
    Redefined {
        /// The schedule.
        name: String,
        /// The generation stored before.
        from: i64,
        /// The generation stored now.
        to: i64,
    },
    /// It was inactive and is declared again: active, or paused if it was paused when it
    /// became inactive.
    Reactivated {
        /// The schedule.
        name: String,
    },
    /// The stored definition is as new or newer: left as it is.
    Kept {
        /// The schedule.
        name: String,
        /// The stored generation.
        stored: i64,
        /// Whether the stored definition differs from the declared one at the same generation
        /// (a change whose generation was not bumped).
        differs: bool,
    },
    /// A schedule of that name was created by a client: left alone.
    NotOurs {
        /// The schedule.
        name: String,
    },
    /// No longer declared by a worker serving its workflow version: inactive, whether it was
    /// active or paused.
    Deactivated {
        /// The schedule.
        name: String,
    },
}

/// The write of one declaration over what is stored (`None`: nothing to write).
pub(crate) fn plan_declared(
    stored: Option<&DueSchedule>,
    declared: &ScheduleRecord,
    worker: &str,
    now: Millis,
) -> (Declared, Option<ScheduleWrite>) {
    let name = declared.name.clone();
    let Some(stored) = stored else {
        let actor = Some(format!("worker {worker}"));
        return (
            Declared::Created { name },
            Some(plan_create(declared.clone(), actor)),
        );
    };
    let record = &stored.record;
    if record.origin != ScheduleOrigin::Code {
        return (Declared::NotOurs { name }, None);
    }
    let newer = declared.generation > record.generation;
    let revive =
        record.status == ScheduleStatus::Inactive && declared.generation >= record.generation;
    if !newer && !revive {
        let differs =
            declared.generation == record.generation && declared.definition != record.definition;
        let kept = Declared::Kept {
            name,
            stored: record.generation,
            differs,
        };
        return (kept, None);
    }
    let mut plan = Builder::new(stored, now);
    let reason = if newer {
        let write = &mut plan.write.record;
        if write.definition.spec != declared.definition.spec {
            write.definition.spec = declared.definition.spec.clone();
            write.next_at = next_from(write, now).ok().flatten();
        }
        write.definition = declared.definition.clone();
        write.generation = declared.generation;
        format!(
            "declared at generation {} by worker {worker}",
            declared.generation
        )
    } else {
        format!("declared again by worker {worker}")
    };
    if record.status == ScheduleStatus::Inactive {
        // The occurrences while inactive are not caught up; an operator's pause stands.
        let write = &mut plan.write.record;
        write.status = if write.was_paused {
            ScheduleStatus::Paused
        } else {
            ScheduleStatus::Active
        };
        write.was_paused = false;
        write.next_at = next_from(write, now).ok().flatten();
    }
    let status = plan.write.record.status;
    plan.status(status, reason, None);
    let outcome = if newer {
        Declared::Redefined {
            name,
            from: record.generation,
            to: declared.generation,
        }
    } else {
        Declared::Reactivated { name }
    };
    (outcome, Some(plan.finish()))
}

/// The write making a stored schedule in code that `worker` (serving `serves`) no longer
/// declares inactive, if it is one and active or paused: a removal sticks whatever an
/// operator did meanwhile (a paused one remembers it was, to come back paused if declared
/// again).
pub(crate) fn plan_absent(
    stored: &DueSchedule,
    declared: &[ScheduleRecord],
    serves: &[Namespace],
    worker: &str,
    now: Millis,
) -> Option<(Declared, ScheduleWrite)> {
    let record = &stored.record;
    let ours = record.origin == ScheduleOrigin::Code
        && record.status != ScheduleStatus::Inactive
        && serves.contains(&record.definition.namespace)
        && declared.iter().all(|declared| declared.name != record.name);
    if !ours {
        return None;
    }
    let mut plan = Builder::new(stored, now);
    let paused = record.status == ScheduleStatus::Paused;
    plan.write.record.was_paused = paused;
    let was = if paused {
        " (it was paused: declared again, it comes back paused)"
    } else {
        ""
    };
    plan.status(
        ScheduleStatus::Inactive,
        format!("no longer declared by worker {worker}, which serves its workflow version{was}"),
        None,
    );
    let name = record.name.clone();
    Some((Declared::Deactivated { name }, plan.finish()))
}

/// Checks a set of schedules declared in code before any is written: each valid, of origin
/// `code` and generation 1 or more, no name twice.
pub fn check_declared(declared: &[ScheduleRecord]) -> Result<(), StoreError> {
    for (index, record) in declared.iter().enumerate() {
        super::check(&record.name, &record.definition)?;
        if record.origin != ScheduleOrigin::Code || record.generation < 1 {
            return Err(StoreError::Invalid {
                message: format!(
                    "schedule `{}` is declared with generation {} and origin {:?}: a schedule in \
                     code has origin `code` and a generation of at least 1",
                    record.name, record.generation, record.origin
                ),
            });
        }
        if declared[..index]
            .iter()
            .any(|other| other.name == record.name)
        {
            return Err(StoreError::Invalid {
                message: format!(
                    "schedule `{}` is declared twice; give each schedule one declaration",
                    record.name
                ),
            });
        }
    }
    Ok(())
}
