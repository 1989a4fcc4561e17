//! Workers: claim runs, execute them, keep their claims fresh, run the timer daemons.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use aiki_store::{
    BoxStore, ClaimRequest, EntryStatus, Millis, Namespace, RunRecord, RunStatus, StoreError,
    Transition,
};
use serde_json::Value;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinSet;

use crate::clock::{Clock, SystemClock};
use crate::error::{ClientError, WorkflowError};
use crate::retry::RetryPolicy;
use crate::run::{Run, Suspension};
use crate::schema::Schema;
use crate::subscriber::{PollingSubscriber, Subscriber};
use crate::task::{StateMap, Task};
use crate::workflow::Workflow;

use crate::wake::work_available;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A registered workflow version with its types erased.
trait Registered: Send + Sync {
    fn execute(&self, run: Run, input: Value) -> BoxFuture<Result<(Value, String), WorkflowError>>;
    fn retry(&self) -> RetryPolicy;
}

struct Erased<W>(Arc<W>);

impl<W: Workflow> Registered for Erased<W> {
    fn execute(&self, run: Run, input: Value) -> BoxFuture<Result<(Value, String), WorkflowError>> {
        let workflow = self.0.clone();
        Box::pin(async move {
            let input: W::Input = serde_json::from_value(input).map_err(|error| {
                WorkflowError::InputNotSerializable {
                    what: format!("recorded input of {}", W::namespace()),
                    message: error.to_string(),
                }
            })?;
            let output = workflow.run(&run, input).await?;
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
}

/// Configures a [`Worker`].
pub struct WorkerBuilder {
    store: BoxStore,
    clock: Arc<dyn Clock>,
    workflows: Vec<(Namespace, Arc<dyn Registered>)>,
    state: StateMap,
    pool: String,
    worker_id: String,
    max_concurrent_runs: usize,
    poll_interval: Duration,
    claim_refresh_interval: Duration,
    claim_idle_timeout: Duration,
    max_age: Duration,
    shutdown_timeout: Duration,
    daemons: bool,
    subscriber: Option<Arc<dyn Subscriber>>,
    tasks: Vec<(&'static str, TypeId, &'static str)>,
}

impl fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("worker_id", &self.worker_id)
            .field("pool", &self.pool)
            .field(
                "workflows",
                &self
                    .workflows
                    .iter()
                    .map(|(ns, _)| ns.to_string())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// Serves workflow version `W`. Several versions of one workflow can be served side by
    /// side; registering one namespace twice is an error at [`build`](WorkerBuilder::build).
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.workflows
            .push((W::namespace(), Arc::new(Erased(Arc::new(workflow)))));
        self
    }

    /// Declares a task this worker's workflows call, so that two different task types with one
    /// name are caught at [`build`](WorkerBuilder::build) instead of corrupting addresses.
    pub fn task<T: Task>(mut self, _task: T) -> Self {
        self.tasks
            .push((T::NAME, TypeId::of::<T>(), std::any::type_name::<T>()));
        self
    }

    /// How the worker discovers work (default: [`PollingSubscriber`] at the poll interval).
    pub fn subscriber(mut self, subscriber: impl Subscriber) -> Self {
        self.subscriber = Some(Arc::new(subscriber));
        self
    }

    /// Shared state for tasks (read with [`TaskContext::state`](crate::TaskContext::state) or a
    /// `State<T>` argument of a `#[task]`).
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// The clock (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The worker pool served (default `default`).
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = pool.into();
        self
    }

    /// The identity recorded as the owner of claimed runs (default: a random one).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = id.into();
        self
    }

    /// Runs executed at once (default 100).
    pub fn max_concurrent_runs(mut self, n: usize) -> Self {
        self.max_concurrent_runs = n;
        self
    }

    /// How often the store is polled for work and due timers (default 50 ms). Runs started,
    /// woken or ended in this process are picked up at once.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// How often a running run's claim is refreshed (default 30 s).
    pub fn claim_refresh_interval(mut self, interval: Duration) -> Self {
        self.claim_refresh_interval = interval;
        self
    }

    /// How long after its last refresh a claim counts as abandoned and the run is released
    /// (default 90 s; must be above the refresh interval).
    pub fn claim_idle_timeout(mut self, timeout: Duration) -> Self {
        self.claim_idle_timeout = timeout;
        self
    }

    /// How long a run may wait undelivered before it is stalled (default 24 h).
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// How long a shutdown waits for runs in progress (default 5 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Whether this worker also runs the timer daemons: wake-ups, claim recovery, stalling
    /// (default `true`; they are safe with many copies running).
    pub fn daemons(mut self, enabled: bool) -> Self {
        self.daemons = enabled;
        self
    }

    /// Checks the configuration.
    pub fn build(self) -> Result<Worker, ClientError> {
        if self.claim_idle_timeout <= self.claim_refresh_interval {
            return Err(ClientError::Config(format!(
                "claim_idle_timeout ({:?}) must be above claim_refresh_interval ({:?}), or live \
                 runs would be taken from healthy workers",
                self.claim_idle_timeout, self.claim_refresh_interval
            )));
        }
        if self.max_concurrent_runs == 0 {
            return Err(ClientError::Config(
                "max_concurrent_runs must be at least 1".to_owned(),
            ));
        }
        let mut tasks: HashMap<&'static str, (TypeId, &'static str)> = HashMap::new();
        for (name, id, type_name) in self.tasks {
            if let Some((other, other_name)) = tasks.insert(name, (id, type_name))
                && other != id
            {
                return Err(ClientError::Config(format!(
                    "two task types are named `{name}`: `{other_name}` and `{type_name}`; \
                     task names are durable addresses and must be unique"
                )));
            }
        }
        let mut registry = HashMap::new();
        for (namespace, workflow) in self.workflows {
            if registry.insert(namespace.clone(), workflow).is_some() {
                return Err(ClientError::Config(format!(
                    "workflow {namespace} is registered twice; register each version once"
                )));
            }
        }
        Ok(Worker {
            shared: Arc::new(Shared {
                store: self.store,
                clock: self.clock,
                registry,
                state: Arc::new(self.state),
                pool: self.pool,
                worker_id: self.worker_id,
                claim_refresh_interval: self.claim_refresh_interval,
                claim_idle_timeout: self.claim_idle_timeout,
                max_age: self.max_age,
                ended: Notify::new(),
                subscriber: self
                    .subscriber
                    .unwrap_or_else(|| Arc::new(PollingSubscriber::new(self.poll_interval))),
            }),
            max_concurrent_runs: self.max_concurrent_runs,
            poll_interval: self.poll_interval,
            shutdown_timeout: self.shutdown_timeout,
            daemons: self.daemons,
        })
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
    poll_interval: Duration,
    shutdown_timeout: Duration,
    daemons: bool,
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
    store: BoxStore,
    clock: Arc<dyn Clock>,
    registry: HashMap<Namespace, Arc<dyn Registered>>,
    state: Arc<StateMap>,
    pool: String,
    worker_id: String,
    claim_refresh_interval: Duration,
    claim_idle_timeout: Duration,
    max_age: Duration,
    /// An execution ended: there is room to claim more.
    ended: Notify,
    /// How work is discovered; also kept alive per run with its own heartbeat.
    subscriber: Arc<dyn Subscriber>,
}

impl Worker {
    /// A worker on a store, with the defaults.
    pub fn builder(store: BoxStore) -> WorkerBuilder {
        WorkerBuilder {
            store,
            clock: Arc::new(SystemClock),
            workflows: Vec::new(),
            state: StateMap::default(),
            pool: "default".to_owned(),
            worker_id: format!(
                "worker-{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
            max_concurrent_runs: 100,
            poll_interval: Duration::from_millis(50),
            claim_refresh_interval: Duration::from_secs(30),
            claim_idle_timeout: Duration::from_secs(90),
            max_age: Duration::from_secs(24 * 3600),
            shutdown_timeout: Duration::from_secs(5),
            daemons: true,
            subscriber: None,
            tasks: Vec::new(),
        }
    }

    /// This worker's identity.
    pub fn id(&self) -> &str {
        &self.shared.worker_id
    }

    /// Starts the claim loop on the current tokio runtime.
    pub fn start(self) -> WorkerHandle {
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(self.run(stop_rx));
        WorkerHandle {
            stop: stop_tx,
            task: Some(task),
        }
    }

    /// Runs the timer daemons once: due wake-ups, claim recovery, stalling. Returns how many
    /// runs they moved.
    async fn daemons_once(&self) -> Result<u64, StoreError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let woken = shared.store.wake_due(now).await?;
        let released = shared
            .store
            .release_stale_claims(now, shared.claim_idle_timeout.as_millis() as i64)
            .await?;
        for id in &released {
            tracing::warn!(run_id = %id, "claim went stale; run released for recovery");
        }
        let stalled = shared
            .store
            .stall_undelivered(now, shared.max_age.as_millis() as i64)
            .await?;
        Ok(woken + released.len() as u64 + stalled)
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        let namespaces: Vec<Namespace> = self.shared.registry.keys().cloned().collect();
        let mut executions = JoinSet::new();
        let mut backoff = Duration::from_millis(50);
        // While busy (claims come back full) the loop spins without waiting; the daemons then
        // run at most once per poll interval instead of once per claim.
        let mut daemons_ran = tokio::time::Instant::now();
        let mut was_busy = false;
        loop {
            if *stop.borrow() {
                break;
            }
            while executions.try_join_next().is_some() {}
            // Register interest before looking, so that a notification in between is not lost.
            let ended = self.shared.ended.notified();
            let jumped = self.shared.clock.jumped();
            tokio::pin!(ended);
            let mut busy = false;
            let result: Result<(), StoreError> = async {
                // Claim first: a run already queued starts without waiting for the daemons;
                // runs the daemons make due are claimed on the next pass (`busy`).
                let free = self.max_concurrent_runs.saturating_sub(executions.len());
                if free > 0 && !namespaces.is_empty() {
                    let claimed = self
                        .shared
                        .store
                        .claim(ClaimRequest {
                            owner: self.shared.worker_id.clone(),
                            namespaces: namespaces.clone(),
                            pool: self.shared.pool.clone(),
                            limit: free.min(64) as u32,
                            now: self.shared.clock.now(),
                        })
                        .await?;
                    busy |= claimed.len() == free.min(64);
                    for run in claimed {
                        executions.spawn(execute(self.shared.clone(), run));
                    }
                }
                if self.daemons && (!was_busy || daemons_ran.elapsed() >= self.poll_interval) {
                    daemons_ran = tokio::time::Instant::now();
                    busy |= self.daemons_once().await? > 0;
                }
                Ok(())
            }
            .await;
            match result {
                Ok(()) => backoff = Duration::from_millis(50),
                Err(error) => {
                    tracing::warn!(%error, "worker could not reach the store; backing off");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
            was_busy = busy;
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
        let drained = tokio::time::timeout(self.shutdown_timeout, async {
            while executions.join_next().await.is_some() {}
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
    }
}

/// A started worker. Dropping it stops the worker at once; [`shutdown`](WorkerHandle::shutdown)
/// stops it gracefully.
#[derive(Debug)]
pub struct WorkerHandle {
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl WorkerHandle {
    /// Stops claiming, waits up to the shutdown timeout for runs in progress, and leaves the
    /// rest for claim recovery.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
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

enum Outcome {
    Done(Result<(Value, String), WorkflowError>),
    Suspend(Suspension),
    Lost,
}

/// Executes one claimed run until it completes, fails, suspends or is lost.
async fn execute(shared: Arc<Shared>, claimed: RunRecord) {
    let id = claimed.id;
    let Some(workflow) = shared.registry.get(&claimed.namespace).cloned() else {
        tracing::error!(run_id = %id, "BUG: claimed a run of an unregistered namespace");
        return;
    };
    let history = match shared.store.load_history(id).await {
        Ok(history) if history.run.revision == claimed.revision => history,
        Ok(_) => return,
        Err(error) => {
            tracing::warn!(run_id = %id, %error, "could not load history; the claim will expire");
            return;
        }
    };
    let input = history.run.input.clone();
    let run = Run::from_history(
        history,
        shared.store.clone(),
        shared.clock.clone(),
        shared.state.clone(),
    );
    let (lost_tx, lost_rx) = oneshot::channel::<()>();
    let refresher = tokio::spawn(refresh_claim(shared.clone(), run.clone(), lost_tx));
    let mut future = workflow.execute(run.clone(), input);
    let driven = poll_fn(|cx| match future.as_mut().poll(cx) {
        Poll::Ready(result) => Poll::Ready(Outcome::Done(result)),
        Poll::Pending => match run.suspension() {
            Some(suspension) => Poll::Ready(Outcome::Suspend(suspension)),
            None => Poll::Pending,
        },
    });
    let outcome = tokio::select! {
        biased;
        _ = lost_rx => Outcome::Lost,
        outcome = driven => outcome,
    };
    drop(future);
    refresher.abort();
    let now = shared.clock.now();
    let result = match outcome {
        Outcome::Lost => return,
        Outcome::Suspend(suspension) => match run.take_fatal() {
            Some(error) => Err(error),
            None => {
                let transition = Transition {
                    due_at: suspension.due_at,
                    wait: Some(suspension.wait),
                    ..Transition::to(suspension.status, now)
                };
                finish(&run, transition).await;
                if let Some(due) = suspension.due_at {
                    wake_when_due(&shared, due);
                }
                return;
            }
        },
        Outcome::Done(result) => match run.take_fatal() {
            Some(error) => Err(error),
            None => result,
        },
    };
    match result {
        Ok((output, fingerprint)) => {
            let transition = Transition {
                output: Some(output),
                output_fingerprint: Some(fingerprint),
                ..Transition::to(RunStatus::Completed, now)
            };
            finish(&run, transition).await;
        }
        Err(WorkflowError::Lost(error)) => {
            tracing::info!(run_id = %id, %error, "run lost by this executor; stopping");
        }
        Err(error) => fail_or_retry(&shared, &run, workflow.retry(), error).await,
    }
}

/// Fails the run, or schedules a workflow retry: completed tasks will replay, failed ones run
/// again.
async fn fail_or_retry(shared: &Shared, run: &Run, policy: RetryPolicy, error: WorkflowError) {
    let now = shared.clock.now();
    let delay = if error.is_retryable() {
        policy.delay_after(run.attempt())
    } else {
        None
    };
    tracing::info!(run_id = %run.id(), %error, retry = ?delay, "workflow attempt failed");
    let Some(delay) = delay else {
        finish(
            run,
            Transition::to(RunStatus::Failed, now).error(error.to_failure()),
        )
        .await;
        return;
    };
    let due: Millis = now + delay.as_millis() as Millis;
    // Failed tasks run again in the next attempt, with a fresh attempt count.
    for entry in run.failed_tasks() {
        let reset = aiki_store::EntryRecord {
            status: EntryStatus::AwaitingRetry,
            attempts: 0,
            retry_at: Some(due),
            updated_at: now,
            ..entry
        };
        if let Err(error) = shared.store.put_entry(run.revision(), reset).await {
            tracing::warn!(run_id = %run.id(), %error, "could not schedule the retry; the claim will expire");
            return;
        }
    }
    let transition = Transition {
        attempts: Some(run.attempt() + 1),
        ..Transition::to(RunStatus::AwaitingRetry, now)
            .due_at(due)
            .error(error.to_failure())
    };
    finish(run, transition).await;
    wake_when_due(shared, due);
}

/// Timers due within this long get an in-process wake-up; later ones are found by polling.
const LOCAL_TIMER_HORIZON: Millis = 60_000;

/// Wakes this process's workers when a timer it just set is due, so a short sleep or retry
/// delay is not rounded up to the poll interval. The polling scan stays the recovery path.
fn wake_when_due(shared: &Shared, due: Millis) {
    let delay = due - shared.clock.now();
    if (0..=LOCAL_TIMER_HORIZON).contains(&delay) {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay as u64)).await;
            work_available();
        });
    }
}

/// The executor's last write for this execution.
async fn finish(run: &Run, transition: Transition) {
    let id = run.id();
    let revision = run.revision();
    let written = run
        .write(move |store| {
            let transition = transition.clone();
            async move { store.transition(id, revision, transition).await }
        })
        .await;
    match written {
        Ok(record) => {
            tracing::debug!(run_id = %id, status = %record.status, "run moved");
            work_available();
        }
        Err(error) => tracing::info!(run_id = %id, %error, "final write refused; stopping"),
    }
}

/// Refreshes the claim every interval (and, separately, the subscriber's own heartbeat for the
/// run); tells the executor when the run is lost.
async fn refresh_claim(shared: Arc<Shared>, run: Run, lost: oneshot::Sender<()>) {
    let mut ticker = tokio::time::interval(shared.claim_refresh_interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let result = shared
            .store
            .refresh_claim(
                run.id(),
                &shared.worker_id,
                run.revision(),
                shared.clock.now(),
            )
            .await;
        shared.subscriber.heartbeat(run.id()).await;
        match result {
            Ok(()) => {}
            Err(error) if error.is_transient() => {
                tracing::warn!(run_id = %run.id(), %error, "claim refresh failed; will retry");
            }
            Err(error) => {
                tracing::info!(run_id = %run.id(), %error, "claim lost");
                let _ = lost.send(());
                return;
            }
        }
    }
}
