//! The bounds of the contract's records, as requests carry them.

use super::{Bounded, Field, MAX_LIST_ITEMS, MAX_MOVES, MAX_STATUS_FILTER, OutOfBounds};
use crate::{
    CallRef, CatalogEntry, ClaimRequest, Continuation, EntryRecord, EventDeclaration, EventRecord,
    Failure, ListRuns, Move, Namespace, NewEvent, NewFork, NewRun, ParentLink, RunFilter,
    ScheduleAction, ScheduleDefinition, ScheduleRecord, ScheduleSpec, SchemaRecord, SleepRecord,
    SlotRef, TaskDeclaration, TimeRange, Transition, WaitSpec, WorkerRecord,
};

type Checked = Result<(), OutOfBounds>;

impl Bounded for Namespace {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("workflow").name(&self.workflow)?;
        at.at("version").name(&self.version)
    }
}

impl Bounded for ParentLink {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("address").address(&self.address)
    }
}

impl Bounded for NewRun {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.namespace.check_bounds(at.at("namespace"))?;
        at.at("input_hash").name(&self.input_hash)?;
        at.at("reference_id")
            .maybe_name(self.reference_id.as_deref())?;
        at.at("pool").name(&self.pool)?;
        at.at("due_at").maybe_time(self.due_at)?;
        at.at("parent").maybe(self.parent.as_ref())?;
        at.at("traceparent")
            .maybe_name(self.traceparent.as_deref())?;
        at.at("actor").maybe_name(self.actor.as_deref())?;
        at.at("now").time(self.now)
    }
}

impl Bounded for Failure {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("kind").name(&self.kind)?;
        at.at("message").text(&self.message)?;
        at.at("call").maybe(self.call.as_ref())
    }
}

impl Bounded for CallRef {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("address").address(&self.address)
    }
}

impl Bounded for EntryRecord {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("address").address(&self.address)?;
        at.at("fingerprint")
            .maybe_name(self.fingerprint.as_deref())?;
        at.at("error").maybe(self.error.as_ref())?;
        at.at("retry_at").maybe_time(self.retry_at)?;
        at.at("updated_at").time(self.updated_at)
    }
}

impl Bounded for SleepRecord {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").address(&self.name)?;
        at.at("duration_ms").duration(self.duration_ms)?;
        at.at("wake_at").time(self.wake_at)
    }
}

impl Bounded for EventRecord {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").address(&self.name)?;
        at.at("reference_id")
            .maybe_name(self.reference_id.as_deref())?;
        at.at("sent_by").maybe_name(self.sent_by.as_deref())?;
        at.at("received_at").time(self.received_at)
    }
}

impl Bounded for NewEvent {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").address(&self.name)?;
        at.at("reference_id")
            .maybe_name(self.reference_id.as_deref())?;
        at.at("actor").maybe_name(self.actor.as_deref())?;
        at.at("now").time(self.now)
    }
}

impl Bounded for NewFork {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.run.check_bounds(at.at("run"))?;
        // A fork carries a whole history: its lists are bounded by the body limit alone.
        for (index, entry) in self.entries.iter().enumerate() {
            entry.check_bounds(at.at("entries").item(index))?;
        }
        for (index, sleep) in self.sleeps.iter().enumerate() {
            sleep.check_bounds(at.at("sleeps").item(index))?;
        }
        for (index, event) in self.events.iter().enumerate() {
            event.check_bounds(at.at("events").item(index))?;
        }
        Ok(())
    }
}

impl Bounded for SlotRef {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").address(&self.name)
    }
}

impl Bounded for WaitSpec {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        let sleeps = at.at("sleeps");
        sleeps.list(self.sleeps.len(), MAX_LIST_ITEMS, "sleeps")?;
        for (index, sleep) in self.sleeps.iter().enumerate() {
            let item = sleeps.item(index);
            item.at("name").address(&sleep.name)?;
            item.at("wake_at").time(sleep.wake_at)?;
        }
        let events = at.at("events");
        events.list(self.events.len(), MAX_LIST_ITEMS, "events")?;
        for (index, event) in self.events.iter().enumerate() {
            let item = events.item(index);
            item.at("name").address(&event.name)?;
            item.at("timeout_at").maybe_time(event.timeout_at)?;
        }
        let children = at.at("children");
        children.list(self.children.len(), MAX_LIST_ITEMS, "children")?;
        for (index, child) in self.children.iter().enumerate() {
            children
                .item(index)
                .at("timeout_at")
                .maybe_time(child.timeout_at)?;
        }
        let retries = at.at("retries");
        retries.list(self.retries.len(), MAX_LIST_ITEMS, "retries")?;
        for (index, retry) in self.retries.iter().enumerate() {
            let item = retries.item(index);
            item.at("address").address(&retry.address)?;
            item.at("at").time(retry.at)?;
        }
        Ok(())
    }
}

impl Bounded for Transition {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("due_at").maybe_time(self.due_at)?;
        at.at("output_fingerprint")
            .maybe_name(self.output_fingerprint.as_deref())?;
        at.at("error").maybe(self.error.as_ref())?;
        at.at("wait").maybe(self.wait.as_ref())?;
        at.at("rerun").items(&self.rerun)?;
        at.at("forget").items(&self.forget)?;
        at.at("actor").maybe_name(self.actor.as_deref())?;
        at.at("now").time(self.now)
    }
}

impl Bounded for Move {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("expected").revision(self.expected)?;
        self.transition.check_bounds(at.at("transition"))
    }
}

/// The moves of `POST /transitions`: at most [`MAX_MOVES`].
impl Bounded for Vec<Move> {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.list(self.len(), MAX_MOVES, "moves")?;
        for (index, each) in self.iter().enumerate() {
            each.check_bounds(at.item(index))?;
        }
        Ok(())
    }
}

impl Bounded for ClaimRequest {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("owner").name(&self.owner)?;
        at.at("namespaces").items(&self.namespaces)?;
        at.at("pool").name(&self.pool)?;
        at.at("skip")
            .list(self.skip.len(), MAX_LIST_ITEMS, "run ids")?;
        at.at("now").time(self.now)
    }
}

impl Bounded for WorkerRecord {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("id").name(&self.id)?;
        at.at("host").name(&self.host)?;
        at.at("namespaces").items(&self.namespaces)?;
        at.at("pool").name(&self.pool)?;
        at.at("started_at").time(self.started_at)?;
        at.at("last_seen_at").time(self.last_seen_at)?;
        let fingerprints = at.at("fingerprints");
        fingerprints.list(self.fingerprints.len(), MAX_LIST_ITEMS, "fingerprints")?;
        for (version, fingerprint) in &self.fingerprints {
            fingerprints.name(version)?;
            fingerprints.at(version).name(fingerprint)?;
        }
        at.at("stopped_at").maybe_time(self.stopped_at)?;
        if let Some(refresh) = self.claim_refresh_ms {
            at.at("claim_refresh_ms").duration(refresh)?;
        }
        match self.claim_idle_timeout_ms {
            Some(timeout) => at.at("claim_idle_timeout_ms").duration(timeout),
            None => Ok(()),
        }
    }
}

impl Bounded for SchemaRecord {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("fingerprint").name(&self.fingerprint)
    }
}

impl Bounded for EventDeclaration {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").address(&self.name)?;
        self.payload.check_bounds(at.at("payload"))
    }
}

impl Bounded for TaskDeclaration {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").name(&self.name)?;
        self.output.check_bounds(at.at("output"))
    }
}

impl Bounded for CatalogEntry {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.namespace.check_bounds(at.at("namespace"))?;
        at.at("fingerprint").name(&self.fingerprint)?;
        self.input.check_bounds(at.at("input"))?;
        self.output.check_bounds(at.at("output"))?;
        at.at("events").items(&self.events)?;
        at.at("tasks").items(&self.tasks)?;
        at.at("published_by").name(&self.published_by)?;
        at.at("published_at").time(self.published_at)
    }
}

impl Bounded for ScheduleSpec {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        match self {
            ScheduleSpec::Cron {
                expression,
                timezone,
            } => {
                at.at("expression").name(expression)?;
                at.at("timezone").name(timezone)
            }
            ScheduleSpec::Every { every_ms } => at.at("every_ms").duration(*every_ms),
        }
    }
}

impl Bounded for ScheduleDefinition {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.spec.check_bounds(at.at("spec"))?;
        self.namespace.check_bounds(at.at("namespace"))?;
        at.at("input_hash").name(&self.input_hash)?;
        at.at("pool").name(&self.pool)?;
        if let Some(window) = self.catchup_window_ms {
            at.at("catchup_window_ms").duration(window)?;
        }
        at.at("jitter_ms").duration(self.jitter_ms)
    }
}

/// A schedule as a request carries it: its name and definition (a server makes the rest
/// again).
impl Bounded for ScheduleRecord {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("name").name(&self.name)?;
        at.at("id").name(&self.id)?;
        self.definition.check_bounds(at.at("definition"))
    }
}

impl Bounded for ScheduleAction {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        match self {
            ScheduleAction::Pause { reason } => at.at("reason").maybe_name(reason.as_deref()),
            ScheduleAction::Backfill { from, to, .. } => {
                at.at("from").time(*from)?;
                at.at("to").time(*to)
            }
            ScheduleAction::Redefine { definition, .. } => {
                definition.check_bounds(at.at("definition"))
            }
            _ => Ok(()),
        }
    }
}

impl Bounded for TimeRange {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("from").maybe_time(self.from)?;
        at.at("until").maybe_time(self.until)
    }
}

impl Bounded for RunFilter {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        at.at("workflow").maybe_name(self.workflow.as_deref())?;
        at.at("version").maybe_name(self.version.as_deref())?;
        at.at("statuses")
            .list(self.statuses.len(), MAX_STATUS_FILTER, "statuses")?;
        at.at("reference_id")
            .maybe_name(self.reference_id.as_deref())?;
        at.at("pool").maybe_name(self.pool.as_deref())?;
        at.at("error_kind").maybe_name(self.error_kind.as_deref())?;
        at.at("failed_task")
            .maybe_name(self.failed_task.as_deref())?;
        at.at("error_contains")
            .maybe_name(self.error_contains.as_deref())?;
        at.at("schedule").maybe_name(self.schedule.as_deref())?;
        self.created.check_bounds(at.at("created"))?;
        self.updated.check_bounds(at.at("updated"))
    }
}

impl Bounded for ListRuns {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.filter.check_bounds(at.at("filter"))?;
        if let Some(after) = &self.after {
            at.at("after").time(after.created_at)?;
        }
        Ok(())
    }
}

impl Bounded for Continuation {
    fn check_bounds(&self, at: Field<'_>) -> Checked {
        self.successor.check_bounds(at.at("successor"))?;
        let consumed = at.at("consumed");
        consumed.list(self.consumed.len(), MAX_LIST_ITEMS, "event names")?;
        for name in self.consumed.keys() {
            consumed.address(name)?;
        }
        at.at("now").time(self.now)
    }
}
