//! Configuring a [`Worker`]: what it serves, how it finds work, its timings; checked at
//! [`build`](WorkerBuilder::build).

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{CatalogEntry, Namespace, TaskDeclaration};
use tokio::sync::Notify;

use super::{Erased, Registered, Shared, Worker};
use crate::clock::{Clock, SystemClock};
use crate::error::ClientError;
use crate::subscriber::{PollingSubscriber, Subscriber};
use crate::task::{StateMap, StateNeed, Task};
use crate::workflow::Workflow;

/// Configures a [`Worker`].
pub struct WorkerBuilder {
    store: super::WorkerStore,
    clock: Arc<dyn Clock>,
    workflows: Vec<(Namespace, Arc<dyn Registered>)>,
    state: StateMap,
    pool: String,
    worker_id: String,
    max_concurrent_runs: usize,
    poll_interval: Duration,
    claim_refresh_interval: Duration,
    shutdown_timeout: Duration,
    /// Whether to run the daemons: `None` runs them when the store offers the sweeper role.
    daemons: Option<bool>,
    subscriber: Option<Arc<dyn Subscriber>>,
    tasks: Vec<(&'static str, TypeId, &'static str)>,
    /// The declared tasks, for the catalog.
    declarations: Vec<TaskDeclaration>,
    /// The state each registered task reads, checked at `build`.
    state_needs: Vec<(&'static str, StateNeed)>,
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
    /// A builder on a store, with the defaults.
    pub(super) fn new(store: super::WorkerStore) -> Self {
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
            shutdown_timeout: Duration::from_secs(5),
            daemons: None,
            subscriber: None,
            tasks: Vec::new(),
            declarations: Vec::new(),
            state_needs: Vec::new(),
        }
    }

    /// Serves workflow version `W`. Several versions of one workflow can be served side by
    /// side; registering one namespace twice is an error at [`build`](WorkerBuilder::build).
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.workflows
            .push((W::namespace(), Arc::new(Erased(Arc::new(workflow)))));
        self
    }

    /// Declares a task this worker's workflows call, so that two different task types with one
    /// name are caught at [`build`](WorkerBuilder::build) instead of corrupting addresses, and
    /// the catalog lists it (name, output schema, retry policy) with the versions the worker
    /// registers.
    pub fn task<T: Task>(mut self, task: T) -> Self {
        self.tasks
            .push((T::NAME, TypeId::of::<T>(), std::any::type_name::<T>()));
        if self.declarations.iter().all(|known| known.name != T::NAME) {
            self.declarations.push(crate::catalog::task(&task));
        }
        self.state_needs
            .extend(T::needs_state().into_iter().map(|need| (T::NAME, need)));
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

    /// How often the store is polled for work (default 50 ms). Runs started, woken or ended
    /// in this process are picked up at once.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
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

    /// Checks the configuration.
    pub fn build(mut self) -> Result<Worker, ClientError> {
        if self.claim_refresh_interval.is_zero() {
            return Err(ClientError::Config(
                "claim_refresh_interval must be above zero".to_owned(),
            ));
        }
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
        if let Some((task, need)) = self
            .state_needs
            .iter()
            .find(|(_, need)| !self.state.has(need))
        {
            return Err(ClientError::Config(format!(
                "task `{task}` needs state of type `{}`; give it to the worker with \
                 `Worker::builder(..).state(value)`",
                need.type_name()
            )));
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
        self.declarations.sort_by(|a, b| a.name.cmp(&b.name));
        let mut registry = HashMap::new();
        for (namespace, workflow) in self.workflows {
            if registry.insert(namespace.clone(), workflow).is_some() {
                return Err(ClientError::Config(format!(
                    "workflow {namespace} is registered twice; register each version once"
                )));
            }
        }
        let mut catalog: Vec<CatalogEntry> = registry
            .values()
            .map(|workflow| {
                workflow
                    .catalog_entry(&self.declarations)
                    .published_by(self.worker_id.clone())
            })
            .collect();
        catalog.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        let store_clock = Arc::new(super::store_clock::StoreClock::new(self.clock));
        Ok(Worker {
            shared: Arc::new(Shared {
                catalog,
                called: Default::default(),
                store: self.store.executor,
                clock: store_clock.clone(),
                store_clock,
                served: Arc::new(registry.keys().cloned().collect()),
                registry,
                state: Arc::new(self.state),
                pool: self.pool,
                worker_id: self.worker_id,
                claim_refresh_interval: self.claim_refresh_interval,
                claim_idle_timeout_ms: std::sync::atomic::AtomicI64::new(
                    aiki_store::ConfigKey::ClaimIdleTimeout.default_value(),
                ),
                pruned_at: std::sync::atomic::AtomicI64::new(aiki_store::Millis::MIN),
                ended: Notify::new(),
                unreadable: Default::default(),
                draining: tokio::sync::watch::Sender::new(false),
                subscriber: self
                    .subscriber
                    .unwrap_or_else(|| Arc::new(PollingSubscriber::new(self.poll_interval))),
            }),
            max_concurrent_runs: self.max_concurrent_runs,
            shutdown_timeout: self.shutdown_timeout,
            sweeper,
        })
    }
}
