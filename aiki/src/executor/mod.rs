//! The executor: executes one claimed run from a [`Registry`], whoever claimed it: the
//! [`Worker`](crate::Worker)'s claim loop, or another route that hands it a run its id
//! claimed (a push endpoint).
//!
//! One run's execution is in `run`, the claim refresh beside it in `refresh`, the clock read
//! as the store's in `store_clock`, the check against the store's claim idle timeout in
//! `config`.

mod budget;
mod config;
mod history;
mod refresh;
mod run;
pub(crate) mod store_clock;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;

use aiki_store::{ClaimRequest, Claimed, ExecutorStore, Millis, RunId, RunRecord};
use tokio::sync::watch;

use crate::called::CalledTasks;
use crate::clock::{Clock, SystemClock};
use crate::error::ClientError;
use crate::registry::Registry;
use crate::subscriber::Subscriber;
use store_clock::StoreClock;

pub(crate) use budget::Budget;
pub(crate) use run::Report;

/// Executes claimed runs of the workflow versions its [`Registry`] serves: replays each,
/// runs its new work, keeps its claim fresh meanwhile, and writes where it ended (completed,
/// failed, suspended, scheduled for a retry, released). Cheap to clone; the clones share
/// their executions' drain.
///
/// A [`Worker`](crate::Worker) holds one and feeds it the runs its claim loop claims. Any other
/// route that claims runs under the executor's [`id`](Self::id) can hand them to
/// [`execute`](Self::execute) the same way:
///
/// ```
/// # use aiki::{Executor, Registry};
/// # use aiki::store::{ClaimRequest, ExecutorStore};
/// # async fn demo() -> Result<(), aiki::ClientError> {
/// let store = aiki::connect("memory:").await?;
/// let registry = Registry::builder().build()?; // .register(MyWorkflow) first
/// let executor = Executor::builder(store.clone(), registry.clone()).id("push-1").build()?;
/// let namespaces = registry.namespaces().cloned().collect();
/// let request = ClaimRequest::new(executor.id(), namespaces, "default", 1, 0);
/// for run in store.claim(request).await?.runs {
///     executor.execute(run).await;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Executor {
    parts: Arc<Parts>,
}

/// What the executions of one executor share.
pub(crate) struct Parts {
    pub(crate) store: Arc<dyn ExecutorStore>,
    /// The executor's clock read as the store's: `store_clock`.
    pub(crate) clock: Arc<dyn Clock>,
    /// Learns the store's time from claims and leases (see [`store_clock`]).
    pub(crate) store_clock: Arc<StoreClock>,
    pub(crate) registry: Registry,
    /// The identity its claims are held under.
    pub(crate) id: String,
    /// The tasks its runs were seen calling: added to their versions' catalog entries.
    pub(crate) called: Arc<CalledTasks>,
    pub(crate) claim_refresh_interval: Duration,
    /// How large a run's history may grow.
    pub(crate) history_limits: crate::HistoryLimits,
    /// The claim idle timeout in force, as the store last told it (the runtime configuration's
    /// [`ConfigKey::ClaimIdleTimeout`](aiki_store::ConfigKey::ClaimIdleTimeout)).
    pub(crate) claim_idle_timeout_ms: AtomicI64,
    /// Kept alive per run with its own heartbeat, if the runs came through one.
    subscriber: Option<Arc<dyn Subscriber>>,
    /// Set on a graceful shutdown: every execution drains (finishes the tasks in flight, starts
    /// no new one) and releases its run.
    draining: watch::Sender<bool>,
    /// Runs this executor released because their history holds values only a newer release
    /// understands, and until when it leaves them to others.
    unreadable: std::sync::Mutex<HashMap<RunId, Millis>>,
}

/// How long an executor leaves a run it cannot read (a record from a newer release) to others.
const UNREADABLE_BACKOFF: Millis = 5 * 60 * 1000;

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("id", &self.parts.id)
            .field("registry", &self.parts.registry)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor of `registry`'s versions on `store`, with the defaults.
    pub fn builder(store: Arc<dyn ExecutorStore>, registry: Registry) -> ExecutorBuilder {
        ExecutorBuilder {
            store,
            registry,
            clock: Arc::new(SystemClock),
            id: random_id("executor"),
            claim_refresh_interval: Duration::from_secs(30),
            history_limits: crate::HistoryLimits::default(),
            subscriber: None,
        }
    }

    /// The identity its claims are held under: claim runs for it with this id.
    pub fn id(&self) -> &str {
        &self.parts.id
    }

    /// The versions it executes.
    pub fn registry(&self) -> &Registry {
        &self.parts.registry
    }

    /// Executes `claimed`, a run claimed under this executor's [`id`](Self::id), until it
    /// completes, fails, suspends, is released or is lost (its claim taken by claim recovery,
    /// or the store refusing a write), refreshing its claim meanwhile. Whatever happens is
    /// written to the store or logged; a run of a version the registry does not serve is
    /// released back to `queued` at once (claim only the registry's versions).
    pub async fn execute(&self, claimed: RunRecord) {
        run::execute(self.parts.clone(), claimed, None).await;
    }

    /// Claims run `id` by name under this executor's [`id`](Self::id) and executes it, as
    /// [`execute`](Self::execute) does: for a run delivered to this executor alone (a push).
    /// `false` when the run was not claimable: another executor has it, it moved on, or it is
    /// of a version the registry does not serve. A duplicated delivery is harmless: only one
    /// claim succeeds.
    pub async fn claim_and_execute(&self, id: RunId) -> Result<bool, ClientError> {
        Ok(self.claim_and_execute_within(id, None).await?.is_some())
    }

    /// Claims run `id` by name and executes it, within `budget` if given (a push endpoint's
    /// delivery): `None` when the run was not claimable, else what the execution did.
    pub(crate) async fn claim_and_execute_within(
        &self,
        id: RunId,
        budget: Option<Budget>,
    ) -> Result<Option<Report>, ClientError> {
        let parts = self.parts();
        let namespaces = parts.registry.namespaces().cloned().collect();
        let (local_sent, now) = parts.store_clock.stamp();
        let request = ClaimRequest::new(parts.id.clone(), namespaces, "", 1, now);
        let claimed = parts.store.claim_run(request, id).await?;
        let Some(run) = parts.took(local_sent, claimed).into_iter().next() else {
            return Ok(None);
        };
        Ok(Some(run::execute(self.parts.clone(), run, budget).await))
    }

    /// Asks every execution in progress, and every later one, to drain: finish the tasks in
    /// flight, start no new one, and release the run back to `queued` for another executor
    /// (or suspend or end it, if that is where it stands). For a graceful shutdown.
    pub fn drain(&self) {
        self.parts.draining.send_replace(true);
    }

    pub(crate) fn parts(&self) -> &Arc<Parts> {
        &self.parts
    }
}

impl Parts {
    /// Takes note of what a claim sent at `local_sent` (by the local clock) tells: the store's
    /// time, and the claim idle timeout in force. Returns the runs claimed.
    ///
    /// A claim sent again after its first answer was lost ([`Claimed::repeated`]: a server
    /// restarted meanwhile, say) may bring the runs the first send claimed, stamped at that
    /// send's time, seconds before `local_sent`: read as the store's time, it would move this
    /// worker's clock back by the outage. It is not read.
    pub(crate) fn took(&self, local_sent: Millis, claimed: Claimed) -> Vec<RunRecord> {
        if let Some(store_now) = claimed.now().filter(|_| !claimed.repeated) {
            self.store_clock.observe(local_sent, store_now);
        }
        if let Some(idle_ms) = claimed.claim_idle_timeout_ms {
            self.check_idle_timeout(idle_ms);
        }
        claimed.runs
    }

    /// The runs to leave unclaimed now.
    pub(crate) fn skipped(&self) -> Vec<RunId> {
        let now = self.clock.now();
        let mut unreadable = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        unreadable.retain(|_, until| *until > now);
        unreadable.keys().copied().collect()
    }

    /// Leaves `run` to other executors for a while.
    fn back_off_from(&self, run: RunId) {
        let until = self.clock.now().saturating_add(UNREADABLE_BACKOFF);
        let mut unreadable = self.unreadable.lock().unwrap_or_else(|e| e.into_inner());
        unreadable.insert(run, until);
    }
}

/// An identity unique to this process and call: `{prefix}-{pid}-{8 hex digits}`.
pub(crate) fn random_id(prefix: &str) -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}-{}", std::process::id(), &random[..8])
}

/// Configures an [`Executor`].
pub struct ExecutorBuilder {
    store: Arc<dyn ExecutorStore>,
    registry: Registry,
    clock: Arc<dyn Clock>,
    id: String,
    claim_refresh_interval: Duration,
    history_limits: crate::HistoryLimits,
    subscriber: Option<Arc<dyn Subscriber>>,
}

impl fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecutorBuilder")
            .field("id", &self.id)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl ExecutorBuilder {
    /// The identity its claims are held under (default: a random one).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// The clock (default: the system clock), corrected by the store's time as claims and
    /// leases tell it.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The clock, shared with the worker that builds it.
    pub(crate) fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How often a running run's claim is refreshed (default 30 s); it must stay below half
    /// of the store's claim idle timeout (see [`Executor::verify`]).
    pub fn claim_refresh_interval(mut self, interval: Duration) -> Self {
        self.claim_refresh_interval = interval;
        self
    }

    /// How large a run's history may grow (default: a warning past 10,000 entries, the
    /// run's failure at 50,000; see [`HistoryLimits`](crate::HistoryLimits)).
    pub fn history_limits(mut self, limits: crate::HistoryLimits) -> Self {
        self.history_limits = limits;
        self
    }

    /// The subscriber the runs came through, renewed per run beside the claim refresh.
    pub(crate) fn subscriber(mut self, subscriber: Arc<dyn Subscriber>) -> Self {
        self.subscriber = Some(subscriber);
        self
    }

    /// Checks the configuration.
    pub fn build(self) -> Result<Executor, ClientError> {
        if self.claim_refresh_interval.is_zero() {
            return Err(ClientError::Config(
                "claim_refresh_interval must be above zero".to_owned(),
            ));
        }
        self.history_limits.check().map_err(ClientError::Config)?;
        let store_clock = Arc::new(StoreClock::new(self.clock));
        Ok(Executor {
            parts: Arc::new(Parts {
                store: self.store,
                clock: store_clock.clone(),
                store_clock,
                registry: self.registry,
                id: self.id,
                called: Default::default(),
                claim_refresh_interval: self.claim_refresh_interval,
                history_limits: self.history_limits,
                claim_idle_timeout_ms: AtomicI64::new(
                    aiki_store::ConfigKey::ClaimIdleTimeout.default_value(),
                ),
                subscriber: self.subscriber,
                draining: watch::Sender::new(false),
                unreadable: Default::default(),
            }),
        })
    }
}
