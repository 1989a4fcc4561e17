//! The run's store path: writes retried while the store is unreachable and fenced by the
//! revision, reads, and the count of writes in flight that keeps a run from suspending
//! mid-write.

use std::future::Future;
use std::sync::Arc;

use aiki_store::{EntryRecord, ExecutorStore, ReadStore, StoreError};

use super::{Drain, Run};
use crate::error::WorkflowError;

impl Run {
    /// A store write made by this executor. Transient errors are retried with back-off (in real
    /// time) for as long as the store stays unreachable; a revision conflict loses the
    /// run: the error is fatal and nothing more is written.
    ///
    /// Every write counts as in flight for as long as it runs, so the run cannot suspend (and
    /// drop the write half done) while one is under way, whichever path makes it.
    pub(crate) async fn write<F, Fut, T>(&self, op: F) -> Result<T, WorkflowError>
    where
        F: Fn(Arc<dyn ExecutorStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.probe_fence()?;
        self.store_op(op).await
    }

    /// A store write made by this executor, retried as [`write`](Run::write) retries, whose
    /// refusal of a payload over the store's size limit comes back as
    /// [`WorkflowError::TooLarge`] for the caller to record as the outcome of what it wrote (a
    /// task's output fails the task, a run's output fails the run): nothing was written, and
    /// the run goes on. Any other refusal loses the run, as with `write`.
    pub(crate) async fn write_sized<F, Fut, T>(&self, op: F) -> Result<T, WorkflowError>
    where
        F: Fn(Arc<dyn ExecutorStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.probe_fence()?;
        self.store_op_raw(op).await.map_err(|error| match error {
            StoreError::TooLarge { what, bytes, limit } => {
                WorkflowError::TooLarge { what, bytes, limit }
            }
            error => self.lost(error),
        })
    }

    /// Refuses a write during the impact check's replay: every path that writes checks
    /// `probing` first; this is the fence behind them.
    pub(super) fn probe_fence(&self) -> Result<(), WorkflowError> {
        if self.probing() {
            return Err(self.fail_fatally(WorkflowError::Panicked {
                message: "BUG: the impact check's replay tried to write to the store; nothing \
                          was written"
                    .to_owned(),
            }));
        }
        Ok(())
    }

    /// A store read, retried as writes are; the impact check's replay may make it.
    pub(crate) async fn read<F, Fut, T>(&self, op: F) -> Result<T, WorkflowError>
    where
        F: Fn(Arc<dyn ReadStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let reader = self.inner.store.reader();
        self.retried(reader, op)
            .await
            .map_err(|error| self.lost(error))
    }

    pub(super) async fn store_op<F, Fut, T>(&self, op: F) -> Result<T, WorkflowError>
    where
        F: Fn(Arc<dyn ExecutorStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.store_op_raw(op)
            .await
            .map_err(|error| self.lost(error))
    }

    /// A store write retried while the store is unreachable; any other error is returned as it
    /// is, for the caller to decide. The task results kept for the next write are written
    /// first ([`flush_results`](Run::flush_results)).
    pub(super) async fn store_op_raw<F, Fut, T>(&self, op: F) -> Result<T, StoreError>
    where
        F: Fn(Arc<dyn ExecutorStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        self.flush_results().await?;
        let writer = self.inner.store.writer()?;
        self.retried(writer, op).await
    }

    /// A store operation on `store`, retried while the store is unreachable: one operation
    /// whatever retries it (see [`crate::resend`]), so a server answers a retry of a write it
    /// did with its first answer.
    pub(super) async fn retried<S, F, Fut, T>(&self, store: Arc<S>, op: F) -> Result<T, StoreError>
    where
        S: ?Sized,
        F: Fn(Arc<S>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let _in_flight = self.in_flight();
        // An outage never fails the run by itself: the write is retried for as long as it
        // takes. The claim stays this executor's until the store answers another's recovery
        // (after which the revision fence refuses the write, and the run is lost to this
        // executor, not failed).
        crate::resend::resent(
            || op(store.clone()),
            |error, attempt| {
                crate::metrics::store_error("write", error);
                crate::metrics::store_retry("write");
                if attempt == 1 || attempt.is_power_of_two() {
                    tracing::warn!(
                        run_id = %self.inner.id,
                        %error,
                        attempt,
                        "store write failed; retrying until the store answers"
                    );
                }
                true
            },
        )
        .await
    }

    /// Writes a task entry, and keeps the manifest's copy of it current once it is durable.
    pub(super) async fn put_entry(&self, entry: EntryRecord) -> Result<(), WorkflowError> {
        self.put_result(entry).await.map_err(|error| match error {
            // Only an output is measured, and outputs are written by `put_result`.
            too_large @ WorkflowError::TooLarge { .. } => self.fail_fatally(too_large),
            error => error,
        })
    }

    /// Writes a task entry as [`put_entry`](Run::put_entry) does, except that an output over
    /// the store's size limit comes back as [`WorkflowError::TooLarge`], nothing written, for
    /// the task call to fail with (see [`write_sized`](Run::write_sized)).
    pub(super) async fn put_result(&self, entry: EntryRecord) -> Result<(), WorkflowError> {
        let revision = self.inner.revision;
        let written = &entry;
        self.write_sized(move |store| {
            let entry = written.clone();
            async move { store.put_entry(revision, entry).await }
        })
        .await?;
        let mut replay = self.replay();
        if entry.status != aiki_store::EntryStatus::Running {
            replay.recorded += 1;
        }
        replay.manifest.update(entry);
        Ok(())
    }

    /// The task results (outputs and failed attempts) this execution recorded.
    pub(crate) fn recorded(&self) -> u64 {
        self.replay().recorded
    }

    /// Writes the `running` record of a new task attempt, which the store refuses while a
    /// pause is requested of the run: `Ok(false)` then, and the run drains.
    ///
    /// The task results kept for the next write travel with it, in one call
    /// ([`ExecutorStore::put_entries`]): a task step costs one round trip, and no handler
    /// starts before the results the workflow has seen are durable.
    pub(super) async fn start_attempt(&self, entry: EntryRecord) -> Result<bool, WorkflowError> {
        if self.probing() {
            // The fence of `write` refuses it.
            return self.put_entry(entry).await.map(|()| true);
        }
        let revision = self.inner.revision;
        let carrying = self.inner.carrying.lock().await;
        let mut carried = self.carry();
        let outcome = if carried.entries.is_empty() {
            drop(carrying);
            let written = &entry;
            self.store_op_raw(move |store| {
                let entry = written.clone();
                async move { store.put_entry(revision, entry).await }
            })
            .await
        } else {
            let mut entries = carried.entries.clone();
            entries.push(entry.clone());
            let writer = self
                .inner
                .store
                .writer()
                .map_err(|error| self.lost(error))?;
            let entries = &entries;
            self.retried(writer, move |store| {
                let entries = entries.clone();
                async move { store.put_entries(revision, entries).await }
            })
            .await
            .map_err(carried_refused)
        };
        match outcome {
            Ok(()) => {
                carried.written = true;
                self.replay().manifest.update(entry);
                Ok(true)
            }
            // Only a `running` record is refused for a pause: the results were written.
            Err(StoreError::PauseRequested { .. }) => {
                carried.written = true;
                self.drain(Drain::Pause);
                Ok(false)
            }
            Err(error) => Err(self.lost(error)),
        }
    }

    /// Keeps a task's completed entry, which the workflow is about to see, to be written with
    /// the run's next write: the next call's `running` record ([`start_attempt`]), any other
    /// write ([`store_op_raw`]), or the executor's flush when the workflow waits on nothing it
    /// writes. Gives `entry` back when it must be written now instead: the store's payload
    /// limit is unknown, or the outputs kept would pass [`KEPT_RESULTS_MAX_BYTES`] or the limit
    /// (an output over the limit fails its task, which the workflow must see). Their number is
    /// not bounded: a fan-out's results, ending while a write is under way, go in the next (a
    /// store splits a large one: see [`aiki_store::api::MAX_ENTRY_BATCH`]).
    ///
    /// [`start_attempt`]: Run::start_attempt
    /// [`store_op_raw`]: Run::store_op_raw
    pub(super) fn defer_result(&self, entry: EntryRecord) -> Option<EntryRecord> {
        if self.probing() {
            return Some(entry);
        }
        let Some(limit) = self
            .inner
            .store
            .writer()
            .ok()
            .and_then(|store| store.payload_limit())
        else {
            return Some(entry);
        };
        let bytes = entry
            .output
            .as_ref()
            .map_or(0, aiki_store::limit::json_bytes);
        let mut replay = self.replay();
        if replay.unsent_bytes + bytes > limit.bytes().min(KEPT_RESULTS_MAX_BYTES) {
            return Some(entry);
        }
        replay.unsent_bytes += bytes;
        replay.recorded += 1;
        replay.manifest.update(entry.clone());
        replay.unsent.push(entry);
        None
    }

    /// Whether task results are kept for the next write.
    pub(crate) fn has_unsent(&self) -> bool {
        !self.replay().unsent.is_empty()
    }

    /// Writes the task results kept for the next write, if any. Every other write waits for
    /// them, so that the store never holds a write of the run made after a result it lacks.
    pub(crate) async fn flush_results(&self) -> Result<(), StoreError> {
        let _carrying = self.inner.carrying.lock().await;
        let mut carried = self.carry();
        if carried.entries.is_empty() {
            return Ok(());
        }
        let revision = self.inner.revision;
        let writer = self.inner.store.writer()?;
        let entries = &carried.entries;
        self.retried(writer, move |store| {
            let entries = entries.clone();
            async move { store.put_entries(revision, entries).await }
        })
        .await
        .map_err(carried_refused)?;
        carried.written = true;
        Ok(())
    }

    /// Takes the task results kept for the next write, to be put back unless written.
    fn carry(&self) -> Carried<'_> {
        let mut replay = self.replay();
        let bytes = std::mem::take(&mut replay.unsent_bytes);
        Carried {
            run: self,
            entries: std::mem::take(&mut replay.unsent),
            bytes,
            written: false,
        }
    }

    /// The run is lost to this executor: `error` fails it whatever the workflow does.
    pub(super) fn lost(&self, error: StoreError) -> WorkflowError {
        crate::metrics::store_error("write", &error);
        self.fail_fatally(WorkflowError::Lost(error))
    }

    pub(super) fn in_flight(&self) -> InFlight<'_> {
        self.replay().in_flight += 1;
        InFlight { run: self }
    }
}

/// The store a run reads and writes through: its executor's, or, for the impact check's replay,
/// a reader's, which has no write to make.
#[derive(Clone, Debug)]
pub(crate) enum RunStore {
    /// An executor's: reads and writes.
    Executor(Arc<dyn ExecutorStore>),
    /// A reader's (the impact check's replay, through a client): reads only.
    Reader(Arc<dyn ReadStore>),
}

impl RunStore {
    pub(super) fn reader(&self) -> Arc<dyn ReadStore> {
        match self {
            RunStore::Executor(store) => store.clone(),
            RunStore::Reader(store) => store.clone(),
        }
    }

    /// The executor's store; a reader's refuses (the probe's fence refuses every write first).
    pub(super) fn writer(&self) -> Result<Arc<dyn ExecutorStore>, StoreError> {
        match self {
            RunStore::Executor(store) => Ok(store.clone()),
            RunStore::Reader(_) => Err(StoreError::Invalid {
                message: "BUG: the impact check's replay tried to write to the store".to_owned(),
            }),
        }
    }
}

/// The most bytes of task outputs kept for the run's next write (below the store's payload
/// limit, and well below a server's request body limit); past it, an output is written before
/// the workflow sees it.
pub(crate) const KEPT_RESULTS_MAX_BYTES: usize = 256 * 1024;

/// Task results taken for a write: put back, ahead of any kept since, unless the write
/// succeeded (a write dropped half way, by a `select!` in the workflow, leaves them to the
/// next).
struct Carried<'r> {
    run: &'r Run,
    entries: Vec<EntryRecord>,
    bytes: usize,
    written: bool,
}

impl Drop for Carried<'_> {
    fn drop(&mut self) {
        if self.written || self.entries.is_empty() {
            return;
        }
        let mut replay = self.run.replay();
        let later = std::mem::replace(&mut replay.unsent, std::mem::take(&mut self.entries));
        replay.unsent.extend(later);
        replay.unsent_bytes += self.bytes;
    }
}

/// A refusal of task results the runtime had checked against the store's payload limit: only
/// a limit changed meanwhile refuses one as too large, and the workflow has already gone on
/// with the output, so the run is lost to this executor (its claim expires; the execution that
/// recovers it writes the result before going on, and fails the task if it is refused again).
fn carried_refused(error: StoreError) -> StoreError {
    match error {
        StoreError::TooLarge { what, bytes, limit } => StoreError::Invalid {
            message: format!(
                "{what} ({bytes} bytes) was refused by the store's payload limit ({limit} \
                 bytes) after the workflow had gone on with it: the limit changed since the \
                 store stated it"
            ),
        },
        error => error,
    }
}

/// Counts a task or store write in progress; the run cannot suspend while one exists.
pub(super) struct InFlight<'r> {
    run: &'r Run,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.run.replay().in_flight -= 1;
    }
}
