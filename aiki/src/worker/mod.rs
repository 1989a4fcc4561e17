//! Workers: claim runs, execute them, keep their claims fresh, run the timer daemons.
//!
//! This module holds the worker and its claim loop; the builder is in `builder`, one run's
//! execution in `execute`, the daemons in `daemon`, the clock read as the store's in
//! `store_clock`, the check against the store's runtime configuration in `config`.

mod builder;
mod config;
mod daemon;
mod execute;
mod heartbeat;
mod store;
mod store_clock;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{ClaimRequest, ExecutorStore, Millis, Namespace, StoreError, Sweeper};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::clock::Clock;
use crate::error::WorkflowError;
use crate::retry::RetryPolicy;
use crate::run::Run;
use crate::schema::Schema;
use crate::subscriber::Subscriber;
use crate::task::StateMap;
use crate::workflow::Workflow;

pub use builder::WorkerBuilder;
pub use store::WorkerStore;

use execute::execute;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A registered workflow version with its types erased.
pub(crate) trait Registered: Send + Sync {
    /// The workflow's future; it borrows the run, which the execution owns.
    fn execute<'a>(
        &self,
        run: &'a Run,
        input: Value,
    ) -> BoxFuture<'a, Result<(Value, String), WorkflowError>>;
    fn retry(&self) -> RetryPolicy;
    /// The version's catalog entry, with the tasks the worker declares.
    fn catalog_entry(&self, tasks: &[aiki_store::TaskDeclaration]) -> aiki_store::CatalogEntry;
}

struct Erased<W>(Arc<W>);

impl<W: Workflow> Registered for Erased<W> {
    fn execute<'a>(
        &self,
        run: &'a Run,
        input: Value,
    ) -> BoxFuture<'a, Result<(Value, String), WorkflowError>> {
        let workflow = self.0.clone();
        Box::pin(async move {
            // Recorded without a fingerprint: checked at every execution.
            let input =
                crate::schema::decode_recorded::<W::Input>(input, None).map_err(|mismatch| {
                    WorkflowError::InputSchemaMismatch {
                        namespace: W::namespace().to_string(),
                        mismatch,
                    }
                })?;
            let output = workflow.run(run, input).await?;
            let json = serde_json::to_value(&output).map_err(|error| {
                WorkflowError::InputNotSerializable {
                    what: format!("output of {}", W::namespace()),
                    message: error.to_string(),
                }
            })?;
            Ok((json, Schema::of::<W::Output>().fingerprint().to_owned()))
        })
    }

    fn retry(&self) -> RetryPolicy {
        self.0.retry()
    }

    fn catalog_entry(&self, tasks: &[aiki_store::TaskDeclaration]) -> aiki_store::CatalogEntry {
        crate::catalog::entry(&*self.0, tasks)
    }
}

/// Executes runs of the workflow versions it serves.
///
/// ```no_run
/// # async fn demo(store: aiki::BoxStore) -> Result<(), aiki::ClientError> {
/// let worker = aiki::Worker::builder(store).build()?; // .register(MyWorkflow) first
/// let running = worker.start();
/// // ...
/// running.shutdown().await;
/// # Ok(()) }
/// ```
pub struct Worker {
    shared: Arc<Shared>,
    max_concurrent_runs: usize,
    shutdown_timeout: Duration,
    /// The role the daemons sweep through, when this worker runs them.
    sweeper: Option<Arc<dyn Sweeper>>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("worker_id", &self.shared.worker_id)
            .field("pool", &self.shared.pool)
            .finish_non_exhaustive()
    }
}

struct Shared {
    store: Arc<dyn ExecutorStore>,
    /// The worker's clock read as the store's: `store_clock`.
    clock: Arc<dyn Clock>,
    /// Learns the store's time from claims and leases (see [`store_clock`]).
    store_clock: Arc<store_clock::StoreClock>,
    registry: HashMap<Namespace, Arc<dyn Registered>>,
    /// The registry's namespaces, for the runs this worker executes.
    served: Arc<std::collections::HashSet<Namespace>>,
    state: Arc<StateMap>,
    pool: String,
    worker_id: String,
    /// The entries of the registered versions, published with the first heartbeat.
    catalog: Vec<aiki_store::CatalogEntry>,
    /// The tasks its runs were seen calling: added to their versions' catalog entries.
    called: Arc<crate::called::CalledTasks>,
    claim_refresh_interval: Duration,
    /// The claim idle timeout in force, as the store last told it (the runtime configuration's
    /// [`ConfigKey::ClaimIdleTimeout`](aiki_store::ConfigKey::ClaimIdleTimeout)).
    claim_idle_timeout_ms: std::sync::atomic::AtomicI64,
    /// When the daemons last pruned the worker list (by `clock`).
    pruned_at: std::sync::atomic::AtomicI64,
    /// An execution ended: there is room to claim more.
    ended: Notify,
    /// How work is discovered; also kept alive per run with its own heartbeat.
    subscriber: Arc<dyn Subscriber>,
    /// Set on a graceful shutdown: every execution drains (finishes the tasks in flight, starts
    /// no new one) and releases its run.
    draining: watch::Sender<bool>,
    /// Runs this worker released because their history holds values only a newer release
    /// understands, and until when it leaves them to other workers.
    unreadable: std::sync::Mutex<HashMap<aiki_store::RunId, Millis>>,
}

/// How long a worker leaves a run it cannot read (a record from a newer release) to others.
const UNREADABLE_BACKOFF: Millis = 5 * 60 * 1000;

impl Shared {
    /// The runs to leave unclaimed now.
    fn skipped(&self) -> Vec<aiki_store::RunId> {
        let now = self.clock.now();
        let mut unreadable = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        unreadable.retain(|_, until| *until > now);
        unreadable.keys().copied().collect()
    }

    /// Leaves `run` to other workers for a while.
    fn back_off_from(&self, run: aiki_store::RunId) {
        let until = self.clock.now().saturating_add(UNREADABLE_BACKOFF);
        let mut unreadable = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        unreadable.insert(run, until);
    }
}

impl Worker {
    /// A worker on a store, with the defaults.
    pub fn builder(store: impl Into<WorkerStore>) -> WorkerBuilder {
        WorkerBuilder::new(store.into())
    }

    /// This worker's identity.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// The workflow versions this worker registers.
    pub fn registered(&self) -> impl Iterator<Item = &Namespace> {
        self.shared.registry.keys()
    }

    /// Another handle on this (unstarted) worker's registry and store, for an impact probe
    /// spawned on a tokio task of its own.
    pub(crate) fn clone_for_check(&self) -> Worker {
        Worker {
            shared: self.shared.clone(),
            max_concurrent_runs: self.max_concurrent_runs,
            shutdown_timeout: self.shutdown_timeout,
            sweeper: self.sweeper.clone(),
        }
    }

    /// The registered version `namespace`, for the impact check.
    pub(crate) fn workflow(&self, namespace: &Namespace) -> Option<&Arc<dyn Registered>> {
        self.shared.registry.get(namespace)
    }

    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn pool(&self) -> &str {
        &self.shared.pool
    }

    pub(crate) fn store(&self) -> &Arc<dyn ExecutorStore> {
        &self.shared.store
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    pub(crate) fn served(&self) -> &Arc<std::collections::HashSet<Namespace>> {
        &self.shared.served
    }

    /// Starts the claim loop on the current tokio runtime. A worker whose claim refresh
    /// interval does not fit the store's claim idle timeout (see [`verify`](Self::verify))
    /// logs why as an error and claims nothing until the configuration is changed to fit
    /// (checked every 5 s); one that cannot read the configuration yet starts, and the first
    /// runs it claims tell it the timeout.
    pub fn start(self) -> WorkerHandle {
        let (stop_tx, stop_rx) = watch::channel(Stop::No);
        // The worker and its executions report to the subscriber current where it starts.
        let task = tokio::spawn(crate::trace::in_current_dispatch(self.run(stop_rx)));
        WorkerHandle {
            stop: stop_tx,
            task: Some(task),
        }
    }

    async fn run(self, mut stop: watch::Receiver<Stop>) {
        if !self.admitted(&mut stop).await {
            return;
        }
        let namespaces: Vec<Namespace> = self.shared.registry.keys().cloned().collect();
        let heartbeat = heartbeat::start(self.shared.clone(), namespaces.clone());
        let mut executions = JoinSet::new();
        let mut backoff = Duration::from_millis(50);
        let daemons = self.sweeper.clone().map(|sweeper| {
            let daemons = daemon::Daemons::new(self.shared.clone(), sweeper);
            tokio::spawn(crate::trace::in_current_dispatch(daemons.run(stop.clone())))
        });
        loop {
            if *stop.borrow() != Stop::No {
                break;
            }
            while let Some(joined) = executions.try_join_next() {
                log_join_error(joined);
            }
            // Register interest before looking, so that a notification in between is not lost.
            let ended = self.shared.ended.notified();
            let jumped = self.shared.clock.jumped();
            tokio::pin!(ended);
            let mut busy = false;
            let pass = async {
                let free = self.max_concurrent_runs.saturating_sub(executions.len());
                if free > 0 && !namespaces.is_empty() {
                    let local_sent = self.shared.store_clock.local_now();
                    let claimed = self
                        .shared
                        .store
                        .claim(
                            ClaimRequest::new(
                                self.shared.worker_id.clone(),
                                namespaces.clone(),
                                self.shared.pool.clone(),
                                free.min(64) as u32,
                                self.shared.clock.now(),
                            )
                            .skip(self.shared.skipped()),
                        )
                        .await
                        .inspect_err(|error| crate::metrics::store_error("claim", error))?;
                    if let Some(store_now) = claimed.now() {
                        self.shared.store_clock.observe(local_sent, store_now);
                    }
                    busy |= claimed.runs.len() == free.min(64);
                    if let Some(idle_ms) = claimed.claim_idle_timeout_ms {
                        self.shared.check_idle_timeout(idle_ms);
                    }
                    let now = self.shared.clock.now();
                    for run in claimed.runs {
                        let queued_at = run.queued_at.unwrap_or(run.created_at);
                        let waited = u64::try_from(now.saturating_sub(queued_at)).unwrap_or(0);
                        crate::metrics::claimed(&run.namespace, Duration::from_millis(waited));
                        executions.spawn(crate::trace::in_current_dispatch(execute(
                            self.shared.clone(),
                            run,
                        )));
                    }
                }
                Ok::<(), StoreError>(())
            };
            // A pass waiting on the store (a claim, a sweep) does not hold up an abort.
            let result = tokio::select! {
                result = pass => result,
                Ok(_) = stop.wait_for(|stop| *stop == Stop::Now) => break,
            };
            match result {
                Ok(()) => backoff = Duration::from_millis(50),
                Err(error) => {
                    tracing::warn!(%error, "worker could not reach the store; backing off");
                    // Real time: the store's recovery is not run timing, and a test clock that
                    // nobody advances must not hold a worker off a store that answers again.
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
            if busy {
                continue;
            }
            tokio::select! {
                _ = self.shared.subscriber.next_signal() => {}
                _ = &mut ended => {}
                _ = jumped => {}
                _ = stop.changed() => {}
            }
        }
        if *stop.borrow() == Stop::Now {
            // As a crash: every execution stops where it is, nothing more is written.
            if let Some(daemons) = daemons {
                daemons.abort();
            }
            executions.shutdown().await;
            return;
        }
        // Gracefully: each execution finishes the tasks in flight, starts no new one, and
        // releases its run (or suspends it, if that is where it stands); the daemons' lease
        // goes to another worker at once.
        self.shared.draining.send_replace(true);
        if let Some(daemons) = daemons {
            log_join_error(daemons.await);
        }
        // Real time: how long a process takes to stop is not run timing.
        let drained = tokio::time::timeout(self.shutdown_timeout, async {
            while let Some(joined) = executions.join_next().await {
                log_join_error(joined);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = executions.len(),
                "shutdown timeout passed; unfinished runs are left for claim recovery"
            );
            executions.abort_all();
            while executions.join_next().await.is_some() {}
        }
        heartbeat.stopped().await;
    }
}

/// Logs an execution that ended by panicking (a bug of the runtime: workflow and task panics
/// are caught and recorded) or was aborted.
fn log_join_error(joined: Result<(), tokio::task::JoinError>) {
    if let Err(error) = joined
        && error.is_panic()
    {
        let message = crate::panic::message(&*error.into_panic());
        tracing::error!(%message, "BUG: a run's execution panicked; its claim will expire");
    }
}

/// How the claim loop is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// Keep going.
    No,
    /// Stop claiming, let runs in progress finish (up to the shutdown timeout).
    Gracefully,
    /// Drop every execution where it is, as a crash would.
    Now,
}

/// A started worker. Dropping it stops the worker at once; [`shutdown`](WorkerHandle::shutdown)
/// stops it gracefully, [`abort`](WorkerHandle::abort) at once and waits until it has.
#[derive(Debug)]
pub struct WorkerHandle {
    stop: watch::Sender<Stop>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl WorkerHandle {
    /// Stops claiming and drains the runs in progress: each finishes the tasks in flight,
    /// starts no new one, and is released back to `queued` for another worker (or suspends,
    /// or ends, if that is where it stands). Waits up to the shutdown timeout for that, and
    /// leaves what is still running then for claim recovery.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(Stop::Gracefully);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// Stops the worker at once, as a crash would: every execution is dropped where it is,
    /// and the runs it held stay `running` under its claim until claim recovery releases
    /// them. Unlike dropping the handle (which stops it just as abruptly, but some moments
    /// later), this returns only once the claim loop and every execution (with its claim
    /// refresher) have stopped, so this worker starts no claim refresh afterwards. Task
    /// attempts running on tokio tasks of their own are cancelled and stop at their next
    /// `.await`; a store statement already sent may still complete on the server.
    pub async fn abort(mut self) {
        let _ = self.stop.send(Stop::Now);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
