//! The `Run` context: replay by content address, sleeps, events, children, suspension.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use aiki_store::{
    BoxStore, EntryKind, EntryRecord, EntryStatus, EventRecord, History, Millis, Namespace, NewRun,
    ParentLink, RunId, RunRecord, RunStatus, SleepRecord, StoreError, WaitSpec,
};
use serde_json::Value;

use crate::ConflictPolicy;
use crate::address::{child_address, input_hash};
use crate::clock::Clock;
use crate::error::WorkflowError;
use crate::schema::Schema;
use crate::task::{StateMap, Task, TaskContext};
use crate::workflow::{Event, EventWait, Workflow};

/// Failed attempts whose retry delay is at most this long are retried in process; longer
/// delays suspend the run as `awaiting_retry`.
pub(crate) const INLINE_RETRY_MAX: Duration = Duration::from_millis(5);

/// The context a workflow runs in: the door to its tasks, sleeps, events and children.
///
/// A workflow is re-executed from the top whenever it resumes; `Run` makes every call that
/// already happened return what it returned the first time, found by content address.
#[derive(Clone)]
pub struct Run {
    inner: Arc<Inner>,
}

struct Inner {
    id: RunId,
    namespace: Namespace,
    attempt: u32,
    revision: u64,
    store: BoxStore,
    clock: Arc<dyn Clock>,
    state: Arc<StateMap>,
    replay: Mutex<Replay>,
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("id", &self.inner.id)
            .field("namespace", &self.inner.namespace)
            .field("revision", &self.inner.revision)
            .finish_non_exhaustive()
    }
}

/// A per-name queue of records, read in order.
struct Queue<T> {
    records: Vec<T>,
    next: usize,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            records: Vec::new(),
            next: 0,
        }
    }
}

#[derive(Default)]
struct Replay {
    /// Address → its recorded entries, in index order, and how many this execution consumed.
    manifest: HashMap<String, Queue<EntryRecord>>,
    /// Recorded entries not yet consumed by this execution.
    unconsumed: usize,
    sleeps: HashMap<String, Queue<SleepRecord>>,
    events: HashMap<String, Queue<EventRecord>>,
    children: HashMap<RunId, RunRecord>,
    /// Tasks and store writes in progress: while any runs, the run cannot suspend.
    in_flight: usize,
    /// Durable waits the workflow is blocked on, by id.
    blocks: HashMap<u64, Block>,
    next_block: u64,
    /// An error that fails the run whatever the workflow does with it.
    fatal: Option<WorkflowError>,
    /// Task entries failed for good (see [`Run::failed_tasks`]).
    failed_tasks: Vec<EntryRecord>,
}

/// A durable wait: what a suspended run waits for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Block {
    Sleep {
        wake_at: Millis,
    },
    Retry {
        at: Millis,
    },
    Event {
        name: String,
        index: u32,
        deadline: Option<Millis>,
    },
    Child {
        id: RunId,
        deadline: Option<Millis>,
    },
}

/// How a run suspends: computed from its blocks.
#[derive(Debug, PartialEq)]
pub(crate) struct Suspension {
    pub(crate) status: RunStatus,
    pub(crate) due_at: Option<Millis>,
    pub(crate) wait: WaitSpec,
}

enum Slot {
    Recorded(EntryRecord),
    Fresh(u32),
}

/// What a durable sleep ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SleepOutcome {
    /// `true` when `wakeup()` ended the sleep early.
    pub cancelled: bool,
}

impl Run {
    pub(crate) fn from_history(
        history: History,
        store: BoxStore,
        clock: Arc<dyn Clock>,
        state: Arc<StateMap>,
    ) -> Run {
        let mut replay = Replay::default();
        for entry in history.entries {
            replay.unconsumed += 1;
            if entry.status == EntryStatus::Failed && entry.kind == EntryKind::Task {
                replay.failed_tasks.push(entry.clone());
            }
            replay
                .manifest
                .entry(entry.address.clone())
                .or_default()
                .records
                .push(entry);
        }
        for queue in replay.manifest.values_mut() {
            queue.records.sort_by_key(|entry| entry.index);
        }
        for sleep in history.sleeps {
            replay
                .sleeps
                .entry(sleep.name.clone())
                .or_default()
                .records
                .push(sleep);
        }
        for queue in replay.sleeps.values_mut() {
            queue.records.sort_by_key(|sleep| sleep.index);
        }
        for event in history.events {
            replay
                .events
                .entry(event.name.clone())
                .or_default()
                .records
                .push(event);
        }
        for queue in replay.events.values_mut() {
            queue.records.sort_by_key(|event| event.index);
        }
        replay.children = history
            .children
            .into_iter()
            .map(|child| (child.id, child))
            .collect();
        Run {
            inner: Arc::new(Inner {
                id: history.run.id,
                namespace: history.run.namespace.clone(),
                attempt: history.run.attempts,
                revision: history.run.revision,
                store,
                clock,
                state,
                replay: Mutex::new(replay),
            }),
        }
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.inner.id
    }

    /// The workflow version the run is pinned to.
    pub fn namespace(&self) -> &Namespace {
        &self.inner.namespace
    }

    /// The workflow attempt being executed, from 1.
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// The time now, from the runtime's clock (a manual clock in tests). It is not recorded:
    /// a value that must be the same on replay belongs in a task's output.
    pub fn now(&self) -> Millis {
        self.inner.clock.now()
    }

    pub(crate) fn revision(&self) -> u64 {
        self.inner.revision
    }

    fn replay(&self) -> MutexGuard<'_, Replay> {
        self.inner
            .replay
            .lock()
            .expect("BUG: replay state poisoned")
    }

    /// The error that fails the run whatever the workflow returned, if any.
    pub(crate) fn take_fatal(&self) -> Option<WorkflowError> {
        self.replay().fatal.take()
    }

    fn check_fatal(&self) -> Result<(), WorkflowError> {
        match &self.replay().fatal {
            None => Ok(()),
            Some(fatal) => Err(WorkflowError::failed(format!(
                "the run is already failing: {fatal}"
            ))),
        }
    }

    /// Records an error that fails the run, and returns it for the caller to propagate.
    fn fail_fatally(&self, error: WorkflowError) -> WorkflowError {
        let mut replay = self.replay();
        self.record_fatal(&mut replay, error)
    }

    /// Keeps the first fatal error for the executor (with its kind) and gives the workflow an
    /// equal copy, so that a workflow swallowing it changes nothing.
    fn record_fatal(&self, replay: &mut Replay, error: WorkflowError) -> WorkflowError {
        let copy = match &error {
            WorkflowError::NonDeterminism {
                new_address,
                unconsumed,
            } => WorkflowError::NonDeterminism {
                new_address: new_address.clone(),
                unconsumed: unconsumed.clone(),
            },
            WorkflowError::OutputSchemaMismatch {
                what,
                address,
                mismatch,
            } => WorkflowError::OutputSchemaMismatch {
                what: what.clone(),
                address: address.clone(),
                mismatch: mismatch.clone(),
            },
            other => WorkflowError::failed(other.to_string()),
        };
        if replay.fatal.is_none() {
            replay.fatal = Some(error);
        }
        copy
    }

    /// Takes the next recorded entry at `address`, or the index a fresh call gets there after
    /// the non-determinism check: a fresh call while recorded entries remain unconsumed fails
    /// before anything runs.
    fn take_slot(&self, address: &str) -> Result<Slot, WorkflowError> {
        let mut replay = self.replay();
        let replay = &mut *replay;
        let queue = replay.manifest.entry(address.to_owned()).or_default();
        if let Some(entry) = queue.records.get(queue.next).cloned() {
            queue.next += 1;
            replay.unconsumed -= 1;
            return Ok(Slot::Recorded(entry));
        }
        let index = queue.records.len() as u32;
        if replay.unconsumed > 0 {
            let mut unconsumed: Vec<String> = replay
                .manifest
                .iter()
                .flat_map(|(address, queue)| {
                    queue.records[queue.next.min(queue.records.len())..]
                        .iter()
                        .map(move |_| address.clone())
                })
                .collect();
            unconsumed.sort();
            let error = WorkflowError::NonDeterminism {
                new_address: address.to_owned(),
                unconsumed,
            };
            return Err(self.record_fatal(replay, error));
        }
        // Reserve the slot, so that a concurrent call with the same address gets the next one.
        queue
            .records
            .push(placeholder(self.inner.id, address, index));
        queue.next += 1;
        Ok(Slot::Fresh(index))
    }

    /// A store write made by this executor. Transient errors are retried with back-off; a
    /// revision conflict (or an outage that outlasts the retries) loses the run: the error is
    /// fatal and nothing more is written.
    pub(crate) async fn write<F, Fut, T>(&self, op: F) -> Result<T, WorkflowError>
    where
        F: Fn(BoxStore) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut delay = Duration::from_millis(50);
        let mut attempt = 1;
        loop {
            match op(self.inner.store.clone()).await {
                Ok(value) => return Ok(value),
                Err(error) if error.is_transient() && attempt < 8 => {
                    tracing::warn!(run_id = %self.inner.id, %error, "store write failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    attempt += 1;
                }
                Err(error) => return Err(self.fail_fatally(WorkflowError::Lost(error))),
            }
        }
    }

    async fn put_entry(&self, entry: EntryRecord) -> Result<(), WorkflowError> {
        let revision = self.inner.revision;
        let failed = (entry.status == EntryStatus::Failed).then(|| entry.clone());
        self.write(move |store| {
            let entry = entry.clone();
            async move { store.put_entry(revision, entry).await }
        })
        .await?;
        if let Some(failed) = failed {
            self.replay().failed_tasks.push(failed);
        }
        Ok(())
    }

    /// The task entries that failed for good, recorded earlier or in this execution: what a
    /// workflow retry runs again.
    pub(crate) fn failed_tasks(&self) -> Vec<EntryRecord> {
        self.replay().failed_tasks.clone()
    }

    /// Blocks the workflow on a durable wait, forever: the executor drops the workflow future
    /// when only such waits remain, and re-executes the workflow when one is satisfied.
    fn block(&self, block: Block) -> Blocked {
        let mut replay = self.replay();
        let id = replay.next_block;
        replay.next_block += 1;
        replay.blocks.insert(id, block);
        Blocked {
            run: self.clone(),
            id,
        }
    }

    /// `Some` when the workflow waits only on durable things: suspend it.
    pub(crate) fn suspension(&self) -> Option<Suspension> {
        let replay = self.replay();
        if replay.in_flight > 0 || replay.blocks.is_empty() {
            return None;
        }
        let mut status = RunStatus::Sleeping;
        let mut due_at: Option<Millis> = None;
        let mut wait = WaitSpec::default();
        let mut earliest = |at: Millis| due_at = Some(due_at.map_or(at, |due| due.min(at)));
        let rank = |status: RunStatus| match status {
            RunStatus::AwaitingChildWorkflow => 3,
            RunStatus::AwaitingEvent => 2,
            RunStatus::AwaitingRetry => 1,
            _ => 0,
        };
        let mut blocks: Vec<&Block> = replay.blocks.values().collect();
        blocks.sort_by_key(|block| format!("{block:?}"));
        for block in blocks {
            let block_status = match block {
                Block::Sleep { wake_at } => {
                    earliest(*wake_at);
                    RunStatus::Sleeping
                }
                Block::Retry { at } => {
                    earliest(*at);
                    RunStatus::AwaitingRetry
                }
                Block::Event {
                    name,
                    index,
                    deadline,
                } => {
                    deadline.map(&mut earliest);
                    wait.events.push((name.clone(), *index));
                    RunStatus::AwaitingEvent
                }
                Block::Child { id, deadline } => {
                    deadline.map(&mut earliest);
                    wait.children.push(*id);
                    RunStatus::AwaitingChildWorkflow
                }
            };
            if rank(block_status) > rank(status) {
                status = block_status;
            }
        }
        Some(Suspension {
            status,
            due_at,
            wait,
        })
    }

    fn in_flight(&self) -> InFlight {
        self.replay().in_flight += 1;
        InFlight { run: self.clone() }
    }

    fn context(&self, task: &'static str, address: &str, attempt: u32) -> TaskContext {
        TaskContext {
            run_id: self.inner.id,
            task,
            address: Arc::from(address),
            attempt,
            state: self.inner.state.clone(),
        }
    }

    pub(crate) async fn call_task<T: Task>(
        &self,
        task: &T,
        input: T::Input,
    ) -> Result<T::Output, WorkflowError> {
        self.check_fatal()?;
        let address = task.address(&input)?.into_string();
        let what = || format!("task `{}`", T::NAME);
        let (index, failed_attempts) = match self.take_slot(&address)? {
            Slot::Fresh(index) => (index, 0),
            Slot::Recorded(entry) => match entry.status {
                EntryStatus::Completed => {
                    return self.decode_recorded::<T::Output>(
                        what(),
                        &address,
                        entry.output.unwrap_or(Value::Null),
                        entry.fingerprint.as_deref(),
                    );
                }
                EntryStatus::Failed => {
                    let error = entry.error.unwrap_or_else(|| {
                        aiki_store::Failure::new("task_failed", "no error recorded")
                    });
                    return Err(WorkflowError::TaskFailed {
                        task: T::NAME.to_owned(),
                        address,
                        attempts: entry.attempts,
                        interrupted: error.kind == "interrupted",
                        message: error.message,
                    });
                }
                EntryStatus::AwaitingRetry => {
                    let at = entry.retry_at.unwrap_or(Millis::MIN);
                    if at > self.now() {
                        let blocked = self.block(Block::Retry { at });
                        match blocked.await {}
                    }
                    (entry.index, entry.attempts)
                }
                EntryStatus::Running => {
                    // The executor died mid-attempt: that attempt failed.
                    if task.retry().delay_after(entry.attempts).is_none() {
                        let error = aiki_store::Failure::new(
                            "interrupted",
                            format!(
                                "attempt {} was interrupted (its executor stopped) and the \
                                 retry policy allows no other",
                                entry.attempts
                            ),
                        );
                        self.put_entry(EntryRecord {
                            status: EntryStatus::Failed,
                            error: Some(error.clone()),
                            updated_at: self.now(),
                            ..entry.clone()
                        })
                        .await?;
                        return Err(WorkflowError::TaskFailed {
                            task: T::NAME.to_owned(),
                            address,
                            attempts: entry.attempts,
                            interrupted: true,
                            message: error.message,
                        });
                    }
                    (entry.index, entry.attempts)
                }
            },
        };
        self.execute_task(task, input, address, index, failed_attempts)
            .await
    }

    async fn execute_task<T: Task>(
        &self,
        task: &T,
        input: T::Input,
        address: String,
        index: u32,
        mut failed_attempts: u32,
    ) -> Result<T::Output, WorkflowError> {
        let policy = task.retry();
        let schema = task.output_schema();
        let in_flight = self.in_flight();
        let retry_input = if policy.max_attempts() > 1 {
            Some(serde_json::to_value(&input).map_err(|error| {
                WorkflowError::InputNotSerializable {
                    what: format!("input of task `{}`", T::NAME),
                    message: error.to_string(),
                }
            })?)
        } else {
            None
        };
        let mut input = Some(input);
        let entry = |status, attempts, now| EntryRecord {
            run_id: self.inner.id,
            address: address.clone(),
            index,
            kind: EntryKind::Task,
            status,
            output: None,
            fingerprint: None,
            attempts,
            error: None,
            retry_at: None,
            updated_at: now,
        };
        loop {
            let attempt = failed_attempts + 1;
            self.put_entry(entry(EntryStatus::Running, attempt, self.now()))
                .await?;
            let this_input = match input.take() {
                Some(input) => input,
                None => serde_json::from_value(retry_input.clone().unwrap_or(Value::Null))
                    .map_err(|error| WorkflowError::InputNotSerializable {
                        what: format!("input of task `{}`", T::NAME),
                        message: error.to_string(),
                    })?,
            };
            let result = task
                .execute(this_input, self.context(T::NAME, &address, attempt))
                .await;
            self.check_fatal()?;
            match result {
                Ok(output) => {
                    let json = serde_json::to_value(&output).map_err(|error| {
                        WorkflowError::InputNotSerializable {
                            what: format!("output of task `{}`", T::NAME),
                            message: error.to_string(),
                        }
                    })?;
                    self.put_entry(EntryRecord {
                        output: Some(json),
                        fingerprint: Some(schema.fingerprint().to_owned()),
                        ..entry(EntryStatus::Completed, attempt, self.now())
                    })
                    .await?;
                    return Ok(output);
                }
                Err(error) => {
                    failed_attempts = attempt;
                    let failure = aiki_store::Failure::new("task_failed", error.message());
                    let delay = if error.is_retryable() {
                        policy.delay_after(attempt)
                    } else {
                        None
                    };
                    match delay {
                        None => {
                            self.put_entry(EntryRecord {
                                error: Some(failure),
                                ..entry(EntryStatus::Failed, attempt, self.now())
                            })
                            .await?;
                            return Err(WorkflowError::TaskFailed {
                                task: T::NAME.to_owned(),
                                address,
                                attempts: attempt,
                                message: error.message().to_owned(),
                                interrupted: false,
                            });
                        }
                        Some(delay) if delay <= INLINE_RETRY_MAX => {
                            tracing::debug!(
                                task = T::NAME,
                                attempt,
                                "task failed; retrying in process"
                            );
                            tokio::time::sleep(delay).await;
                        }
                        Some(delay) => {
                            let at = self.now() + delay.as_millis() as Millis;
                            self.put_entry(EntryRecord {
                                error: Some(failure),
                                retry_at: Some(at),
                                ..entry(EntryStatus::AwaitingRetry, attempt, self.now())
                            })
                            .await?;
                            drop(in_flight);
                            let blocked = self.block(Block::Retry { at });
                            match blocked.await {}
                        }
                    }
                }
            }
        }
    }

    /// Decodes a recorded output: trusted when its fingerprint is the current schema's,
    /// validated otherwise. A mismatch fails the run.
    fn decode_recorded<O: serde::de::DeserializeOwned + schemars::JsonSchema + 'static>(
        &self,
        what: String,
        address: &str,
        output: Value,
        fingerprint: Option<&str>,
    ) -> Result<O, WorkflowError> {
        let schema = Schema::of::<O>();
        let checked = schema
            .check_recorded(&output, fingerprint)
            .and_then(|()| serde_json::from_value::<O>(output).map_err(|error| error.to_string()));
        checked.map_err(|mismatch| {
            self.fail_fatally(WorkflowError::OutputSchemaMismatch {
                what,
                address: address.to_owned(),
                mismatch,
            })
        })
    }

    /// A durable sleep named `name`. The k-th sleep of a name reads the k-th recorded sleep of
    /// that name: a sleep recorded for a shorter duration sleeps the difference more (once); one
    /// recorded for a longer duration ends at once. `wakeup()` ends it early:
    /// `cancelled = true`.
    ///
    /// Sleeps with the same name share a queue: give different sleeps different names.
    pub async fn sleep(
        &self,
        name: &str,
        duration: Duration,
    ) -> Result<SleepOutcome, WorkflowError> {
        self.check_fatal()?;
        let wake_at = self.sleep_until(name, duration).await?;
        match wake_at {
            SleepState::Done { cancelled } => Ok(SleepOutcome { cancelled }),
            SleepState::Until(wake_at) => match self.block(Block::Sleep { wake_at }).await {},
        }
    }

    /// Reads or records the next sleep of `name`, and says when it ends.
    async fn sleep_until(
        &self,
        name: &str,
        duration: Duration,
    ) -> Result<SleepState, WorkflowError> {
        let wanted = duration.as_millis() as i64;
        let now = self.now();
        let (index, recorded) = {
            let mut replay = self.replay();
            let queue = replay.sleeps.entry(name.to_owned()).or_default();
            let index = queue.next as u32;
            queue.next += 1;
            (index, queue.records.get(index as usize).cloned())
        };
        let record = match recorded {
            Some(record) if record.cancelled => return Ok(SleepState::Done { cancelled: true }),
            Some(record) if wanted <= record.duration_ms => {
                let ends = record.wake_at - (record.duration_ms - wanted);
                return Ok(if ends <= now {
                    SleepState::Done { cancelled: false }
                } else {
                    SleepState::Until(ends)
                });
            }
            // Longer than recorded: sleep the difference more, folded into the record.
            Some(record) => SleepRecord {
                duration_ms: wanted,
                wake_at: record.wake_at.max(now) + (wanted - record.duration_ms),
                ..record
            },
            None => SleepRecord {
                run_id: self.inner.id,
                name: name.to_owned(),
                index,
                duration_ms: wanted,
                wake_at: now + wanted,
                cancelled: false,
            },
        };
        let wake_at = record.wake_at;
        {
            let mut replay = self.replay();
            let queue = replay.sleeps.entry(name.to_owned()).or_default();
            if (index as usize) < queue.records.len() {
                queue.records[index as usize] = record.clone();
            } else {
                queue.records.push(record.clone());
            }
        }
        let revision = self.inner.revision;
        let _in_flight = self.in_flight();
        self.write(move |store| {
            let record = record.clone();
            async move { store.put_sleep(revision, record).await }
        })
        .await?;
        Ok(if wake_at <= now {
            SleepState::Done { cancelled: false }
        } else {
            SleepState::Until(wake_at)
        })
    }

    /// Waits for the next event of type `E`.
    pub fn event<E: Event>(&self) -> EventWait<'_, E> {
        EventWait {
            run: self,
            _event: PhantomData,
        }
    }

    /// Reads the next event of `name` (or its recorded timeout: `None`), or blocks.
    pub(crate) async fn wait_event(
        &self,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<Value>, WorkflowError> {
        self.check_fatal()?;
        let (index, recorded) = self.next_event_slot(name);
        if let Some(record) = recorded {
            return Ok(record.data.filter(|_| !record.timed_out));
        }
        let deadline = match timeout {
            None => None,
            Some(timeout) => {
                match self
                    .sleep_until(&format!("\u{1}event:{name}"), timeout)
                    .await?
                {
                    SleepState::Until(deadline) => Some(deadline),
                    SleepState::Done { .. } => {
                        let record = self.record_timeout(name, index).await?;
                        return Ok(record.data.filter(|_| !record.timed_out));
                    }
                }
            }
        };
        match self
            .block(Block::Event {
                name: name.to_owned(),
                index,
                deadline,
            })
            .await {}
    }

    fn next_event_slot(&self, name: &str) -> (u32, Option<EventRecord>) {
        let mut replay = self.replay();
        let queue = replay.events.entry(name.to_owned()).or_default();
        let index = queue.next as u32;
        queue.next += 1;
        (
            index,
            queue
                .records
                .iter()
                .find(|event| event.index == index)
                .cloned(),
        )
    }

    async fn record_timeout(&self, name: &str, index: u32) -> Result<EventRecord, WorkflowError> {
        let revision = self.inner.revision;
        let id = self.inner.id;
        let now = self.now();
        let _in_flight = self.in_flight();
        self.write(move |store| {
            let name = name.to_owned();
            async move {
                store
                    .record_event_timeout(id, revision, &name, index, now)
                    .await
            }
        })
        .await
    }

    /// Starts a child workflow run (a manifest entry, addressed
    /// `name:version:reference-id-or-input-hash`).
    pub fn child<W: Workflow>(&self, input: W::Input) -> ChildStart<'_, W> {
        ChildStart {
            run: self,
            input,
            reference_id: None,
            conflict_policy: ConflictPolicy::Error,
            _workflow: PhantomData,
        }
    }

    async fn start_child<W: Workflow>(
        &self,
        input: W::Input,
        reference_id: Option<String>,
        policy: ConflictPolicy,
    ) -> Result<ChildRun<W>, WorkflowError> {
        self.check_fatal()?;
        let hash = input_hash(&input)?;
        let key = reference_id.clone().unwrap_or_else(|| hash.clone());
        let address = child_address(W::NAME, W::VERSION, &key);
        let child = match self.take_slot(&address)? {
            Slot::Recorded(entry) => {
                let id = entry
                    .output
                    .as_ref()
                    .and_then(Value::as_str)
                    .and_then(|id| id.parse::<RunId>().ok())
                    .ok_or_else(|| {
                        self.fail_fatally(WorkflowError::OutputSchemaMismatch {
                            what: format!("child workflow `{}`", W::namespace()),
                            address: address.clone(),
                            mismatch: "the recorded child start holds no run id".to_owned(),
                        })
                    })?;
                self.child_record(id).await?
            }
            Slot::Fresh(index) => {
                let now = self.now();
                let new = NewRun {
                    id: RunId::new(),
                    namespace: W::namespace(),
                    input: serde_json::to_value(&input).map_err(|error| {
                        WorkflowError::InputNotSerializable {
                            what: format!("input of child workflow `{}`", W::namespace()),
                            message: error.to_string(),
                        }
                    })?,
                    input_hash: hash.clone(),
                    reference_id: reference_id.clone(),
                    pool: "default".to_owned(),
                    status: RunStatus::Queued,
                    due_at: None,
                    parent: Some(ParentLink {
                        run_id: self.inner.id,
                        address: address.clone(),
                    }),
                    now,
                };
                let entry = EntryRecord {
                    status: EntryStatus::Completed,
                    attempts: 1,
                    kind: EntryKind::Child,
                    updated_at: now,
                    ..placeholder(self.inner.id, &address, index)
                };
                let revision = self.inner.revision;
                let _in_flight = self.in_flight();
                let child = self
                    .write(move |store| {
                        let (entry, new) = (entry.clone(), new.clone());
                        async move { store.start_child(revision, entry, new).await }
                    })
                    .await?;
                crate::wake::work_available();
                self.replay().children.insert(child.id, child.clone());
                child
            }
        };
        if let (Some(reference_id), ConflictPolicy::Error) = (reference_id, policy)
            && child.input_hash != hash
        {
            return Err(WorkflowError::ChildConflict {
                namespace: W::namespace().to_string(),
                reference_id,
            });
        }
        Ok(ChildRun {
            run: self.clone(),
            id: child.id,
            address,
            _workflow: PhantomData,
        })
    }

    /// A child's record: from the history, or (for a child started elsewhere and shared by
    /// reference id) from the store.
    async fn child_record(&self, id: RunId) -> Result<RunRecord, WorkflowError> {
        if let Some(child) = self.replay().children.get(&id).cloned() {
            return Ok(child);
        }
        let _in_flight = self.in_flight();
        let child = self
            .write(move |store| async move { store.get_run(id).await })
            .await?;
        self.replay().children.insert(id, child.clone());
        Ok(child)
    }

    async fn wait_child<W: Workflow>(
        &self,
        id: RunId,
        address: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<W::Output>, WorkflowError> {
        self.check_fatal()?;
        let timer = format!("\u{1}child:{address}");
        let timeout_slot = timeout.map(|_| self.next_event_slot(&timer));
        if let Some((_, Some(record))) = &timeout_slot
            && record.timed_out
        {
            return Ok(None);
        }
        let child = self.child_record(id).await?;
        match child.status {
            RunStatus::Completed => {
                return self
                    .decode_recorded::<W::Output>(
                        format!("child workflow `{}`", W::namespace()),
                        address,
                        child.output.unwrap_or(Value::Null),
                        child.output_fingerprint.as_deref(),
                    )
                    .map(Some);
            }
            status if status.is_terminal() => {
                return Err(WorkflowError::ChildFailed {
                    namespace: W::namespace().to_string(),
                    run_id: id,
                    status,
                    message: child
                        .error
                        .map(|failure| failure.message)
                        .unwrap_or_else(|| "cancelled".to_owned()),
                });
            }
            _ => {}
        }
        let deadline = match (timeout, timeout_slot) {
            (Some(timeout), Some((index, _))) => match self.sleep_until(&timer, timeout).await? {
                SleepState::Until(deadline) => Some(deadline),
                SleepState::Done { .. } => {
                    self.record_timeout(&timer, index).await?;
                    return Ok(None);
                }
            },
            _ => None,
        };
        match self.block(Block::Child { id, deadline }).await {}
    }
}

fn placeholder(run_id: RunId, address: &str, index: u32) -> EntryRecord {
    EntryRecord {
        run_id,
        address: address.to_owned(),
        index,
        kind: EntryKind::Task,
        status: EntryStatus::Running,
        output: None,
        fingerprint: None,
        attempts: 0,
        error: None,
        retry_at: None,
        updated_at: 0,
    }
}

enum SleepState {
    Done { cancelled: bool },
    Until(Millis),
}

/// Counts a task or store write in progress; the run cannot suspend while one exists.
struct InFlight {
    run: Run,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.run.replay().in_flight -= 1;
    }
}

/// A durable wait that never completes in this execution; dropping it unregisters it.
struct Blocked {
    run: Run,
    id: u64,
}

impl Future for Blocked {
    type Output = std::convert::Infallible;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        if let Ok(mut replay) = self.run.inner.replay.lock() {
            replay.blocks.remove(&self.id);
        }
    }
}

/// A child-workflow start being configured; `.await` it (or call [`start`](ChildStart::start)).
///
/// ```
/// # use aiki::{Run, WorkflowError};
/// #[aiki::workflow(name = "square", version = "1")]
/// async fn square(run: &Run, n: u64) -> Result<u64, WorkflowError> {
///     Ok(n * n)
/// }
///
/// #[aiki::workflow(name = "sum-of-squares", version = "1")]
/// async fn sum_of_squares(run: &Run, n: u64) -> Result<u64, WorkflowError> {
///     let mut children = Vec::new();
///     for i in 1..=n {
///         children.push(run.child::<Square>(i).reference_id(format!("square-{i}")).await?);
///     }
///     let mut sum = 0;
///     for child in &children {
///         sum += child.wait().await?;
///     }
///     Ok(sum)
/// }
/// ```
#[derive(Debug)]
pub struct ChildStart<'r, W: Workflow> {
    run: &'r Run,
    input: W::Input,
    reference_id: Option<String>,
    conflict_policy: ConflictPolicy,
    _workflow: PhantomData<fn() -> W>,
}

impl<'r, W: Workflow> ChildStart<'r, W> {
    /// Addresses the child by this id instead of its input hash.
    pub fn reference_id(mut self, reference_id: impl Into<String>) -> Self {
        self.reference_id = Some(reference_id.into());
        self
    }

    /// What to do when the reference id already names a run with another input.
    pub fn conflict_policy(mut self, policy: ConflictPolicy) -> Self {
        self.conflict_policy = policy;
        self
    }

    /// Starts the child (or finds the one recorded).
    pub async fn start(self) -> Result<ChildRun<W>, WorkflowError> {
        self.run
            .start_child::<W>(self.input, self.reference_id, self.conflict_policy)
            .await
    }
}

impl<'r, W: Workflow> std::future::IntoFuture for ChildStart<'r, W> {
    type Output = Result<ChildRun<W>, WorkflowError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'r>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.start())
    }
}

/// A child run started from a workflow.
#[derive(Debug)]
pub struct ChildRun<W: Workflow> {
    run: Run,
    id: RunId,
    address: String,
    _workflow: PhantomData<fn() -> W>,
}

impl<W: Workflow> ChildRun<W> {
    /// The child's run id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// Waits for the child to end: its output (validated like a task's), or
    /// [`WorkflowError::ChildFailed`] when it failed or was cancelled.
    pub async fn wait(&self) -> Result<W::Output, WorkflowError> {
        let output = self
            .run
            .wait_child::<W>(self.id, &self.address, None)
            .await?;
        Ok(output.expect("BUG: a child wait without timeout returned a timeout"))
    }

    /// As [`wait`](ChildRun::wait), giving up after `timeout` with `Ok(None)` (recorded, so
    /// replay returns it again).
    pub async fn wait_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<W::Output>, WorkflowError> {
        self.run
            .wait_child::<W>(self.id, &self.address, Some(timeout))
            .await
    }
}
