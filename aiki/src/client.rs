//! Starting runs and acting on them from outside.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{
    BoxStore, CreateOutcome, ListRuns, Millis, NewRun, RunCursor, RunFilter, RunId, RunPage,
};

use crate::address::input_hash;
use crate::clock::{Clock, SystemClock};
use crate::error::ClientError;
use crate::handle::{AnyRun, RunHandle};
use crate::schema::Schema;
use crate::trace::Traceparent;
use crate::workflow::Workflow;

/// What a start does when its reference id already names a run with a different input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConflictPolicy {
    /// Fail with a conflict error (default). A start with the same input returns the existing
    /// run: starting is idempotent.
    #[default]
    Error,
    /// Return the existing run, whatever its input.
    ReturnExisting,
}

/// Starts workflow runs and hands out [`RunHandle`]s.
///
/// Cheap to clone; share one per process.
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) store: BoxStore,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) poll_interval: Duration,
}

impl Client {
    /// A client on a store, reading time from the system clock.
    pub fn new(store: BoxStore) -> Self {
        Client {
            store,
            clock: Arc::new(SystemClock),
            poll_interval: Duration::from_millis(20),
        }
    }

    /// Reads time from `clock` (use the workers' clock, e.g. a shared
    /// [`ManualClock`](crate::ManualClock) in tests).
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// How often `wait_for_status` and `result` look at the store (default 20 ms).
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// The store.
    pub fn store(&self) -> &BoxStore {
        &self.store
    }

    /// Starts a run of workflow version `W`; `.await` the returned builder, after setting a
    /// reference id, a pool or a start time if needed.
    pub fn start<W: Workflow>(&self, input: W::Input) -> Start<'_, W> {
        Start {
            client: self,
            input,
            reference_id: None,
            conflict_policy: ConflictPolicy::Error,
            pool: "default".to_owned(),
            start_at: None,
            traceparent: None,
            _workflow: PhantomData,
        }
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
}

/// A run start being configured. `.await` it.
#[derive(Debug)]
#[must_use = "a start does nothing until awaited"]
pub struct Start<'c, W: Workflow> {
    client: &'c Client,
    input: W::Input,
    reference_id: Option<String>,
    conflict_policy: ConflictPolicy,
    pool: String,
    start_at: Option<Millis>,
    traceparent: Option<Traceparent>,
    _workflow: PhantomData<fn() -> W>,
}

impl<'c, W: Workflow> Start<'c, W> {
    /// An idempotency key, unique per workflow version: a second start with the same key
    /// returns the first run (see [`ConflictPolicy`]).
    pub fn reference_id(mut self, reference_id: impl Into<String>) -> Self {
        self.reference_id = Some(reference_id.into());
        self
    }

    /// What to do when the reference id names a run with a different input.
    pub fn conflict_policy(mut self, policy: ConflictPolicy) -> Self {
        self.conflict_policy = policy;
        self
    }

    /// Routes the run to a worker pool (default `default`).
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = pool.into();
        self
    }

    /// Delivers the run at a time (ms since the epoch, on the client's clock) instead of now.
    pub fn start_at(mut self, at: Millis) -> Self {
        self.start_at = Some(at);
        self
    }

    /// The trace the run belongs to: every execution of the run links to it (default: the
    /// current OpenTelemetry context with the `otel` feature, none without). For a run
    /// started on behalf of a request that carried a W3C `traceparent` header.
    pub fn traceparent(mut self, traceparent: Traceparent) -> Self {
        self.traceparent = Some(traceparent);
        self
    }

    async fn send(self) -> Result<RunHandle<W>, ClientError> {
        let namespace = W::namespace();
        let invalid = |message: String| ClientError::InvalidInput {
            what: format!("input of {namespace}"),
            message,
        };
        let input = serde_json::to_value(&self.input).map_err(|e| invalid(e.to_string()))?;
        Schema::of::<W::Input>().validate(&input).map_err(invalid)?;
        let hash = input_hash(&self.input).map_err(|e| invalid(e.to_string()))?;
        let now = self.client.clock.now();
        let scheduled = self.start_at.filter(|at| *at > now);
        let outcome = self
            .client
            .store
            .create_run({
                let new = NewRun::new(namespace.clone(), input, hash.clone(), now)
                    .reference_id(self.reference_id.clone())
                    .pool(self.pool)
                    .traceparent(
                        self.traceparent
                            .or_else(crate::trace::current_traceparent)
                            .map(|traceparent| traceparent.to_string()),
                    );
                match scheduled {
                    Some(at) => new.scheduled_at(at),
                    None => new,
                }
            })
            .await?;
        let run = match outcome {
            CreateOutcome::Created(run) => {
                crate::metrics::run_started(&run.namespace);
                crate::wake::work_available();
                run
            }
            CreateOutcome::Existing(run) => {
                if run.input_hash != hash && self.conflict_policy == ConflictPolicy::Error {
                    return Err(ClientError::ReferenceConflict {
                        namespace: namespace.to_string(),
                        reference_id: self.reference_id.unwrap_or_default(),
                        existing: run.id,
                    });
                }
                run
            }
        };
        Ok(RunHandle::new(self.client.clone(), run.id))
    }
}

impl<'c, W: Workflow> IntoFuture for Start<'c, W> {
    type Output = Result<RunHandle<W>, ClientError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'c>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}
