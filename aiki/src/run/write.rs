//! The run's store path: writes retried while the store is unreachable and fenced by the
//! revision, reads, and the count of writes in flight that keeps a run from suspending
//! mid-write.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

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
    /// is, for the caller to decide.
    pub(super) async fn store_op_raw<F, Fut, T>(&self, op: F) -> Result<T, StoreError>
    where
        F: Fn(Arc<dyn ExecutorStore>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let writer = self.inner.store.writer()?;
        self.retried(writer, op).await
    }

    /// A store operation on `store`, retried while the store is unreachable.
    pub(super) async fn retried<S, F, Fut, T>(&self, store: Arc<S>, op: F) -> Result<T, StoreError>
    where
        S: ?Sized,
        F: Fn(Arc<S>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let _in_flight = self.in_flight();
        let mut delay = Duration::from_millis(50);
        let mut attempt: u64 = 1;
        loop {
            match op(store.clone()).await {
                Ok(value) => return Ok(value),
                // An outage never fails the run by itself: the write is retried for as long as
                // it takes. The claim stays this executor's until the store answers another's
                // recovery (after which the revision fence refuses the write, and the run is
                // lost to this executor, not failed).
                Err(error) if error.is_transient() => {
                    crate::metrics::store_error("write", &error);
                    crate::metrics::store_retry("write");
                    if attempt == 1 || attempt.is_power_of_two() {
                        tracing::warn!(
                            run_id = %self.inner.id,
                            %error,
                            attempt,
                            "store write failed; retrying until the store answers"
                        );
                    }
                    // Real time: the store's recovery is not run timing.
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    attempt += 1;
                }
                Err(error) => return Err(error),
            }
        }
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
    pub(super) async fn start_attempt(&self, entry: EntryRecord) -> Result<bool, WorkflowError> {
        if self.probing() {
            // The fence of `write` refuses it.
            return self.put_entry(entry).await.map(|()| true);
        }
        let revision = self.inner.revision;
        let written = &entry;
        let outcome = self
            .store_op_raw(move |store| {
                let entry = written.clone();
                async move { store.put_entry(revision, entry).await }
            })
            .await;
        match outcome {
            Ok(()) => {
                self.replay().manifest.update(entry);
                Ok(true)
            }
            Err(StoreError::PauseRequested { .. }) => {
                self.drain(Drain::Pause);
                Ok(false)
            }
            Err(error) => Err(self.lost(error)),
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

/// Counts a task or store write in progress; the run cannot suspend while one exists.
pub(super) struct InFlight<'r> {
    run: &'r Run,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.run.replay().in_flight -= 1;
    }
}
