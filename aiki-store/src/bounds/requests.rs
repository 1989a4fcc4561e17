//! The bounds of the API's request bodies ([`crate::api`]).

use super::{Bounded, Field, OutOfBounds};
use crate::api::{
    Act, ActOnSchedule, AddCatalogTasks, ChangesSince, ClaimWait, ContinueRun, CreateSchedule,
    DeclareSchedules, ListRunsQuery, MAX_ENTRY_BATCH, MAX_ENTRY_WRITES, PublishCatalog, PutEntries,
    PutEntry, PutEntryWrites, PutSleep, RecordEventSlot, RecordWorker, RefreshClaim, ReleaseClaim,
    ScheduleQuery, SetConfig, StartChild, TransitionRun, WorkersQuery,
};

type Checked = Result<(), OutOfBounds>;

impl Bounded for PutEntry {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.entry.check_bounds(at.at("entry"))
    }
}

impl Bounded for PutEntries {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        let entries = at.at("entries");
        entries.list(self.entries.len(), MAX_ENTRY_BATCH, "entries")?;
        entries.items(&self.entries)
    }
}

impl Bounded for PutEntryWrites {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        let writes = at.at("writes");
        writes.list(self.writes.len(), MAX_ENTRY_WRITES, "writes")?;
        writes.items(&self.writes)
    }
}

impl Bounded for StartChild {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.entry.check_bounds(at.at("entry"))?;
        self.child.check_bounds(at.at("child"))
    }
}

impl Bounded for PutSleep {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.sleep.check_bounds(at.at("sleep"))?;
        at.at("from").maybe_time(self.from)
    }
}

impl Bounded for RecordEventSlot {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.slot.check_bounds(at.at("slot"))
    }
}

impl Bounded for RefreshClaim {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("owner").name(&self.owner)?;
        at.at("expected").revision(self.expected)?;
        at.at("now").time(self.now)
    }
}

impl Bounded for TransitionRun {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.transition.check_bounds(at.at("transition"))
    }
}

impl Bounded for ContinueRun {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.continuation.check_bounds(at.at("continuation"))
    }
}

impl Bounded for Act {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("actor").maybe_name(self.actor.as_deref())?;
        at.at("now").time(self.now)
    }
}

impl Bounded for ReleaseClaim {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        at.at("now").time(self.now)?;
        if let Some(confirm) = self.confirm_ms {
            at.at("confirm_ms").duration(confirm)?;
        }
        at.at("actor").maybe_name(self.actor.as_deref())
    }
}

impl Bounded for RecordWorker {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.worker.check_bounds(at.at("worker"))?;
        at.at("now").time(self.now)
    }
}

impl Bounded for WorkersQuery {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("now").time(self.now)?;
        at.at("within_ms").duration(self.within_ms)
    }
}

impl Bounded for ClaimWait {
    fn check_bounds(&self, _: Field<'_>) -> Checked {
        // Any wait: the server caps it.
        Ok(())
    }
}

impl Bounded for PublishCatalog {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.entry.check_bounds(at.at("entry"))?;
        at.at("now").time(self.now)
    }
}

impl Bounded for AddCatalogTasks {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.namespace.check_bounds(at.at("namespace"))?;
        at.at("fingerprint").name(&self.fingerprint)?;
        at.at("tasks").items(&self.tasks)
    }
}

impl Bounded for ChangesSince {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("cursor").name(self.cursor.as_str())
    }
}

impl Bounded for SetConfig {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        // The value's range is the key's (`ConfigKey::check`, in the store).
        at.at("now").time(self.now)
    }
}

impl Bounded for CreateSchedule {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.schedule.check_bounds(at.at("schedule"))?;
        at.at("actor").maybe_name(self.actor.as_deref())
    }
}

impl Bounded for DeclareSchedules {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("declared").items(&self.declared)?;
        at.at("serves").items(&self.serves)?;
        at.at("worker").name(&self.worker)?;
        at.at("now").time(self.now)
    }
}

impl Bounded for ScheduleQuery {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").name(&self.name)
    }
}

impl Bounded for ActOnSchedule {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").name(&self.name)?;
        self.action.check_bounds(at.at("action"))?;
        at.at("actor").maybe_name(self.actor.as_deref())?;
        at.at("now").time(self.now)
    }
}

impl Bounded for ListRunsQuery {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        for (field, value) in [
            ("workflow", &self.workflow),
            ("version", &self.version),
            ("reference_id", &self.reference_id),
            ("pool", &self.pool),
            ("error_kind", &self.error_kind),
            ("failed_task", &self.failed_task),
            ("error_contains", &self.error_contains),
            ("schedule", &self.schedule),
            ("after", &self.after),
        ] {
            at.at(field).maybe_name(value.as_deref())?;
        }
        if let Some(statuses) = &self.status {
            let status = at.at("status");
            status.name(statuses)?;
            let count = statuses.split(',').count();
            status.list(count, super::MAX_STATUS_FILTER, "statuses")?;
        }
        for (field, value) in [
            ("created_from", self.created_from),
            ("created_until", self.created_until),
            ("updated_from", self.updated_from),
            ("updated_until", self.updated_until),
        ] {
            if let Some(value) = value {
                at.at(field).time(value)?;
            }
        }
        Ok(())
    }
}
