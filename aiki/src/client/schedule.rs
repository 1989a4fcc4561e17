//! Schedules through a [`Client`]: creating one for a typed workflow version, and the
//! operator's actions on them.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use aiki_store::{
    OverlapPolicy, ScheduleActed, ScheduleAction, ScheduleCreated, ScheduleDefinition,
    ScheduleOrigin, ScheduleRecord, ScheduleSpec,
};

use super::Client;
use super::start::invalid_input;
use crate::clock::millis;
use crate::schema::Schema;
use crate::{ClientError, Workflow, input_hash};

/// A schedule being configured by [`Client::schedule`]: its overlap policy, catch-up window,
/// jitter and pool. `.await` it to create it; creating the same schedule (same name and
/// definition) again gives [`ScheduleCreated::Existing`], another definition under the same
/// name is refused.
#[derive(Debug)]
#[must_use = "a schedule is created only when awaited"]
pub struct NewSchedule<'c, W: Workflow> {
    client: &'c Client,
    name: String,
    spec: ScheduleSpec,
    input: W::Input,
    overlap: OverlapPolicy,
    catchup_window: Option<Duration>,
    jitter: Duration,
    pool: String,
    _workflow: PhantomData<fn() -> W>,
}

impl<'c, W: Workflow> NewSchedule<'c, W> {
    /// What an occurrence does while the previous run has not ended (`skip` by default).
    pub fn overlap(mut self, policy: OverlapPolicy) -> Self {
        self.overlap = policy;
        self
    }

    /// How late an occurrence may still start (by default one interval); older ones are
    /// recorded as missed. At most 7 days.
    pub fn catchup_window(mut self, window: Duration) -> Self {
        self.catchup_window = Some(window);
        self
    }

    /// Moves each occurrence's start later by an offset fixed for this schedule, at most
    /// `jitter` (at most 1 h), so that many schedules of one time do not start at once.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// The worker pool of its runs (`default` unless routed elsewhere).
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = pool.into();
        self
    }

    async fn send(self) -> Result<ScheduleCreated, ClientError> {
        let namespace = W::namespace();
        let invalid = |message: String| invalid_input(&namespace, message);
        let input = serde_json::to_value(&self.input).map_err(|e| invalid(e.to_string()))?;
        Schema::of::<W::Input>().validate(&input).map_err(invalid)?;
        let hash = input_hash(&self.input).map_err(|e| invalid(e.to_string()))?;
        let definition = ScheduleDefinition {
            spec: self.spec,
            namespace,
            input,
            input_hash: hash,
            pool: self.pool,
            overlap: self.overlap,
            catchup_window_ms: self.catchup_window.map(millis),
            jitter_ms: millis(self.jitter),
        };
        let now = self.client.clock.now();
        let record = ScheduleRecord::new(self.name, definition, ScheduleOrigin::Client, 1, now)?;
        let client = self.client;
        Ok(client
            .sent(|| {
                client
                    .store
                    .create_schedule(record.clone(), client.actor.clone())
            })
            .await?)
    }
}

impl<'c, W: Workflow> IntoFuture for NewSchedule<'c, W> {
    type Output = Result<ScheduleCreated, ClientError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'c>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

impl Client {
    /// A schedule named `name` starting runs of `W` with `input` at the occurrences of `spec`
    /// (a cron expression in a time zone, or an interval). `.await` it to create it. Through an
    /// aiki server, which does not have the code, it is also checked against the catalog
    /// ([`Client::check_schedule_json`]): an input no published build accepts is
    /// [`ClientError::InvalidInput`], and a version no worker has published yet is refused
    /// ([`ClientError::NotInCatalog`]; deploy the worker first, or declare the schedule in its
    /// code with [`WorkerBuilder::schedule`](crate::WorkerBuilder::schedule)).
    ///
    /// ```no_run
    /// # use aiki::store::{OverlapPolicy, ScheduleSpec};
    /// # #[aiki::workflow(name = "report", version = "1")]
    /// # async fn report(_run: &aiki::Run, _team: String) -> Result<(), aiki::WorkflowError> { Ok(()) }
    /// # async fn demo(client: aiki::Client) -> Result<(), aiki::ClientError> {
    /// client
    ///     .schedule::<Report>(
    ///         "weekday-report",
    ///         ScheduleSpec::cron_in("0 9 * * MON-FRI", "Europe/Berlin"),
    ///         "ops".to_owned(),
    ///     )
    ///     .overlap(OverlapPolicy::Skip)
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn schedule<W: Workflow>(
        &self,
        name: impl Into<String>,
        spec: ScheduleSpec,
        input: W::Input,
    ) -> NewSchedule<'_, W> {
        NewSchedule {
            client: self,
            name: name.into(),
            spec,
            input,
            overlap: OverlapPolicy::default(),
            catchup_window: None,
            jitter: Duration::ZERO,
            pool: "default".to_owned(),
            _workflow: PhantomData,
        }
    }

    /// Applies an operator's action to the schedule `name` now (pause, resume, trigger,
    /// backfill, redefine, delete; see [`ScheduleAction`]), as this client's actor.
    pub async fn act_on_schedule(
        &self,
        name: &str,
        action: ScheduleAction,
    ) -> Result<ScheduleActed, ClientError> {
        let now = self.clock.now();
        let acted = self
            .sent(|| {
                self.store
                    .act_on_schedule(name, action.clone(), self.actor.clone(), now)
            })
            .await?;
        if !acted.runs.is_empty() {
            crate::wake::work_available();
        }
        Ok(acted)
    }
}
