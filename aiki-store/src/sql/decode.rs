//! Decoding the JSON documents the statements return into records.
//!
//! Every statement that returns records builds one JSON document per record in SQL
//! (`json_build_object`, SQLite's `json_object`), so both databases decode through the same
//! serde structs below, and `load_history` is one statement returning five documents.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::{
    CallRef, EntryRecord, EventRecord, Failure, History, Lineage, Namespace, ParentLink, RunId,
    RunRecord, RunStatus, SleepRecord, StoreError, UnknownEntryStatus, WaitSpec,
};

/// A JSON value as stored (compact text, bytes kept exactly).
pub(crate) fn json_text(value: &Value) -> String {
    value.to_string()
}

/// `text` as JSON; `what` names it when it is not (named only then: decoding a history
/// would otherwise format a name for each of its records).
fn parse_json(text: &str, what: impl FnOnce() -> String) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|error| StoreError::Corrupt {
        message: format!("{} is not valid JSON: {error}", what()),
    })
}

fn corrupt(message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        message: message.into(),
    }
}

pub(crate) fn parse_id(text: &str) -> Result<RunId, StoreError> {
    text.parse()
        .map_err(|_| corrupt(format!("`{text}` is not a run id")))
}

/// The run a history belongs to, as its records name it: every record of one history names
/// the same run, so its id is parsed once, not once per record.
struct KnownRun {
    id: RunId,
    text: String,
}

impl KnownRun {
    fn new(id: RunId) -> Self {
        KnownRun {
            id,
            text: id.to_string(),
        }
    }

    /// The run `text` names.
    fn parse(&self, text: &str) -> Result<RunId, StoreError> {
        if text == self.text {
            Ok(self.id)
        } else {
            parse_id(text)
        }
    }
}

pub(crate) fn unsigned<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| corrupt(format!("{what} {value} is out of range")))
}

fn failure(kind: Option<String>, message: Option<String>) -> Option<Failure> {
    kind.map(|kind| Failure::new(kind, message.unwrap_or_default()))
}

/// SQLite has no booleans in JSON documents: accept `0`/`1` as well as `false`/`true`.
fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Flag {
        Bool(bool),
        Int(i64),
    }
    Ok(match Flag::deserialize(deserializer)? {
        Flag::Bool(value) => value,
        Flag::Int(value) => value != 0,
    })
}

/// A stored wait set.
pub(crate) fn wait_set(run: RunId, text: &str) -> Result<WaitSpec, StoreError> {
    serde_json::from_str::<WaitSpec>(text)
        .map_err(|error| corrupt(format!("the wait set of run {run} does not parse: {error}")))
}

/// A row of `aiki_runs`, as a JSON document.
#[derive(Deserialize)]
pub(crate) struct RunRow {
    id: String,
    workflow: String,
    version: String,
    input: String,
    input_hash: String,
    reference_id: Option<String>,
    pool: String,
    status: String,
    revision: i64,
    attempts: i64,
    owner: Option<String>,
    heartbeat_at: Option<i64>,
    due_at: Option<i64>,
    queued_at: Option<i64>,
    output: Option<String>,
    output_fingerprint: Option<String>,
    error_kind: Option<String>,
    error_message: Option<String>,
    #[serde(default)]
    error_address: Option<String>,
    #[serde(default)]
    error_index: Option<i64>,
    parent_run_id: Option<String>,
    parent_address: Option<String>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(default)]
    wait_set: Option<String>,
    #[serde(default)]
    forked_from: Option<String>,
    #[serde(default)]
    lineage_root: Option<String>,
    #[serde(default)]
    pause_requested_at: Option<i64>,
    #[serde(default)]
    pause_requested_by: Option<String>,
    #[serde(default)]
    stale_since: Option<i64>,
    #[serde(default)]
    continued_as: Option<String>,
    #[serde(default)]
    continued_from: Option<String>,
    created_at: i64,
    updated_at: i64,
}

impl RunRow {
    fn into_record(self) -> Result<RunRecord, StoreError> {
        let parent = match (self.parent_run_id, self.parent_address) {
            (Some(run_id), Some(address)) => Some(ParentLink {
                run_id: parse_id(&run_id)?,
                address,
            }),
            _ => None,
        };
        let status: RunStatus = self
            .status
            .parse()
            .map_err(|error| StoreError::Incompatible {
                message: format!("run {}: {error}", self.id),
            })?;
        let lineage = match (self.forked_from, self.lineage_root) {
            (Some(from), Some(root)) => Some(Lineage {
                forked_from: parse_id(&from)?,
                root: parse_id(&root)?,
            }),
            _ => None,
        };
        let wait = match self.wait_set {
            Some(text) if status.is_suspended() => Some(wait_set(parse_id(&self.id)?, &text)?),
            _ => None,
        };
        Ok(RunRecord {
            id: parse_id(&self.id)?,
            namespace: Namespace::new(self.workflow, self.version),
            input: parse_json(&self.input, || format!("the input of run {}", self.id))?,
            input_hash: self.input_hash,
            reference_id: self.reference_id,
            pool: self.pool,
            status,
            revision: unsigned(self.revision, "revision")?,
            attempts: unsigned(self.attempts, "attempts")?,
            owner: self.owner,
            heartbeat_at: self.heartbeat_at,
            due_at: self.due_at,
            queued_at: self.queued_at,
            output: self
                .output
                .map(|text| parse_json(&text, || format!("the output of run {}", self.id)))
                .transpose()?,
            output_fingerprint: self.output_fingerprint,
            error: match (
                failure(self.error_kind, self.error_message),
                self.error_address,
                self.error_index,
            ) {
                (Some(error), Some(address), Some(index)) => {
                    Some(error.call(CallRef::new(address, unsigned(index, "error index")?)))
                }
                (error, ..) => error,
            },
            parent,
            traceparent: self.traceparent,
            wait,
            lineage,
            pause_requested_at: self.pause_requested_at,
            pause_requested_by: self.pause_requested_by,
            claim_stale_since: self.stale_since,
            continued_as: self.continued_as.as_deref().map(parse_id).transpose()?,
            continued_from: self.continued_from.as_deref().map(parse_id).transpose()?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// One entry of a history, as the array of its columns that `load_history` selects, in the
/// order of these fields (serde reads a struct from an array field by field). No run id:
/// every entry of a history is of its run.
#[derive(Deserialize)]
struct EntryCells {
    address: String,
    idx: i64,
    kind: String,
    status: String,
    output: Option<String>,
    fingerprint: Option<String>,
    attempts: i64,
    error_kind: Option<String>,
    error_message: Option<String>,
    retry_at: Option<i64>,
    updated_at: i64,
    /// Absent below the schema that keeps task inputs.
    #[serde(default)]
    input: Option<String>,
}

impl EntryCells {
    fn into_record(self, run: &KnownRun) -> Result<EntryRecord, StoreError> {
        // Named only when something is wrong: a history has thousands of entries.
        let record = || {
            format!(
                "run {}, manifest entry `{}` #{}",
                run.text, self.address, self.idx
            )
        };
        let newer = |error: UnknownEntryStatus| StoreError::Incompatible {
            message: format!("{}: {error}", record()),
        };
        let json = |text: Option<&String>, what: &str| {
            text.map(|text| parse_json(text, || format!("the {what} of {}", record())))
                .transpose()
        };
        let output = json(self.output.as_ref(), "output")?;
        let input = json(self.input.as_ref(), "input")?;
        Ok(EntryRecord {
            run_id: run.id,
            index: unsigned(self.idx, "entry index")?,
            kind: self.kind.parse().map_err(newer)?,
            status: self.status.parse().map_err(newer)?,
            output,
            input,
            address: self.address,
            fingerprint: self.fingerprint,
            attempts: unsigned(self.attempts, "entry attempts")?,
            error: failure(self.error_kind, self.error_message),
            retry_at: self.retry_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(Deserialize)]
struct SleepRow {
    run_id: String,
    name: String,
    idx: i64,
    duration_ms: i64,
    wake_at: i64,
    #[serde(deserialize_with = "flag")]
    cancelled: bool,
}

impl SleepRow {
    fn into_record(self, run: &KnownRun) -> Result<SleepRecord, StoreError> {
        Ok(SleepRecord {
            run_id: run.parse(&self.run_id)?,
            name: self.name,
            index: unsigned(self.idx, "sleep index")?,
            duration_ms: self.duration_ms,
            wake_at: self.wake_at,
            cancelled: self.cancelled,
        })
    }
}

#[derive(Deserialize)]
struct EventRow {
    run_id: String,
    name: String,
    idx: i64,
    data: Option<String>,
    #[serde(deserialize_with = "flag")]
    timed_out: bool,
    reference_id: Option<String>,
    received_at: i64,
    #[serde(default)]
    sent_by: Option<String>,
}

impl EventRow {
    fn into_record(self, run: &KnownRun) -> Result<EventRecord, StoreError> {
        let data = self
            .data
            .as_ref()
            .map(|text| {
                parse_json(text, || {
                    format!(
                        "the data of run {}'s event `{}` #{}",
                        self.run_id, self.name, self.idx
                    )
                })
            })
            .transpose()?;
        Ok(EventRecord {
            run_id: run.parse(&self.run_id)?,
            name: self.name,
            index: unsigned(self.idx, "event index")?,
            data,
            timed_out: self.timed_out,
            reference_id: self.reference_id,
            sent_by: self.sent_by,
            received_at: self.received_at,
        })
    }
}

fn document<'a, T: Deserialize<'a>>(text: &'a str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|error| corrupt(format!("unreadable {what}: {error}")))
}

/// Decodes a run document.
pub(crate) fn run_from_json(text: &str) -> Result<RunRecord, StoreError> {
    document::<RunRow>(text, "run")?.into_record()
}

/// Decodes an event document.
pub(crate) fn event_from_json(text: &str) -> Result<EventRecord, StoreError> {
    let row = document::<EventRow>(text, "event")?;
    let run = KnownRun::new(parse_id(&row.run_id)?);
    row.into_record(&run)
}

/// Decodes the five documents of a history query: the run (`None` if there is none), then
/// JSON arrays of entries, sleeps, events and child runs. Sorts them as
/// [`History`] documents (SQL aggregates have no order).
pub(crate) fn history_from_json(
    id: RunId,
    run: Option<String>,
    entries: Option<String>,
    sleeps: Option<String>,
    events: Option<String>,
    children: Option<String>,
) -> Result<History, StoreError> {
    let run = run_from_json(&run.ok_or_else(|| StoreError::run_not_found(id))?)?;
    let known = KnownRun::new(run.id);
    let array = |text: Option<String>| text.unwrap_or_else(|| "[]".to_owned());
    let mut entries = document::<Vec<EntryCells>>(&array(entries), "entries")?
        .into_iter()
        .map(|row| row.into_record(&known))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sleeps = document::<Vec<SleepRow>>(&array(sleeps), "sleeps")?
        .into_iter()
        .map(|row| row.into_record(&known))
        .collect::<Result<Vec<_>, _>>()?;
    let mut events = document::<Vec<EventRow>>(&array(events), "events")?
        .into_iter()
        .map(|row| row.into_record(&known))
        .collect::<Result<Vec<_>, _>>()?;
    let mut children = document::<Vec<RunRow>>(&array(children), "child runs")?
        .into_iter()
        .map(RunRow::into_record)
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort_by(|a, b| (&a.address, a.index).cmp(&(&b.address, b.index)));
    sleeps.sort_by(|a, b| (&a.name, a.index).cmp(&(&b.name, b.index)));
    events.sort_by(|a, b| (&a.name, a.index).cmp(&(&b.name, b.index)));
    children.sort_by_key(|child| (child.created_at, child.id));
    Ok(History {
        run,
        entries,
        sleeps,
        events,
        children,
    })
}

/// Sorts claimed runs oldest first, as [`ExecutorStore::claim`](crate::ExecutorStore::claim) documents
/// (`RETURNING` has no order).
pub(crate) fn sort_claimed(runs: &mut [RunRecord]) {
    runs.sort_by_key(|run| (run.queued_at.unwrap_or(run.created_at), run.id));
}

/// The error for a write whose revision check failed, from the run's actual revision (`None`
/// when the run does not exist).
pub(crate) fn check_failed(id: RunId, expected: u64, actual: Option<i64>) -> StoreError {
    match actual {
        None => StoreError::run_not_found(id),
        Some(actual) => StoreError::RevisionConflict {
            run_id: id,
            expected,
            actual: u64::try_from(actual).unwrap_or_default(),
        },
    }
}

/// Decodes the ids of `RETURNING id`.
pub(crate) fn parse_ids(ids: &[String]) -> Result<Vec<RunId>, StoreError> {
    ids.iter().map(|id| parse_id(id)).collect()
}

/// What `record_event_slot` returns when its insert wrote nothing: a revision conflict, or
/// the event that already holds the slot.
pub(crate) fn slot_outcome(
    id: RunId,
    expected: u64,
    actual: Option<i64>,
    slot: Option<String>,
) -> Result<EventRecord, StoreError> {
    if actual != Some(revision(expected)) {
        return Err(check_failed(id, expected, actual));
    }
    match slot {
        Some(doc) => event_from_json(&doc),
        None => Err(corrupt(format!(
            "run {id}: the event slot was neither written nor found; the revision check \
             passed, so the slot must be held"
        ))),
    }
}

/// A revision as stored.
pub(crate) fn revision(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Result<Vec<EntryRecord>, StoreError> {
        let run = KnownRun::new(RunId::new());
        document::<Vec<EntryCells>>(text, "entries")?
            .into_iter()
            .map(|cells| cells.into_record(&run))
            .collect()
    }

    #[test]
    fn an_entry_is_read_from_the_array_of_its_columns_with_or_without_its_input() {
        let with_input =
            entries(r#"[["t:ab",2,"task","completed","{\"v\":1}","fp",1,null,null,null,7,"3"]]"#)
                .unwrap();
        let entry = &with_input[0];
        assert_eq!(
            (entry.address.as_str(), entry.index, entry.attempts),
            ("t:ab", 2, 1)
        );
        assert_eq!(entry.output, Some(serde_json::json!({"v": 1})));
        assert_eq!(entry.input, Some(serde_json::json!(3)));
        assert_eq!(entry.fingerprint.as_deref(), Some("fp"));
        assert_eq!(entry.updated_at, 7);
        // A schema before task inputs selects one column fewer.
        let without =
            entries(r#"[["t:ab",0,"task","failed",null,null,3,"boom","it broke",null,7]]"#)
                .unwrap();
        assert_eq!(without[0].input, None);
        let error = without[0].error.as_ref().expect("a failed entry's error");
        assert_eq!(
            (error.kind.as_str(), error.message.as_str()),
            ("boom", "it broke")
        );
    }

    #[test]
    fn an_unreadable_entry_is_named_in_the_error() {
        let error = entries(r#"[["t:ab",4,"task","completed","{nope",null,1,null,null,null,7]]"#)
            .unwrap_err();
        assert!(
            matches!(&error, StoreError::Corrupt { message } if message.contains("manifest entry `t:ab` #4")),
            "{error}"
        );
        let error = entries(r#"[["t:ab",4,"task"]]"#).unwrap_err();
        assert!(matches!(error, StoreError::Corrupt { .. }), "{error}");
    }
}
