//! Testing workflows: [`TestEnv`], the memory store, a manual clock and an in-process worker in
//! one value (feature `testing`).
//!
//! Time stands still unless the test moves it, or waits: [`TestEnv::result`] and
//! [`TestEnv::wait_for_status`] run the worker until every run is blocked on time or on outside
//! input, and then, only if the run awaited still has not got there, skip the clock to the
//! next due timer (a sleep, a retry delay, an event or child wait's timeout, a scheduled start)
//! and go on. A 7-day event timeout therefore never fires before the test's next line sends
//! the event: nothing moves time while the test is not waiting. A 30-day workflow with
//! retries and timeouts runs in milliseconds.
//!
//! ```
//! use std::time::Duration;
//! use aiki::testing::TestEnv;
//! use aiki::{Run, TaskError, WorkflowError};
//!
//! #[aiki::task(name = "send-reminder")]
//! async fn send_reminder(to: String) -> Result<String, TaskError> {
//!     unreachable!("mocked in the test")
//! }
//!
//! #[aiki::workflow(name = "trial", version = "1", events(upgraded))]
//! async fn trial(run: &Run, user: String) -> Result<String, WorkflowError> {
//!     let upgraded = run.events().upgraded().wait_timeout(Duration::from_secs(30 * 86_400)).await?;
//!     match upgraded {
//!         Some(()) => Ok("upgraded".into()),
//!         None => SendReminder.start(run, user).await,
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), aiki::ClientError> {
//! let env = TestEnv::builder()
//!     .workflows(|w| w.register(Trial))
//!     .mock(SendReminder, |to: String| async move { Ok(format!("reminded {to}")) })
//!     .start()?;
//! let run = env.start::<Trial>("ann".into()).await?;
//! // Thirty days pass in the blink of an eye: nobody upgraded.
//! assert_eq!(env.result(&run).await?, "reminded ann");
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{
    History, ListRuns, Millis, Namespace, RunFilter, RunRecord, RunStatus, StatusChange,
};
use serde_json::Value;

use crate::clock::{Clock, ManualClock};
use crate::error::{ClientError, TaskError};
use crate::handle::{RunHandle, RunRef};
use crate::task::{MockFn, Mocks, Task};
use crate::workflow::{Event, Workflow};
use crate::{BoxStore, Client, Worker, WorkerBuilder, WorkerHandle};

type Configure = Box<dyn FnOnce(WorkerBuilder) -> WorkerBuilder>;

/// Builds a [`TestEnv`]: its workflows, tasks and state, and its mocks.
pub struct TestEnvBuilder {
    configure: Vec<Configure>,
    mocks: HashMap<&'static str, MockFn>,
    clock: ManualClock,
}

impl std::fmt::Debug for TestEnvBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnvBuilder")
            .field("mocks", &self.mocks.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl TestEnvBuilder {
    /// Registers workflows (and tasks, state) on the worker, as a service's own worker does:
    /// `|w| w.register(Checkout).state(db)`.
    pub fn workflows(
        mut self,
        configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder + 'static,
    ) -> Self {
        self.configure.push(Box::new(configure));
        self
    }

    /// Serves what `registry` registers, as the service's own worker does
    /// (`Worker::builder(store).registry(registry)`), with the env's mocks added to its state.
    pub fn registry(self, registry: crate::Registry) -> Self {
        self.workflows(move |worker| worker.registry(registry))
    }

    /// Replaces `task`'s handler with `mock` for this test: every attempt of the task calls it
    /// instead (its input and output go through JSON, as recorded ones do).
    pub fn mock<T, F, Fut>(mut self, _task: T, mock: F) -> Self
    where
        T: Task,
        F: Fn(T::Input) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T::Output, TaskError>> + Send + 'static,
    {
        let mock = Arc::new(mock);
        let erased: MockFn = Arc::new(move |input: Value| {
            let mock = mock.clone();
            Box::pin(async move {
                let input: T::Input = serde_json::from_value(input)
                    .map_err(|error| TaskError::new(format!("the mock's input: {error}")))?;
                let output = mock(input).await?;
                serde_json::to_value(output)
                    .map_err(|error| TaskError::new(format!("the mock's output: {error}")))
            })
        });
        self.mocks.insert(T::NAME, erased);
        self
    }

    /// Starts the clock at `now` (default: the wall-clock time when the builder was made).
    pub fn starting_at(mut self, now: Millis) -> Self {
        self.clock = ManualClock::new(now);
        self
    }

    /// Builds the worker and starts it, on the current tokio runtime.
    pub fn start(self) -> Result<TestEnv, ClientError> {
        let store: BoxStore = Arc::new(aiki_store::memory::MemoryStore::new());
        let clock = self.clock;
        let client = Client::new(store.clone())
            .with_clock(clock.clone())
            .with_poll_interval(Duration::from_millis(1));
        let mut env = TestEnv {
            store,
            clock,
            client,
            mocks: Mocks(self.mocks),
            served: Vec::new(),
            pool: String::new(),
            worker: None,
        };
        env.start_worker(self.configure)?;
        Ok(env)
    }
}

/// The memory store, a manual clock and an in-process worker, for a workflow's own tests; see
/// the [module docs](self).
#[derive(Debug)]
pub struct TestEnv {
    store: BoxStore,
    clock: ManualClock,
    client: Client,
    mocks: Mocks,
    served: Vec<Namespace>,
    pool: String,
    worker: Option<WorkerHandle>,
}

impl std::fmt::Debug for Mocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// Retry delays up to this long are slept in process, on the env's clock, while the run
/// executes ([`crate::run`]'s `INLINE_RETRY_MAX`).
const INLINE_RETRY_MAX_MS: Millis = 5;

/// How long, in real time, the env waits for its worker to settle before it gives up: a run
/// whose workflow code waits on something not durable never does.
const PATIENCE: Duration = Duration::from_secs(30);

impl TestEnv {
    /// A builder: [`workflows`](TestEnvBuilder::workflows), [`mock`](TestEnvBuilder::mock),
    /// then [`start`](TestEnvBuilder::start).
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder {
            configure: Vec::new(),
            mocks: HashMap::new(),
            clock: ManualClock::starting_now(),
        }
    }

    fn start_worker(&mut self, configure: Vec<Configure>) -> Result<(), ClientError> {
        let mut builder = Worker::builder(self.store.clone())
            .clock(self.clock.clone())
            .poll_interval(Duration::from_millis(1))
            .worker_id("test-env")
            .state(self.mocks.clone());
        for configure in configure {
            builder = configure(builder);
        }
        let worker = builder.build()?;
        self.served = worker.registry().namespaces().cloned().collect();
        self.pool = worker.pool().to_owned();
        self.worker = Some(worker.start());
        Ok(())
    }

    /// Deploys new code under the runs in flight: stops the worker (letting what it executes
    /// finish) and starts one configured by `configure` on the same store and clock, with the
    /// same mocks. For testing a change to a running workflow: start runs, let them suspend,
    /// deploy the changed code, and see what their replay does.
    pub async fn deploy(
        &mut self,
        configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder + 'static,
    ) -> Result<(), ClientError> {
        self.run_until_idle().await?;
        if let Some(worker) = self.worker.take() {
            worker.shutdown().await;
        }
        self.start_worker(vec![Box::new(configure)])
    }

    /// The client, for anything the env has no shortcut for.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The store (memory).
    pub fn store(&self) -> &BoxStore {
        &self.store
    }

    /// The clock the worker and the client read.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The time now, on the env's clock.
    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Starts a run of `W`.
    pub async fn start<W: Workflow>(&self, input: W::Input) -> Result<RunHandle<W>, ClientError> {
        self.client.start::<W>(input).await
    }

    /// Sends `run` an event.
    pub async fn send<E: Event, W: Workflow>(
        &self,
        run: &RunHandle<W>,
        payload: E::Payload,
    ) -> Result<(), ClientError> {
        run.send::<E>(payload).await
    }

    /// Runs until idle (whatever the test just did happens first, at the time it did it),
    /// moves the clock forward by `by`, and runs until idle again.
    pub async fn advance(&self, by: Duration) -> Result<(), ClientError> {
        self.run_until_idle().await?;
        self.clock.advance(by);
        self.run_until_idle().await
    }

    /// As [`advance`](TestEnv::advance), to `at`.
    pub async fn advance_to(&self, at: Millis) -> Result<(), ClientError> {
        self.run_until_idle().await?;
        self.clock.advance_to(at);
        self.run_until_idle().await
    }

    /// Skips to the next occurrence of the active schedules: moves the clock to the earliest
    /// one's time (its jitter included), waits for the daemons to fire it and runs until idle.
    /// Returns the time moved to, or `None` (nothing done) when no schedule is active.
    pub async fn skip_to_next_occurrence(&self) -> Result<Option<Millis>, ClientError> {
        self.run_until_idle().await?;
        let next = self
            .store
            .schedules()
            .await?
            .into_iter()
            .filter(|schedule| schedule.status == aiki_store::ScheduleStatus::Active)
            .filter_map(|schedule| schedule.fire_at().map(|at| (at, schedule.name)))
            .min();
        let Some((at, name)) = next else {
            return Ok(None);
        };
        self.clock.advance_to(at.max(self.clock.now()));
        let deadline = tokio::time::Instant::now() + PATIENCE;
        // The sweep has fired the occurrence once the schedule's next time moved past it.
        while self
            .store
            .schedule(&name)
            .await?
            .fire_at()
            .is_some_and(|next| next <= at)
        {
            if tokio::time::Instant::now() >= deadline {
                return Err(ClientError::Timeout(PATIENCE));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.run_until_idle().await?;
        Ok(Some(at))
    }

    /// Runs the worker until every run is blocked on time or on outside input: none is queued
    /// or running, and no timer is due. Never moves time, but for a task retried in process
    /// (a retry delay of a few milliseconds, slept while the run executes).
    pub async fn run_until_idle(&self) -> Result<(), ClientError> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let busy = self.busy().await?;
            let Some(run) = busy else {
                return Ok(());
            };
            if run.status == RunStatus::Running
                && let Some(next) = self.clock.next_deadline()
                && next - self.clock.now() <= INLINE_RETRY_MAX_MS
            {
                self.clock.advance_to(next);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClientError::Timeout(PATIENCE)).inspect_err(|_| {
                    tracing::warn!(run_id = %run.id, status = %run.status, "the test env did not settle");
                });
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// A run the worker still has to act on, if any (with the clock still catching up, the
    /// first live run: the sleepers it woke are acting).
    async fn busy(&self) -> Result<Option<RunRecord>, ClientError> {
        let now = self.clock.now();
        let live = self.live_runs().await?;
        for run in &live {
            let acting = matches!(run.status, RunStatus::Queued | RunStatus::Running);
            let due = run.due_at.is_some_and(|due| due <= now);
            if self.moves(run) && (acting || due) {
                return Ok(Some(run.clone()));
            }
        }
        if !self.clock.settled() {
            return Ok(live.into_iter().next());
        }
        Ok(None)
    }

    /// Whether the env's worker moves `run` when it is due: its version and pool are served,
    /// and it is not paused or stalled (only an operator moves those).
    fn moves(&self, run: &RunRecord) -> bool {
        self.served.contains(&run.namespace)
            && run.pool == self.pool
            && !matches!(run.status, RunStatus::Paused | RunStatus::Stalled)
    }

    async fn live_runs(&self) -> Result<Vec<RunRecord>, ClientError> {
        let mut filter = RunFilter::default();
        filter.statuses = RunStatus::ALL
            .into_iter()
            .filter(|status| !status.is_terminal())
            .collect();
        let mut runs = Vec::new();
        let mut cursor = None;
        loop {
            let page = self
                .store
                .list_runs(ListRuns::new(filter.clone(), 1000).after(cursor))
                .await?;
            runs.extend(page.runs);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(runs),
            }
        }
    }

    /// Runs until idle, then skips the clock to the next due timer; `false` when there is
    /// none (every run waits on outside input).
    async fn step(&self) -> Result<bool, ClientError> {
        self.run_until_idle().await?;
        let next = self
            .live_runs()
            .await?
            .into_iter()
            .filter(|run| self.moves(run))
            .filter_map(|run| run.due_at)
            .filter(|due| *due > self.clock.now())
            .min();
        let Some(at) = next else {
            return Ok(false);
        };
        self.clock.advance_to(at);
        // Let the woken sleepers (the worker's timers) act before looking again.
        tokio::time::sleep(Duration::from_millis(1)).await;
        Ok(true)
    }

    /// Waits for `run` to complete and returns its output, skipping time while nothing else
    /// can happen. A run that can only wait on outside input (an event nobody sends) is
    /// [`ClientError::Blocked`]; one that ends otherwise is
    /// [`ClientError::EndedInOtherStatus`].
    pub async fn result<W: Workflow>(&self, run: &RunHandle<W>) -> Result<W::Output, ClientError> {
        self.wait_for_status(run, RunStatus::Completed).await?;
        run.result().await
    }

    /// Waits for `run` to be in `status`, skipping time while nothing else can happen (see
    /// [`result`](TestEnv::result)).
    pub async fn wait_for_status<W: Workflow>(
        &self,
        run: &RunHandle<W>,
        status: RunStatus,
    ) -> Result<RunRecord, ClientError> {
        self.skip_until(run, status, |record| async move {
            Ok((record.status == status).then_some(record))
        })
        .await
    }

    /// Waits for the next time `run` reaches `status` after revision `after`, skipping time
    /// while nothing else can happen; the change, from the run's timeline.
    pub async fn wait_for_status_after<W: Workflow>(
        &self,
        run: &RunHandle<W>,
        status: RunStatus,
        after: u64,
    ) -> Result<StatusChange, ClientError> {
        self.skip_until(run, status, |_| async move {
            let timeline = self.store.timeline(run.id()).await?;
            Ok(crate::handle::next_change(&timeline, status, after))
        })
        .await
    }

    /// Runs until idle and skips time, until `reached` (given the run's record, read first)
    /// says the run got where `wanted` names; the run ending first, or nothing left to skip
    /// to, is an error.
    async fn skip_until<W, T, F, Fut>(
        &self,
        run: &RunHandle<W>,
        wanted: RunStatus,
        reached: F,
    ) -> Result<T, ClientError>
    where
        W: Workflow,
        F: Fn(RunRecord) -> Fut,
        Fut: Future<Output = Result<Option<T>, ClientError>>,
    {
        loop {
            self.run_until_idle().await?;
            let record = run.record().await?;
            if let Some(found) = reached(record.clone()).await? {
                return Ok(found);
            }
            if record.status.is_terminal() {
                return Err(ended(&record, wanted));
            }
            if !self.step().await? {
                return Err(blocked(&record));
            }
        }
    }

    /// The run's history: its manifest entries, sleeps, events and children. Takes the run's
    /// handle, as [`result`](TestEnv::result) does, or its id (a child's).
    pub async fn history(&self, run: impl RunRef) -> Result<History, ClientError> {
        Ok(self.store.load_history(run.run_id()).await?)
    }

    /// The run's timeline: every change of status, in order.
    pub async fn timeline(&self, run: impl RunRef) -> Result<Vec<StatusChange>, ClientError> {
        Ok(self.store.timeline(run.run_id()).await?)
    }

    /// Stops the worker, letting what it runs finish.
    pub async fn shutdown(mut self) {
        if let Some(worker) = self.worker.take() {
            worker.shutdown().await;
        }
    }
}

fn ended(record: &RunRecord, wanted: RunStatus) -> ClientError {
    ClientError::EndedInOtherStatus {
        run_id: record.id,
        status: record.status,
        wanted,
        error: record.error.clone(),
    }
}

fn blocked(record: &RunRecord) -> ClientError {
    let waits = record
        .wait
        .as_ref()
        .map(|wait| serde_json::to_string(wait).unwrap_or_default())
        .unwrap_or_else(|| "nothing durable".to_owned());
    ClientError::Blocked {
        run_id: record.id,
        status: record.status,
        waits,
    }
}
