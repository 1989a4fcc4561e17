//! The parameter lists of the statements that write whole records, written once.

use crate::{
    EntryRecord, EventRecord, Millis, NewEvent, NewRun, RunId, RunStatus, SleepRecord, Transition,
    WaitSpec,
};

use super::statements::sources_of;

use super::decode::{json_text, revision};
use super::dialect::{Param, params};

/// The parameters of `Statements::insert_run`.
pub(crate) fn insert_run(run: &NewRun) -> [Param<'_>; 18] {
    params![
        run.id,
        run.namespace.to_string(),
        &run.namespace.workflow,
        &run.namespace.version,
        json_text(&run.input),
        &run.input_hash,
        &run.reference_id,
        &run.pool,
        run.status.as_str(),
        run.due_at,
        (run.status == RunStatus::Queued).then_some(run.now),
        run.parent.as_ref().map(|parent| parent.run_id.to_string()),
        run.parent.as_ref().map(|parent| parent.address.as_str()),
        run.now,
        &run.traceparent,
        run.lineage.map(|lineage| lineage.forked_from.to_string()),
        run.lineage.map(|lineage| lineage.root.to_string()),
        &run.actor,
    ]
}

/// The parameters of `Statements::select_by_reference` for a run that found its reference id
/// taken.
pub(crate) fn by_reference(run: &NewRun) -> [Param<'_>; 2] {
    params![run.namespace.to_string(), &run.reference_id]
}

/// The parameters of `Statements::insert_slot`: `slot` with its data as JSON text.
pub(crate) fn event_slot<'a>(
    slot: &'a EventRecord,
    data: Option<&'a str>,
    expected: u64,
) -> [Param<'a>; 9] {
    params![
        slot.run_id,
        slot.name.as_str(),
        i64::from(slot.index),
        data,
        slot.timed_out,
        &slot.reference_id,
        slot.received_at,
        revision(expected),
        &slot.sent_by,
    ]
}

/// The parameters of `Statements::put_sleep`: `from` as `ExecutorStore::put_sleep` reads it.
pub(crate) fn put_sleep(
    sleep: &SleepRecord,
    expected: u64,
    from: Option<Millis>,
) -> [Param<'_>; 8] {
    params![
        sleep.run_id,
        sleep.name.as_str(),
        i64::from(sleep.index),
        sleep.duration_ms,
        sleep.wake_at,
        sleep.cancelled,
        revision(expected),
        from,
    ]
}

/// The parameters of `Statements::upsert_entry`.
pub(crate) fn upsert_entry(expected: u64, entry: &EntryRecord) -> [Param<'_>; 14] {
    params![
        entry.run_id,
        entry.address.as_str(),
        i64::from(entry.index),
        entry.kind.as_str(),
        entry.status.as_str(),
        entry.output.as_ref().map(json_text),
        &entry.fingerprint,
        i64::from(entry.attempts),
        entry.error.as_ref().map(|error| error.kind.as_str()),
        entry.error.as_ref().map(|error| error.message.as_str()),
        entry.retry_at,
        entry.updated_at,
        revision(expected),
        entry.input.as_ref().map(json_text),
    ]
}

/// The parameters of a dialect's transition statement: `$1` id, `$2` expected revision, `$3`
/// the new status, `$4` now, `$5` due time, `$6` whether an output is written, `$7` output,
/// `$8` its fingerprint, `$9`/`$10` error kind and message, `$11` attempts, `$12` whether it
/// is a suspension, `$13`/`$14` the awaited events' names and indexes, `$15` the awaited
/// children, `$16` the statuses it may move from, `$17` whether pending sleeps are cancelled,
/// `$18` the wait set to store (a suspension's; `NULL` clears it), `$19` whether the run waits
/// for all of its children, `$20`/`$21` the failed call's address and index, `$22` the
/// operator making the change.
pub(crate) fn transition(id: RunId, expected: u64, transition: &Transition) -> Vec<Param<'_>> {
    let to = transition.to;
    // A suspension without a wait set stores none, and wakes on anything (as before).
    let stored = transition
        .wait
        .as_ref()
        .filter(|_| to.is_suspended())
        .map(WaitSpec::to_json);
    let wait = transition.wait.clone().unwrap_or_default();
    let all_children = wait.all_children && !wait.children.is_empty();
    let (names, indexes): (Vec<String>, Vec<i64>) = wait
        .events
        .into_iter()
        .map(|event| (event.name, i64::from(event.index)))
        .unzip();
    let children = wait
        .children
        .iter()
        .map(|child| child.id.to_string())
        .collect();
    let mut params = Vec::from(params![
        id,
        revision(expected),
        to.as_str(),
        transition.now,
        transition.due_at,
        transition.output.is_some(),
        transition.output.as_ref().map(json_text),
        &transition.output_fingerprint,
        transition.error.as_ref().map(|error| error.kind.as_str()),
        transition
            .error
            .as_ref()
            .map(|error| error.message.as_str()),
        transition.attempts.map(i64::from),
        to.is_suspended(),
    ]);
    params.extend([
        Param::List(names),
        Param::IntList(indexes),
        Param::List(children),
        Param::List(sources_of(to)),
        Param::Bool(transition.cancel_sleeps),
        Param::Owned(stored),
        Param::Bool(all_children),
    ]);
    let call = transition
        .error
        .as_ref()
        .and_then(|error| error.call.as_ref());
    params.extend(params![
        call.map(|call| call.address.as_str()),
        call.map(|call| i64::from(call.index)),
        &transition.actor,
    ]);
    params
}

/// The parameters of `statements::insert_event` and `statements::wake_for_event`; `data` is
/// the payload's text, `wakes` whether the run awaits an event.
pub(crate) fn event<'a>(event: &'a NewEvent, data: &'a str, wakes: bool) -> [Param<'a>; 7] {
    params![
        event.run_id,
        event.name.as_str(),
        data,
        &event.reference_id,
        event.now,
        &event.actor,
        wakes,
    ]
}
