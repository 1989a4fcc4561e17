//! The `Run` context: replay by content address, sleeps, events, children, suspension.
//!
//! This module holds `Run` itself and its write path; each kind of durable step lives in a
//! module of its own: the replay `manifest` (and its one rule), `task_call`, `sleep`, `event`,
//! `child`, and `suspend` (what a run waiting only on durable things waits for).

mod child;
mod continuation;
mod drain;
mod event;
mod manifest;
mod outcome;
mod probe;
mod sleep;
mod suspend;
mod task_call;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use outcome::{holds_outcome_of, observed as observed_outcomes};
pub(crate) use probe::{Found, Probe};

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use aiki_store::{EventRecord, History, Millis, Namespace, RunId, RunRecord, SleepRecord};

use crate::clock::Clock;
use crate::error::WorkflowError;
use crate::task::StateMap;

pub use child::{ChildRun, ChildStart};
pub use continuation::{ContinueAsNew, HistoryLimits};
pub(crate) use drain::Drain;
pub use event::EventWait;
pub use sleep::SleepOutcome;
pub(crate) use suspend::Suspension;
pub use task_call::RECORDED_INPUT_MAX_BYTES;
pub(crate) use write::RunStore;

use manifest::Manifest;
use suspend::Block;

/// The context a workflow runs in: the door to its tasks, sleeps, events and children.
///
/// A workflow is re-executed from the top whenever it resumes; `Run` makes every call that
/// already happened return what it returned the first time, found by content address.
///
/// A workflow only ever borrows its `Run` (`&Run`), and `Run` is not `Clone`: nothing a
/// workflow starts can outlive its execution (a `tokio::spawn`ed task call does not compile).
/// Fan out by joining borrowed calls instead, with [`Run::join_all`]; the runtime still runs
/// each task attempt of a `#[task]` on its own tokio task, on every core.
pub struct Run {
    inner: Inner,
}

struct Inner {
    id: RunId,
    /// The first run of its lineage (itself, unless it is a fork): idempotency keys derive
    /// from it.
    lineage: RunId,
    namespace: Namespace,
    /// The worker pool the run is routed to; its children inherit it.
    pool: String,
    /// The trace the run was started in; its children inherit it.
    traceparent: Option<String>,
    /// The workflow versions the executing worker serves (a child of another version is
    /// left to another service, with a warning).
    served: Arc<HashSet<Namespace>>,
    attempt: u32,
    revision: u64,
    store: RunStore,
    clock: Arc<dyn Clock>,
    state: Arc<StateMap>,
    /// Where the executing worker notes the tasks its runs call (for its catalog); `None` for
    /// the impact check's replay.
    called: Option<Arc<crate::called::CalledTasks>>,
    /// How large its history may grow.
    history_limits: HistoryLimits,
    replay: Mutex<Replay>,
    /// Held by a write carrying the task results kept for the next write: a write waits for
    /// it, so that nothing of the run is written before the results the workflow has seen.
    carrying: tokio::sync::Mutex<()>,
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

/// Groups records into per-name queues, each in index order.
fn queues<T>(
    records: Vec<T>,
    name: impl Fn(&T) -> &str,
    index: impl Fn(&T) -> u32,
) -> HashMap<String, Queue<T>> {
    let mut queues: HashMap<String, Queue<T>> = HashMap::new();
    for record in records {
        queues
            .entry(name(&record).to_owned())
            .or_default()
            .records
            .push(record);
    }
    for queue in queues.values_mut() {
        queue.records.sort_by_key(&index);
    }
    queues
}

/// What this execution knows of the run's history, and what it waits on.
#[derive(Default)]
struct Replay {
    /// The recorded entries by address: the source of truth for what replays.
    manifest: Manifest,
    sleeps: HashMap<String, Queue<SleepRecord>>,
    events: HashMap<String, Queue<EventRecord>>,
    children: HashMap<RunId, RunRecord>,
    /// Tasks and store writes in progress: while any runs, the run cannot suspend.
    in_flight: usize,
    /// Task results the workflow has seen, written with the run's next write (see
    /// `Run::defer_result`), and the bytes of their outputs.
    unsent: Vec<aiki_store::EntryRecord>,
    unsent_bytes: usize,
    /// Durable waits the workflow is blocked on, by id.
    blocks: HashMap<u64, Block>,
    next_block: u64,
    /// An error that fails the run whatever the workflow does with it.
    fatal: Option<WorkflowError>,
    /// Set for the impact check's replay: nothing is written, no task runs.
    probe: Option<Probe>,
    /// Why the run drains (no new task or child starts), if it does.
    drain: Option<Drain>,
    /// Calls held at a drain point.
    held: usize,
    /// Task results (an output, a failed attempt) this execution recorded.
    recorded: u64,
    /// Whether this execution warned of the history's size.
    warned_size: bool,
    /// The waker of the execution polling the workflow (woken when a drain is asked for).
    waker: Option<std::task::Waker>,
}

impl Run {
    pub(crate) fn from_history(
        history: History,
        store: RunStore,
        clock: Arc<dyn Clock>,
        state: Arc<StateMap>,
        served: Arc<HashSet<Namespace>>,
    ) -> Run {
        let replay = Replay {
            manifest: Manifest::new(history.entries),
            sleeps: queues(history.sleeps, |sleep| &sleep.name, |sleep| sleep.index),
            events: queues(history.events, |event| &event.name, |event| event.index),
            children: history
                .children
                .into_iter()
                .map(|child| (child.id, child))
                .collect(),
            ..Replay::default()
        };
        Run {
            inner: Inner {
                id: history.run.id,
                lineage: history
                    .run
                    .lineage
                    .map_or(history.run.id, |lineage| lineage.root),
                namespace: history.run.namespace.clone(),
                pool: history.run.pool.clone(),
                traceparent: history.run.traceparent.clone(),
                attempt: history.run.attempts,
                revision: history.run.revision,
                store,
                clock,
                state,
                served,
                called: None,
                history_limits: HistoryLimits::default(),
                replay: Mutex::new(replay),
                carrying: tokio::sync::Mutex::new(()),
            },
        }
    }

    /// Notes the tasks this run calls in `called` (the executing worker's catalog).
    pub(crate) fn noting_calls(mut self, called: Arc<crate::called::CalledTasks>) -> Run {
        self.inner.called = Some(called);
        self
    }

    /// Keeps its history within `limits`.
    pub(crate) fn with_history_limits(mut self, limits: HistoryLimits) -> Run {
        self.inner.history_limits = limits;
        self
    }

    /// This run as the impact check replays it: it writes nothing and runs no task, and
    /// notes what it would do instead (`take_probe`).
    pub(crate) fn into_probe(self, probe: Probe) -> Run {
        self.replay().probe = Some(probe);
        self
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
        match &error {
            WorkflowError::NonDeterminism {
                new_address,
                unconsumed,
                call_site,
            } => tracing::warn!(
                %new_address,
                unconsumed = ?unconsumed,
                call_site = call_site.as_deref().unwrap_or("unknown"),
                "replay diverged: a new task address while recorded results are unconsumed"
            ),
            WorkflowError::OutputSchemaMismatch {
                what,
                address,
                mismatch,
            } => tracing::warn!(
                what = %what,
                %address,
                %mismatch,
                "a recorded output does not match its current schema"
            ),
            other => tracing::debug!(error = %other, "the run cannot go on"),
        }
        let copy = match &error {
            WorkflowError::NonDeterminism {
                new_address,
                unconsumed,
                call_site,
            } => WorkflowError::NonDeterminism {
                new_address: new_address.clone(),
                unconsumed: unconsumed.clone(),
                call_site: call_site.clone(),
            },
            WorkflowError::DirectTaskCall {
                task,
                function,
                task_type,
            } => WorkflowError::DirectTaskCall {
                task: task.clone(),
                function: function.clone(),
                task_type: task_type.clone(),
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
            if let Some(probe) = replay.probe.as_mut() {
                probe.fatal_after = probe.assumed.clone();
            }
        }
        copy
    }

    /// Waits for every call (task calls, child starts or waits, event waits, sleeps) to end,
    /// concurrently, and returns their outputs in call order, or the first error in call
    /// order. Every call runs to its end even when an earlier one failed, so no task is left
    /// half done.
    ///
    /// ```
    /// # use aiki::{Run, Task, TaskError, WorkflowError};
    /// #[aiki::task(name = "square")]
    /// async fn square(n: u64) -> Result<u64, TaskError> {
    ///     Ok(n * n)
    /// }
    ///
    /// #[aiki::workflow(name = "sum-of-squares", version = "1")]
    /// async fn sum_of_squares(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    ///     let squares = run.join_all((1..=n).map(|i| Square.start(run, i))).await?;
    ///     Ok(squares.into_iter().sum())
    /// }
    /// ```
    pub async fn join_all<T, F>(
        &self,
        calls: impl IntoIterator<Item = F>,
    ) -> Result<Vec<T>, WorkflowError>
    where
        F: Future<Output = Result<T, WorkflowError>>,
    {
        futures_util::future::join_all(calls)
            .await
            .into_iter()
            .collect()
    }
}
