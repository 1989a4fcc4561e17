//! The run view: a run, what it is doing in words, everything it recorded, and its timeline.

use aiki_store::{
    EntryKind, EntryRecord, EntryStatus, EventRecord, History, Millis, RunId, RunRecord, RunStatus,
    SleepRecord, StatusChange, WorkerRecord,
};
use serde::Serialize;
use serde_json::Value;

use super::doing::{Seen, doing, retry_command};
use crate::handle::RetryPlan;
use crate::{Client, ClientError};

/// How far back the heartbeats of a run's owner are looked for: as far as a worker's record is
/// kept.
const WORKERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// One run as an operator sees it: the record, one line on what it is doing or waiting on,
/// the command that retries it after a fix (when it failed), the live workers that can run
/// it, what it recorded, and every status change. Its JSON shape is `aiki runs show --format
/// json`'s.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct RunView {
    /// The run.
    pub run: RunRecord,
    /// What it is doing or waiting on, in words: "waiting on event `payment_received`, times
    /// out in 2 h 59 min".
    pub doing: String,
    /// For a failed run: the `aiki runs retry` command its retry plan needs (`None` when no
    /// retry revives it; [`doing`](RunView::doing) then says what to do instead).
    pub retry_command: Option<String>,
    /// The live workers that serve its version and pool.
    pub serving_workers: Vec<String>,
    /// Its task and child-start records, in address order. The JSON adds to each its
    /// [`entry_state`](RunView::entry_state) as `state`.
    pub entries: Vec<EntryRecord>,
    /// Its timers.
    pub sleeps: Vec<SleepRecord>,
    /// The events sent to it.
    pub events: Vec<EventRecord>,
    /// The child runs it started.
    pub children: Vec<RunRecord>,
    /// Every status change, oldest first.
    pub timeline: Vec<StatusChange>,
    /// A failed run's retry plan, when it could be made.
    #[serde(skip)]
    pub retry_plan: Option<RetryPlan>,
}

impl RunView {
    /// Reads run `id`'s view through `client`: its history, timeline, retry plan (when it
    /// failed) and the workers seen lately, judged at the client's clock.
    pub async fn read(client: &Client, id: RunId) -> Result<RunView, ClientError> {
        let history = client.store().load_history(id).await?;
        let plan = match history.run.status {
            // A run that moved on meanwhile has no plan: the line then says the plain command.
            RunStatus::Failed => client.any_run(id).retry_plan().await.ok(),
            _ => None,
        };
        let timeline = client.store().timeline(id).await?;
        let workers = client.live_workers(WORKERS_WITHIN).await?;
        let now = client.clock.now();
        Ok(RunView::new(history, timeline, &workers, plan, now))
    }

    /// The view of what was read: `history`, its `timeline`, the `workers` seen lately, a
    /// failed run's retry `plan`, at `now` (by the clock heartbeats are timed by).
    pub fn new(
        history: History,
        timeline: Vec<StatusChange>,
        workers: &[WorkerRecord],
        plan: Option<RetryPlan>,
        now: Millis,
    ) -> RunView {
        let seen = Seen {
            workers,
            plan: plan.as_ref(),
            now,
        };
        let doing = doing(&history, &seen);
        let serving_workers = seen.serving(&history.run).map(str::to_owned).collect();
        let retry_command = plan
            .as_ref()
            .and_then(|plan| retry_command(history.run.id, plan).ok());
        RunView {
            doing,
            retry_command,
            serving_workers,
            run: history.run,
            entries: history.entries,
            sleeps: history.sleeps,
            events: history.events,
            children: history.children,
            timeline,
            retry_plan: plan,
        }
    }

    /// An entry's state in words: a task call's status (`completed`, `failed`,
    /// `awaiting_retry`, `running`); for a child start, the child run's status (`child failed`),
    /// since the entry itself only records that the child was started (`child started` when the
    /// child's record is not there any more).
    pub fn entry_state(&self, entry: &EntryRecord) -> String {
        let started = entry.kind == EntryKind::Child && entry.status == EntryStatus::Completed;
        if !started {
            return entry.status.as_str().to_owned();
        }
        let child = entry
            .output
            .as_ref()
            .and_then(Value::as_str)
            .and_then(|id| id.parse::<RunId>().ok())
            .and_then(|id| self.children.iter().find(|child| child.id == id));
        match child {
            Some(child) => format!("child {}", child.status),
            None => "child started".to_owned(),
        }
    }

    /// The view as JSON; without `payloads`, the runs' inputs and outputs, the entries'
    /// inputs and outputs and the events' data are left out (a dashboard or a log that must
    /// not show customer data).
    pub fn to_json(&self, payloads: bool) -> Value {
        let mut value = serde_json::to_value(self).expect("BUG: run views serialize");
        if let Some(entries) = value.get_mut("entries").and_then(Value::as_array_mut) {
            for (json, entry) in entries.iter_mut().zip(&self.entries) {
                json["state"] = Value::String(self.entry_state(entry));
            }
        }
        if !payloads {
            for (field, keys) in [
                ("/run", &["input", "output"][..]),
                ("/children", &["input", "output"]),
                ("/entries", &["input", "output"]),
                ("/events", &["data"]),
            ] {
                let Some(found) = value.pointer_mut(field) else {
                    continue;
                };
                // The run is one record; the others are lists of them.
                let records = match found {
                    Value::Array(records) => records.iter_mut().collect(),
                    record => vec![record],
                };
                for record in records.into_iter().filter_map(Value::as_object_mut) {
                    for key in keys {
                        record.remove(*key);
                    }
                }
            }
        }
        value
    }
}
