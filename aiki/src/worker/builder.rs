//! Configuring a [`Worker`]: what it serves, how it finds work, its timings; checked at
//! [`build`](WorkerBuilder::build).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::CatalogEntry;

use super::{Shared, Worker};
use crate::clock::{Clock, SystemClock};
use crate::error::ClientError;
use crate::executor::Executor;
use crate::registry::{Registry, RegistryBuilder};
use crate::subscriber::{NotifySubscriber, PollingSubscriber, Subscriber};

/// How often a worker polls a store that sends ready hints, unless told otherwise.
const SAFETY_POLL: Duration = Duration::from_secs(5);
use crate::task::Task;
use crate::workflow::Workflow;

/// Configures a [`Worker`].
pub struct WorkerBuilder {
    store: super::WorkerStore,
    clock: Arc<dyn Clock>,
    /// What it serves: a registry given whole, and what was registered on the builder.
    registry: RegistryBuilder,
    pool: String,
    worker_id: String,
    max_concurrent_runs: usize,
    /// `None`: 50 ms, or 5 s as the safety net of a store that sends ready hints.
    poll_interval: Option<Duration>,
    claim_refresh_interval: Duration,
    history_limits: crate::HistoryLimits,
    shutdown_timeout: Duration,
    /// Whether to run the daemons: `None` runs them when the store offers the sweeper role.
    daemons: Option<bool>,
    subscriber: Option<Arc<dyn Subscriber>>,
    /// The schedules declared in code.
    schedules: Vec<super::Scheduled>,
}

impl fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("worker_id", &self.worker_id)
            .field("pool", &self.pool)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// A builder on a store, with the defaults.
    pub(super) fn new(store: super::WorkerStore) -> Self {
        WorkerBuilder {
            store,
            clock: Arc::new(SystemClock),
            registry: Registry::builder(),
            pool: "default".to_owned(),
            worker_id: crate::executor::random_id("worker"),
            max_concurrent_runs: 100,
            poll_interval: None,
            claim_refresh_interval: Duration::from_secs(30),
            history_limits: crate::HistoryLimits::default(),
            shutdown_timeout: Duration::from_secs(5),
            daemons: None,
            subscriber: None,
            schedules: Vec::new(),
        }
    }

    /// Declares a schedule in code: reconciled with the store when the worker starts, forward
    /// only (a higher [`generation`](super::Scheduled::generation) replaces the stored
    /// definition, an older binary's never does). A schedule in code of a workflow version
    /// this worker serves that it no longer declares becomes inactive. [`build`](Self::build)
    /// refuses an invalid declaration.
    pub fn schedule(mut self, schedule: super::Scheduled) -> Self {
        self.schedules.push(schedule);
        self
    }

    /// Serves what `registry` registers, declares and holds (with anything registered on this
    /// builder too; a version registered in both is an error at [`build`](Self::build)).
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = self.registry.registry(&registry);
        self
    }

    /// Serves workflow version `W`: [`RegistryBuilder::register`] on the worker's registry.
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.registry = self.registry.register(workflow);
        self
    }

    /// Declares a task its workflows call: [`RegistryBuilder::task`] on the worker's registry.
    pub fn task<T: Task>(mut self, task: T) -> Self {
        self.registry = self.registry.task(task);
        self
    }

    /// How the worker discovers work (default: a [`NotifySubscriber`] on a store that sends
    /// ready hints, a [`PollingSubscriber`] on any other, each at the
    /// [`poll_interval`](Self::poll_interval)).
    pub fn subscriber(mut self, subscriber: impl Subscriber) -> Self {
        self.subscriber = Some(Arc::new(subscriber));
        self
    }

    /// Shared state for tasks: [`RegistryBuilder::state`] on the worker's registry.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.registry = self.registry.state(value);
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

    /// How often the store is polled for work. Runs started, woken or ended in this process
    /// are picked up at once. On a store that sends hints when runs become ready
    /// ([`ExecutorStore::ready_signals`](aiki_store::ExecutorStore::ready_signals):
    /// PostgreSQL), the worker hears them through a [`NotifySubscriber`](crate::NotifySubscriber)
    /// and this poll is its safety net (default 5 s); on any other (SQLite, memory, a server,
    /// whose claims wait on its side) the default is 50 ms. Ignored with a
    /// [`subscriber`](Self::subscriber) of your own.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = Some(interval);
        self
    }

    /// How often a running run's claim is refreshed (default 30 s). It must stay below half of
    /// the store's claim idle timeout (the runtime configuration's
    /// [`ConfigKey::ClaimIdleTimeout`](aiki_store::ConfigKey::ClaimIdleTimeout), 90 s by
    /// default), or the worker refuses to start (see [`Worker::verify`]). How long a claim
    /// may go unrefreshed, how long a run may wait undelivered and how long the worker list
    /// keeps a gone worker are the store's (`aiki config`, [`Client::set_config`](crate::Client::set_config)),
    /// so that every process agrees on them.
    pub fn claim_refresh_interval(mut self, interval: Duration) -> Self {
        self.claim_refresh_interval = interval;
        self
    }

    /// How large a run's history may grow (default: a warning past 10,000 entries, the run's
    /// failure at 50,000; see [`HistoryLimits`](crate::HistoryLimits)).
    pub fn history_limits(mut self, limits: crate::HistoryLimits) -> Self {
        self.history_limits = limits;
        self
    }

    /// How long a shutdown waits for runs in progress (default 5 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Whether this worker also runs the timer daemons: wake-ups, claim recovery, stalling
    /// (of all the workers that do, the holder of the store's daemons lease sweeps, the others
    /// stand by to take over). By default it does when its store offers the
    /// sweeper role (see [`WorkerStore`](super::WorkerStore)); [`build`](Self::build) refuses
    /// `true` on a store without it.
    pub fn daemons(mut self, enabled: bool) -> Self {
        self.daemons = Some(enabled);
        self
    }

    /// Checks the configuration, and builds the registry (see [`RegistryBuilder::build`]).
    pub fn build(self) -> Result<Worker, ClientError> {
        let sweeper = match (self.daemons, self.store.sweeper) {
            (Some(true), None) => {
                return Err(ClientError::Config(
                    "daemons(true) needs a store with the sweeper role; this store only executes \
                     (the server in front of it runs the daemons): leave daemons unset"
                        .to_owned(),
                ));
            }
            (Some(false), _) => None,
            (_, sweeper) => sweeper,
        };
        if self.max_concurrent_runs == 0 {
            return Err(ClientError::Config(
                "max_concurrent_runs must be at least 1".to_owned(),
            ));
        }
        let registry = self.registry.build()?;
        let mut declared: Vec<aiki_store::ScheduleRecord> = Vec::new();
        for schedule in &self.schedules {
            let record = schedule.record(self.clock.now())?;
            let namespace = &record.definition.namespace;
            if !registry.namespaces().any(|served| served == namespace) {
                return Err(ClientError::Config(format!(
                    "schedule `{}` starts runs of {namespace}, which this worker does not \
                     register: register the workflow version on the worker that declares it",
                    record.name
                )));
            }
            declared.push(record);
        }
        aiki_store::schedule::check_declarations(&declared)?;
        let catalog: Vec<CatalogEntry> = registry
            .catalog()
            .into_iter()
            .map(|entry| entry.published_by(self.worker_id.clone()))
            .collect();
        let subscriber =
            self.subscriber
                .unwrap_or_else(|| match self.store.executor.ready_signals() {
                    Some(signals) => Arc::new(
                        NotifySubscriber::new(signals)
                            .safety_poll(self.poll_interval.unwrap_or(SAFETY_POLL)),
                    ),
                    None => Arc::new(PollingSubscriber::new(
                        self.poll_interval.unwrap_or(Duration::from_millis(50)),
                    )),
                });
        let executor = Executor::builder(self.store.executor, registry)
            .id(self.worker_id)
            .shared_clock(self.clock)
            .claim_refresh_interval(self.claim_refresh_interval)
            .history_limits(self.history_limits)
            .subscriber(subscriber.clone())
            .build()?;
        Ok(Worker {
            shared: Arc::new(Shared {
                executor,
                pool: self.pool,
                catalog,
                pruned_at: std::sync::atomic::AtomicI64::new(aiki_store::Millis::MIN),
                subscriber,
                startup: super::startup::Startup::new(),
            }),
            max_concurrent_runs: self.max_concurrent_runs,
            shutdown_timeout: self.shutdown_timeout,
            sweeper,
            schedules: self.schedules,
        })
    }
}
