//! Starting runs and acting on them from outside.

use std::sync::Arc;
use std::time::Duration;

use aiki_store::{
    ClientStore, ConfigKey, ListRuns, Namespace, RunCursor, RunFilter, RunId, RunPage,
    RuntimeConfig,
};
use serde_json::Value;

use crate::clock::{Clock, SystemClock};
use crate::error::ClientError;
use crate::handle::{AnyRun, RunHandle};
use crate::workflow::Workflow;

mod schedule;
mod start;

pub use schedule::NewSchedule;
pub use start::{ConflictPolicy, Start, StartJson, input_hash_accepts, input_hash_json};

/// Starts workflow runs and hands out [`RunHandle`]s.
///
/// Cheap to clone; share one per process.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) store: Arc<dyn ClientStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) poll_interval: Duration,
    /// Who acts through this client: recorded on the timeline of every run it starts, forks,
    /// sends an event to or acts on.
    pub(crate) actor: Option<String>,
    /// The catalog entries starts and events were last checked against, when kept.
    pub(crate) checked: Option<Arc<crate::catalog::Kept>>,
    /// How long a write rides out a store out of reach before it fails.
    pub(crate) ride_out: Duration,
}

/// How long a client's write rides out a store (or an aiki server) out of reach by default.
pub const DEFAULT_RIDE_OUT: Duration = Duration::from_secs(30);

impl Client {
    /// A client on a store's client and read roles (any [`BoxStore`](aiki_store::BoxStore)
    /// coerces, as does a remote store such as `aiki_store::http::HttpStore`), reading time from
    /// the system clock.
    pub fn new(store: Arc<dyn ClientStore>) -> Self {
        Client {
            store,
            clock: Arc::new(SystemClock),
            poll_interval: Duration::from_millis(20),
            actor: None,
            checked: None,
            ride_out: DEFAULT_RIDE_OUT,
        }
    }

    /// How long a start, an event sent, an operator's action, a fork or a configuration change
    /// rides out a store or an aiki server out of reach (a restart, a failover) before it fails
    /// with [`StoreError::Unavailable`](aiki_store::StoreError::Unavailable): it is sent again
    /// with back-off meanwhile, as one operation (a server answers each send of it with its
    /// first answer, so it is done once). Default [`DEFAULT_RIDE_OUT`] (30 s); zero sends each
    /// once (an HTTP store still sends a request a few times within a second).
    pub fn ride_out(mut self, outage: Duration) -> Self {
        self.ride_out = outage;
        self
    }

    /// Sends `op`, a write, until the store answers or [`ride_out`](Client::ride_out) has
    /// passed since the first send; one operation whatever its sends (see `crate::resend`).
    pub(crate) async fn sent<F, Fut, T>(&self, op: F) -> Result<T, aiki_store::StoreError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, aiki_store::StoreError>>,
    {
        // Real time: an outage is not the client's clock's (a manual clock in tests).
        let began = std::time::Instant::now();
        let outage = self.ride_out;
        let result = crate::resend::resent(op, |error, attempt| {
            let again = began.elapsed() < outage;
            if again && (attempt == 1 || attempt.is_power_of_two()) {
                tracing::warn!(%error, attempt, "the store did not answer; sending again");
            }
            again
        })
        .await;
        result.map_err(|error| match error {
            aiki_store::StoreError::Unavailable { message, source } if !outage.is_zero() => {
                aiki_store::StoreError::Unavailable {
                    message: format!("{message} (still, after {outage:?} of retries)"),
                    source,
                }
            }
            error => error,
        })
    }

    /// Records `actor` (an operator's name, `user@host`, an API key's id) as who acts through
    /// this client: on the timeline of every run it starts, forks or acts on (cancel, pause,
    /// resume, wake-up, requeue, retry, release), and with every event it sends.
    pub fn with_actor(mut self, actor: impl Into<String>) -> Self {
        self.actor = Some(actor.into());
        self
    }

    /// Who acts through this client, if it was told.
    pub fn actor(&self) -> Option<&str> {
        self.actor.as_deref()
    }

    /// Reads time from `clock` (use the workers' clock, e.g. a shared
    /// [`ManualClock`](crate::ManualClock) in tests).
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Keeps the catalog entries that JSON starts and events are checked against (see
    /// [`catalog_entries`](Client::catalog_entries)) for up to `ttl`, instead of reading the
    /// catalog and the live workers for each: for a server that checks every start it serves.
    /// A build published meanwhile is checked against once its version's entries are older
    /// than `ttl`. Default: read for each check.
    pub fn keep_catalog_for(mut self, ttl: Duration) -> Self {
        self.checked = Some(Arc::new(crate::catalog::Kept::new(ttl)));
        self
    }

    /// How often `wait_for_status` and `result` look at the store (default 20 ms).
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The store's client and read roles.
    pub fn store(&self) -> &Arc<dyn ClientStore> {
        &self.store
    }

    /// Starts a run of workflow version `W`; `.await` the returned builder, after setting a
    /// reference id, a pool or a start time if needed.
    pub fn start<W: Workflow>(&self, input: W::Input) -> Start<'_, W> {
        Start::new(self, input)
    }

    /// Starts a run of `namespace` from JSON, for a version whose code this process does not
    /// have (an operator tool): the input is validated against the version's
    /// [catalog](Client::catalog) entry with the same [`ClientError::InvalidInput`] as
    /// [`start`](Client::start); a version missing from the catalog is
    /// [`ClientError::NotInCatalog`]. `.await` the returned builder.
    pub fn start_json(&self, namespace: Namespace, input: Value) -> StartJson<'_> {
        StartJson::new(self, namespace, input)
    }

    /// A handle on an existing run of `W`.
    pub fn handle<W: Workflow>(&self, id: RunId) -> RunHandle<W> {
        RunHandle::new(self.clone(), id)
    }

    /// A handle on an existing run of any workflow, for what an operator does to runs whose
    /// code it does not have.
    pub fn any_run(&self, id: RunId) -> AnyRun {
        AnyRun::new(self.clone(), id)
    }

    /// One page of up to `limit` runs passing `filter`, newest first, starting after `after`
    /// (the previous page's [`RunPage::next`]; `None` for the first page).
    ///
    /// ```
    /// # async fn list(client: aiki::Client) -> Result<(), aiki::ClientError> {
    /// use aiki::RunStatus;
    /// use aiki::store::RunFilter;
    ///
    /// let failed = RunFilter::default().workflow("order-processing").status(RunStatus::Failed);
    /// let mut after = None;
    /// loop {
    ///     let page = client.list_runs(failed.clone(), after, 50).await?;
    ///     for run in &page.runs {
    ///         println!("{} {}", run.id, run.error.as_ref().map_or("", |e| &e.message));
    ///     }
    ///     after = page.next;
    ///     if after.is_none() {
    ///         break;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_runs(
        &self,
        filter: RunFilter,
        after: Option<RunCursor>,
        limit: u32,
    ) -> Result<RunPage, ClientError> {
        let request = ListRuns::new(filter, limit).after(after);
        Ok(self.store.list_runs(request).await?)
    }

    /// The workers whose heartbeat the store has seen within `within` (on PostgreSQL, by the
    /// server's clock unless the store is told otherwise), by id. A worker beats once per
    /// claim-refresh interval (30 s by default), so `within` should be a few of those.
    pub async fn live_workers(
        &self,
        within: std::time::Duration,
    ) -> Result<Vec<aiki_store::WorkerRecord>, ClientError> {
        let within = i64::try_from(within.as_millis()).unwrap_or(i64::MAX);
        Ok(self
            .store
            .list_workers(crate::Clock::now(&crate::SystemClock), within)
            .await?)
    }

    /// The store's runtime configuration in force: the daemons' timings and limits, which
    /// every worker and server on the store follows (the defaults for keys never set).
    pub async fn runtime_config(&self) -> Result<RuntimeConfig, ClientError> {
        Ok(self.store.runtime_config().await?)
    }

    /// Sets one key of the store's runtime configuration (an operator's change); returns the
    /// configuration now in force. The daemons' leader follows it from its next pass, and
    /// workers learn a new claim idle timeout with their next claim.
    /// [`StoreError::Invalid`](aiki_store::StoreError::Invalid) for a value out of the key's
    /// range ([`ConfigKey::range`]), or below its safe minimum ([`ConfigKey::check_safe`]: a
    /// run retention below an hour, which [`set_short_retention`](Self::set_short_retention)
    /// sets when asked for explicitly). A claim idle timeout that is not above twice the claim
    /// refresh interval of a live worker is refused ([`ClientError::Config`], naming the
    /// workers), for claim recovery would take their runs from them; shorten their interval
    /// first, or [`force_config`](Self::force_config).
    ///
    /// ```no_run
    /// # async fn example(client: aiki::Client) -> Result<(), aiki::ClientError> {
    /// use aiki::ConfigKey;
    /// // Release the runs of executors that stopped refreshing after 2 minutes, not 90 s.
    /// client.set_config(ConfigKey::ClaimIdleTimeout, 120_000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_config(
        &self,
        key: ConfigKey,
        value: i64,
    ) -> Result<RuntimeConfig, ClientError> {
        if key == ConfigKey::ClaimIdleTimeout {
            let now = self.clock.now();
            let misfits: Vec<String> = self
                .store
                .list_workers(now, 3_600_000)
                .await?
                .into_iter()
                .filter(|worker| crate::ops::Liveness::of(worker, now).is_live())
                // A worker that serves no version (a server's daemons) claims nothing.
                .filter(|worker| !worker.namespaces.is_empty())
                .filter_map(|worker| {
                    let refresh = worker.claim_refresh_ms?;
                    (!aiki_store::claim_refresh_fits(refresh, value))
                        .then(|| format!("{} (refreshes every {refresh} ms)", worker.id))
                })
                .collect();
            if !misfits.is_empty() {
                return Err(ClientError::Config(format!(
                    "a claim idle timeout of {value} ms is not above twice the claim refresh \
                     interval of live workers, whose runs claim recovery would take from them: \
                     {}; shorten their refresh interval first, or force the change \
                     (`aiki config set --force`)",
                    misfits.join(", ")
                )));
            }
        }
        self.force_config(key, value).await
    }

    /// Sets one key of the store's runtime configuration as [`set_config`](Self::set_config)
    /// does, without checking the live workers against it.
    pub async fn force_config(
        &self,
        key: ConfigKey,
        value: i64,
    ) -> Result<RuntimeConfig, ClientError> {
        key.check_safe(value)?;
        let now = self.clock.now();
        Ok(self.sent(|| self.store.set_config(key, value, now)).await?)
    }

    /// Sets the run retention ([`ConfigKey::RunRetention`], ms) as
    /// [`set_config`](Self::set_config) does, allowing one below an hour, down to a second
    /// ([`PURGE_SHORTEST_AGE_MS`](aiki_store::PURGE_SHORTEST_AGE_MS)): for a trial or a test
    /// that wants to see ended runs purged without waiting an hour. A handle awaiting a run's
    /// result, a parent reading its child's or a start deduplicated by reference id may then
    /// find the run gone, so keep it off a production store.
    ///
    /// ```no_run
    /// # async fn example(client: aiki::Client) -> Result<(), aiki::ClientError> {
    /// // A trial: the daemons purge runs a minute after they end.
    /// client.set_short_retention(60_000).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_short_retention(
        &self,
        retention_ms: i64,
    ) -> Result<RuntimeConfig, ClientError> {
        let now = self.clock.now();
        Ok(self
            .store
            .set_config(ConfigKey::RunRetention, retention_ms, now)
            .await?)
    }
}
