//! The sweep's write of a due schedule: the overlap policy and the catch-up window applied to
//! its occurrences, decided here once and written by the backend as one atomic
//! [`ScheduleWrite`].

use super::{MAX_PER_WRITE, catchup_window, next_after, occurrence_key};
use crate::{
    DueSchedule, Millis, NewRun, OverlapPolicy, RunId, ScheduleLogEntry, ScheduleLogKind,
    ScheduleRecord, ScheduleStatus, ScheduleWrite, StoreError,
};

pub(super) fn entry(
    record: &ScheduleRecord,
    key: String,
    kind: ScheduleLogKind,
    nominal_at: Option<Millis>,
    now: Millis,
) -> ScheduleLogEntry {
    ScheduleLogEntry {
        schedule: record.name.clone(),
        key,
        kind,
        nominal_at,
        last_at: None,
        count: 1,
        run_id: None,
        status: None,
        reason: None,
        revision: record.revision + 1,
        at: now,
        actor: None,
    }
}

/// A run of `record` for the row `key` (reference id `schedule:<name>:<key>`).
fn run_for(record: &ScheduleRecord, key: &str, now: Millis) -> NewRun {
    let definition = &record.definition;
    let mut run = NewRun::new(
        definition.namespace.clone(),
        definition.input.clone(),
        definition.input_hash.clone(),
        now,
    );
    run.reference_id = Some(format!("schedule:{}:{key}", record.name));
    run.pool = definition.pool.clone();
    run.actor = Some(format!("schedule {}", record.name));
    run
}

/// A write under construction: the overlap policy applied to occurrences one after another.
pub(super) struct Builder {
    pub(super) write: ScheduleWrite,
    open: bool,
    now: Millis,
}

impl Builder {
    pub(super) fn new(due: &DueSchedule, now: Millis) -> Self {
        let mut record = due.record.clone();
        record.updated_at = now;
        Builder {
            write: ScheduleWrite::new(record, Some(due.record.revision)),
            open: due.previous_open,
            now,
        }
    }

    pub(super) fn record(&self) -> &ScheduleRecord {
        &self.write.record
    }

    /// Starts a run for the row `key` of `kind`.
    pub(super) fn start(
        &mut self,
        key: String,
        kind: ScheduleLogKind,
        nominal: Option<Millis>,
    ) -> RunId {
        let run = run_for(self.record(), &key, self.now);
        let id = run.id;
        let mut row = entry(self.record(), key, kind, nominal, self.now);
        row.run_id = Some(id);
        self.write.runs.push(run);
        self.write.log.push(row);
        self.write.record.last_run = Some(id);
        self.open = true;
        id
    }

    /// Records the row `key` of `kind` without a run.
    fn note(&mut self, key: String, kind: ScheduleLogKind, nominal: Millis, reason: &str) {
        let mut row = entry(self.record(), key, kind, Some(nominal), self.now);
        row.reason = Some(reason.to_owned());
        self.write.log.push(row);
    }

    /// Records the occurrences from `first` to `last` (`count` of them) as found later than
    /// their catch-up window: one `missed` row.
    fn missed(&mut self, first: Millis, last: Millis, count: i64) {
        let mut row = entry(
            self.record(),
            format!("missed:{first}"),
            ScheduleLogKind::Missed,
            Some(first),
            self.now,
        );
        row.last_at = Some(last);
        row.count = count;
        row.reason = Some("found later than the catch-up window".to_owned());
        self.write.log.push(row);
    }

    /// Drops the buffered occurrence if it is now later than its catch-up window (after a
    /// pause, which catches nothing up), recording it as missed.
    pub(super) fn drop_late_buffered(&mut self) {
        let record = self.record();
        if let Some(at) = record.buffered_at
            && self.now - at - super::jitter_offset(record) >= catchup_window(record, at)
        {
            self.write.record.buffered_at = None;
            self.missed(at, at, 1);
        }
    }

    /// The occurrence at `at` (its key `key`) under `policy`.
    pub(super) fn occur(
        &mut self,
        key: String,
        kind: ScheduleLogKind,
        at: Millis,
        policy: OverlapPolicy,
    ) {
        if !self.open {
            self.start(key, kind, Some(at));
            return;
        }
        match policy {
            OverlapPolicy::Allow => {
                self.start(key, kind, Some(at));
            }
            OverlapPolicy::Skip => self.note(
                key,
                ScheduleLogKind::Skipped,
                at,
                "the previous run has not ended (overlap policy skip)",
            ),
            OverlapPolicy::BufferOne if self.write.record.buffered_at.is_none() => {
                self.write.record.buffered_at = Some(at);
                self.note(
                    format!("buffered:{key}"),
                    ScheduleLogKind::Buffered,
                    at,
                    "waits for the previous run to end (overlap policy buffer_one)",
                );
            }
            OverlapPolicy::BufferOne => self.note(
                key,
                ScheduleLogKind::Skipped,
                at,
                "the previous run has not ended and one occurrence already waits (overlap \
                 policy buffer_one)",
            ),
            OverlapPolicy::CancelPrevious => {
                let previous = self.write.record.last_run;
                // A run started by this same write is not started at all: its row says so.
                if let Some(pos) = self
                    .write
                    .runs
                    .iter()
                    .position(|run| Some(run.id) == previous)
                {
                    self.write.runs.remove(pos);
                    if let Some(row) = self.write.log.iter_mut().find(|row| row.run_id == previous)
                    {
                        row.kind = ScheduleLogKind::Skipped;
                        row.run_id = None;
                        row.reason = Some(
                            "superseded by a later occurrence in the same catch-up (overlap \
                             policy cancel_previous)"
                                .to_owned(),
                        );
                    }
                } else if let Some(previous) = previous {
                    self.write.cancel = Some(previous);
                    let mut row = entry(
                        self.record(),
                        format!("cancel:{previous}"),
                        ScheduleLogKind::CancelledPrevious,
                        Some(at),
                        self.now,
                    );
                    row.run_id = Some(previous);
                    row.reason = Some("overlap policy cancel_previous".to_owned());
                    self.write.log.push(row);
                }
                self.start(key, kind, Some(at));
            }
        }
    }

    /// Sets the status (the same one, for a change of definition) and records the change, why
    /// and by whom, in the log.
    pub(super) fn status(&mut self, status: ScheduleStatus, reason: String, actor: Option<String>) {
        self.write.record.status = status;
        let revision = self.write.record.revision + 1;
        let key = format!("status:{revision}");
        let mut row = entry(self.record(), key, ScheduleLogKind::Status, None, self.now);
        row.status = Some(status);
        row.reason = Some(reason);
        row.actor = actor;
        self.write.log.push(row);
    }

    pub(super) fn finish(mut self) -> ScheduleWrite {
        self.write.record.revision = self.write.expected.map_or(1, |revision| revision + 1);
        self.write
    }
}

/// The sweep's write for a due schedule at `now`: the buffered occurrence once the previous
/// run has ended, then every occurrence up to `now` (at most [`MAX_PER_WRITE`]) under the
/// overlap policy and the catch-up window; `None` when nothing is due.
pub fn plan_due(due: &DueSchedule, now: Millis) -> Result<Option<ScheduleWrite>, StoreError> {
    if due.record.status != ScheduleStatus::Active {
        return Ok(None);
    }
    let mut plan = Builder::new(due, now);
    let policy = due.record.definition.overlap;
    let mut decided = 0;
    if let Some(at) = plan.write.record.buffered_at
        && !plan.open
    {
        plan.write.record.buffered_at = None;
        plan.start(occurrence_key(at), ScheduleLogKind::Fired, Some(at));
        decided += 1;
    }
    let created_at = due.record.created_at;
    let mut gap: Option<(Millis, Millis, i64)> = None;
    while let Some(at) = plan.write.record.next_at {
        let record = plan.record();
        let jitter = super::jitter_offset(record);
        // Taken at its time plus the jitter; never before.
        if at.saturating_add(jitter) > now || decided >= MAX_PER_WRITE {
            break;
        }
        let spec = record.definition.spec.clone();
        // Decided once: a write whose writer's clock stands earlier decides nothing again.
        let again = record.decided_to.is_some_and(|decided| at <= decided);
        // Late by the time the sweep was to take it; within the window means less than the
        // window late.
        let missed = now - at - jitter >= catchup_window(record, at);
        plan.write.record.next_at = next_after(&spec, at, created_at)?;
        if again {
            continue;
        }
        plan.write.record.decided_to = Some(at);
        if missed {
            gap = Some(match gap {
                None => (at, at, 1),
                Some((first, _, count)) => (first, at, count + 1),
            });
        } else {
            plan.occur(occurrence_key(at), ScheduleLogKind::Fired, at, policy);
            decided += 1;
        }
        // A long gap costs one step per occurrence; bound the work of one write.
        if gap.is_some_and(|(_, _, count)| count >= 100_000) {
            break;
        }
    }
    if let Some((first, last, count)) = gap {
        plan.missed(first, last, count);
    }
    if plan.write.log.is_empty() && plan.write.record.next_at == due.record.next_at {
        return Ok(None);
    }
    Ok(Some(plan.finish()))
}

/// The first occurrence of `record` after `now` and after every occurrence it has decided: where
/// it goes on after a pause, a redefinition or an inactive spell (nothing meanwhile is caught up,
/// nothing decided is decided again).
pub(super) fn next_from(
    record: &ScheduleRecord,
    now: Millis,
) -> Result<Option<Millis>, StoreError> {
    let after = record.decided_to.map_or(now, |decided| decided.max(now));
    next_after(&record.definition.spec, after, record.created_at)
}
