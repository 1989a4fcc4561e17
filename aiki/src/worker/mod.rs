//! Workers: claim runs, execute them, keep their claims fresh, run the timer daemons.
//!
//! This module holds the worker and its claim loop; the builder is in `builder`, the daemons
//! in `daemon`, the worker's heartbeat in `heartbeat`, the wait for the store's runtime
//! configuration to fit in `config`, the wait of the housekeeping for the first claim pass's
//! runs in `startup`. One run's execution is the [`Executor`]'s.

mod builder;
mod config;
mod daemon;
mod heartbeat;
mod schedules;
mod startup;
mod store;
mod unheard;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{ClaimRequest, Namespace, Ready, StoreError, Sweeper};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::executor::{Executor, Parts};
use crate::registry::Registry;
use crate::subscriber::Subscriber;

pub use builder::WorkerBuilder;
pub use schedules::Scheduled;
pub use store::WorkerStore;

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
    /// The schedules declared in code, reconciled at the start.
    schedules: Vec<Scheduled>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("worker_id", &self.id())
            .field("pool", &self.shared.pool)
            .finish_non_exhaustive()
    }
}

struct Shared {
    /// Executes what the claim loop claims.
    executor: Executor,
    pool: String,
    /// The entries of the registered versions, published with the first heartbeat.
    catalog: Vec<aiki_store::CatalogEntry>,
    /// When the daemons last pruned the worker list (by the executor's clock).
    pruned_at: std::sync::atomic::AtomicI64,
    /// How work is discovered.
    subscriber: Arc<dyn Subscriber>,
    /// Whether the runs of the first claim pass have ended: the housekeeping waits for it.
    startup: startup::Startup,
}

impl Shared {
    /// The executor's parts: its store, its clock, its identity.
    fn exec(&self) -> &Arc<Parts> {
        self.executor.parts()
    }
}

impl Worker {
    /// A worker on a store, with the defaults.
    pub fn builder(store: impl Into<WorkerStore>) -> WorkerBuilder {
        WorkerBuilder::new(store.into())
    }

    /// This worker's identity: its executor's, which its claims are held under.
    pub fn id(&self) -> &str {
        self.shared.executor.id()
    }

    /// The workflow versions and tasks this worker serves.
    pub fn registry(&self) -> &Registry {
        self.shared.executor.registry()
    }

    /// The executor its claim loop feeds.
    pub fn executor(&self) -> &Executor {
        &self.shared.executor
    }

    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn pool(&self) -> &str {
        &self.shared.pool
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
        let namespaces: Vec<Namespace> = self.registry().namespaces().cloned().collect();
        self.shared.subscriber.serve(&namespaces, &self.shared.pool);
        let exec = self.shared.exec();
        let heartbeat = heartbeat::start(self.shared.clone(), namespaces.clone());
        let mut executions = JoinSet::new();
        // The first claim pass's runs execute before the housekeeping starts (see `startup`).
        let mut first_pass = Some(self.shared.startup.clone());
        let mut backoff = Duration::from_millis(50);
        // Claim errors said on stderr when no subscriber logs them.
        let unheard = unheard::Unheard::default();
        // When the last hint naming work started a pass.
        let mut last_hint: Option<tokio::time::Instant> = None;
        if !self.schedules.is_empty() || !namespaces.is_empty() {
            // Also with none declared: a schedule this code no longer declares goes inactive.
            let reconcile =
                schedules::reconcile(self.shared.clone(), self.schedules.clone(), stop.clone());
            tokio::spawn(crate::trace::in_current_dispatch(reconcile));
        }
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
            let mut jumped = exec.clock.jumped();
            let mut busy = false;
            let pass = async {
                let free = self.max_concurrent_runs.saturating_sub(executions.len());
                if free > 0 && !namespaces.is_empty() {
                    let (local_sent, now) = exec.store_clock.stamp();
                    let claimed = exec
                        .store
                        .claim(
                            ClaimRequest::new(
                                exec.id.clone(),
                                namespaces.clone(),
                                self.shared.pool.clone(),
                                free.min(64) as u32,
                                now,
                            )
                            .skip(exec.skipped()),
                        )
                        .await
                        .inspect_err(|error| crate::metrics::store_error("claim", error))?;
                    let runs = exec.took(local_sent, claimed);
                    busy |= runs.len() == free.min(64);
                    let settling = first_pass
                        .take()
                        .and_then(|startup| startup.first_pass(runs.len()));
                    let now = exec.clock.now();
                    for run in runs {
                        let queued_at = run.queued_at.unwrap_or(run.created_at);
                        let waited = u64::try_from(now.saturating_sub(queued_at)).unwrap_or(0);
                        crate::metrics::claimed(&run.namespace, Duration::from_millis(waited));
                        let executor = self.shared.executor.clone();
                        let settling = settling.clone();
                        executions.spawn(crate::trace::in_current_dispatch(async move {
                            executor.execute(run).await;
                            drop(settling);
                        }));
                    }
                }
                Ok::<(), StoreError>(())
            };
            // A pass waiting on the store (a claim, a sweep) does not hold up an abort.
            let result = tokio::select! {
                result = pass => result,
                Ok(_) = stop.wait_for(|stop| *stop == Stop::Now) => break,
            };
            // A first pass that claimed nothing (it failed, or claims nothing) waits for none.
            if let Some(startup) = first_pass.take() {
                startup.settle();
            }
            match result {
                Ok(()) => backoff = Duration::from_millis(50),
                Err(error) => {
                    tracing::warn!(%error, "worker could not reach the store; backing off");
                    unheard.claim_failed(&exec.id, &error);
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
            // Wait for a hint that concerns what this worker serves (or the clock's jump, or
            // a stop). Hints naming work (a store's notification, a queue's message) start a
            // pass at most every `BURST_GAP`, so a burst of starts is claimed in batches as a
            // poll would; "anything" (this process's wake-up, a poll) at once.
            loop {
                tokio::select! {
                    ready = self.shared.subscriber.next_signal() => {
                        if ready.concerns(&namespaces, &self.shared.pool) {
                            if ready != Ready::Anything {
                                if let Some(last) = last_hint {
                                    tokio::time::sleep_until(last + BURST_GAP).await;
                                }
                                last_hint = Some(tokio::time::Instant::now());
                            }
                            break;
                        }
                    }
                    _ = &mut jumped => break,
                    _ = stop.changed() => break,
                }
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
        self.shared.executor.drain();
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

/// The shortest time between two claim passes started by hints naming work: under a burst of
/// starts the worker claims in batches, while the first hint after a quiet spell is taken at
/// once. (One pass per hinted start cost a PostgreSQL worker 28 % of its throughput.)
const BURST_GAP: Duration = Duration::from_millis(5);

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
