//! # Aiki: durable workflows as ordinary `async fn`s
//!
//! A workflow is an `async fn`. Its side effects live in tasks. When a worker crashes, a run
//! sleeps for a day or waits for an outside event, the workflow is later executed again from
//! the top (*replay*), and every task that already finished returns its recorded result
//! instead of running again. Tasks are found by **content address** (task name + hash of the
//! input), never by position, so the code of running workflows can be refactored: reordering
//! or removing finished tasks is safe, and unsafe changes (an inserted task, a changed input,
//! a renamed task) are caught before any new work runs.
//!
//! The tutorial below builds everything by hand with the traits, so that each moving part is
//! visible.
//!
//! ## A task
//!
//! ```
//! use aiki::{Task, TaskContext, TaskError};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! struct Charge { order_id: String, cents: u64 }
//!
//! #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! struct Receipt { transaction_id: String }
//!
//! struct ChargeCard;
//!
//! impl Task for ChargeCard {
//!     type Input = Charge;
//!     type Output = Receipt;
//!     const NAME: &'static str = "charge-card";
//!
//!     async fn execute(&self, input: Charge, ctx: TaskContext) -> Result<Receipt, TaskError> {
//!         // Call the payment provider here, with `ctx.idempotency_key()` as idempotency key.
//!         Ok(Receipt { transaction_id: format!("tx-{}", input.order_id) })
//!     }
//! }
//! ```
//!
//! ## A workflow, a worker and a client
//!
//! ```
//! # use aiki::{Task, TaskContext, TaskError};
//! # use serde::{Deserialize, Serialize};
//! # #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! # struct Charge { order_id: String, cents: u64 }
//! # #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! # struct Receipt { transaction_id: String }
//! # struct ChargeCard;
//! # impl Task for ChargeCard {
//! #     type Input = Charge; type Output = Receipt; const NAME: &'static str = "charge-card";
//! #     async fn execute(&self, input: Charge, _: TaskContext) -> Result<Receipt, TaskError> {
//! #         Ok(Receipt { transaction_id: format!("tx-{}", input.order_id) })
//! #     }
//! # }
//! use std::time::Duration;
//! use aiki::{Client, Run, Workflow, WorkflowError, Worker};
//!
//! struct OrderV1;
//!
//! impl Workflow for OrderV1 {
//!     type Input = String;
//!     type Output = Receipt;
//!     const NAME: &'static str = "order-processing";
//!     const VERSION: &'static str = "1.0.0";
//!
//!     async fn run(&self, run: &Run, order_id: String) -> Result<Receipt, WorkflowError> {
//!         let receipt = ChargeCard.start(run, Charge { order_id, cents: 4200 }).await?;
//!         run.sleep("cool-down", Duration::from_millis(1)).await?;
//!         Ok(receipt)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = aiki::connect("memory:").await?;
//! let worker = Worker::builder(store.clone()).register(OrderV1).build()?.start();
//! let client = Client::new(store);
//!
//! let handle = client.start::<OrderV1>("order-7".to_owned()).await?;
//! let receipt = handle.result().await?;
//! assert_eq!(receipt.transaction_id, "tx-order-7");
//! worker.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! ## The same with the macros
//!
//! [`task`] and [`workflow`] write those impls for you from plain `async fn`s, check the
//! signatures and types at compile time, and give workflows typed events:
//!
//! ```
//! use aiki::{Client, Run, Task, TaskError, WorkflowError, Worker};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! pub struct Charge { order_id: String, cents: u64 }
//!
//! #[derive(Serialize, Deserialize, schemars::JsonSchema)]
//! pub struct Receipt { transaction_id: String }
//!
//! #[aiki::task(name = "charge-card", retry = exponential(max_attempts = 3, base_delay_ms = 1000))]
//! pub async fn charge_card(input: Charge) -> Result<Receipt, TaskError> {
//!     Ok(Receipt { transaction_id: format!("tx-{}-{}", input.order_id, input.cents) })
//! }
//!
//! #[aiki::workflow(name = "order-processing", version = "1.0.0", events(approved = u64))]
//! pub async fn order_v1(run: &Run, order_id: String) -> Result<Receipt, WorkflowError> {
//!     let cents = run.events().approved().wait().await?;
//!     ChargeCard.start(run, Charge { order_id, cents }).await
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = aiki::connect("memory:").await?;
//! let worker = Worker::builder(store.clone()).register(OrderV1).build()?.start();
//! let client = Client::new(store);
//!
//! let handle = client.start::<OrderV1>("order-7".to_owned()).await?;
//! handle.send::<OrderV1Approved>(4200).await?;
//! assert_eq!(handle.result().await?.transaction_id, "tx-order-7-4200");
//! worker.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! ## Fan-out
//!
//! A workflow borrows its [`Run`], and `Run` is not `Clone`: nothing a workflow starts can
//! outlive its execution, so a `tokio::spawn(async move { .. run .. })` does not compile. Calls
//! run concurrently by joining them instead, with [`Run::join_all`] (or any `join` of futures):
//!
//! ```
//! use aiki::{Run, Task, TaskError, WorkflowError};
//!
//! #[aiki::task(name = "resize-image")]
//! async fn resize_image(id: u64) -> Result<String, TaskError> {
//!     Ok(format!("thumb-{id}.png"))
//! }
//!
//! #[aiki::workflow(name = "album", version = "1")]
//! async fn album(run: &Run, images: Vec<u64>) -> Result<Vec<String>, WorkflowError> {
//!     run.join_all(images.into_iter().map(|id| ResizeImage.start(run, id))).await
//! }
//! ```
//!
//! The calls are concurrent, and the runtime runs each attempt of a `#[task]` on a tokio task
//! of its own, so CPU-bound tasks use every core ([`Task::spawnable`]).
//!
//! ## Panics
//!
//! A task that panics has failed that attempt: the error keeps the panic's message, and its
//! retry policy decides what follows (under `never`, the run fails saying which task
//! panicked, at which address, and with what message). A panic in the workflow's own code is a
//! workflow error ([`WorkflowError::Panicked`]) that the workflow's retry policy applies to.
//!
//! ## What replays, and what is caught
//!
//! * A task call with a recorded result at its address returns that result.
//! * A call with no recorded result runs, **unless** results recorded by an earlier execution
//!   are still unconsumed: then it fails with [`WorkflowError::NonDeterminism`] before it runs.
//! * [`Run::sleep`] and event waits ([`Run::event`]) have per-name queues and are not manifest
//!   entries; a sleep whose duration grew sleeps only the difference.
//! * A recorded output whose schema fingerprint differs from the current output type's is
//!   checked; a mismatch fails the run with [`WorkflowError::OutputSchemaMismatch`].
//! * A `#[task]` function called directly from workflow code (instead of through its task's
//!   `start`) fails the run with [`WorkflowError::DirectTaskCall`] before its body runs.
//!
//! Before a deploy, [`impact::check`] replays every run in flight against the new build,
//! writing nothing, and says which would diverge, mismatch or be stranded (the guide
//! [`guide::changing_running_workflows`]; `aiki check` from a service's own binary). With the
//! `testing` feature, [`TestEnv`][test-env] runs workflows in a test on a manual clock that
//! skips to the next timer only while the test waits (the [testing guide][testing]).
//!
//! ## Changing a recorded type
//!
//! Task and child-workflow outputs are recorded with the fingerprint of their schema; event
//! payloads and a run's input are recorded without one and are checked at every replay. A
//! recorded value whose fingerprint differs from the current type's must validate against the
//! current schema, and must not show the **rename signature**: at one object, a recorded field
//! the current type does not have *and* an optional field the current type declares that the
//! record lacks. That is how a rename looks, and replaying it would silently read `None`, so
//! the run fails ([`WorkflowError::OutputSchemaMismatch`],
//! [`WorkflowError::EventPayloadMismatch`] or [`WorkflowError::InputSchemaMismatch`]), naming
//! the fields.
//!
//! | change to a recorded type | outcome |
//! | --- | --- |
//! | add an optional field | safe: it reads `None` |
//! | remove a field | safe: the recorded value is ignored |
//! | roll back a release that added a field | safe: the extra recorded field is ignored |
//! | remove a field beside a `None` skipped by `skip_serializing_if` | safe when the type that recorded it is compiled into this worker (see below); otherwise fails as a rename |
//! | rename a field (made optional) | fails the run, unless the new field carries `#[serde(alias = "old")]` |
//! | rename a required field, or change its type | fails the run (validation) |
//! | any unknown field, on a `#[serde(deny_unknown_fields)]` type | fails the run |
//!
//! An optional field counts as lacking only if the type that recorded the value did not declare
//! it, so a `None` left out by `#[serde(skip_serializing_if = "Option::is_none")]` is not a
//! rename. That type is known when its schema was computed in this process (every schema is kept
//! by its fingerprint); one recorded by another release, or without a fingerprint, is unknown,
//! and then every absent optional field counts as lacking: the check would rather fail a run
//! than let it read `None` where a value was recorded. Fields of `#[serde(flatten)]` parts and of
//! the `allOf` / `anyOf` branches a value matches belong to the object they are flattened into.
//! For a change that is none of the safe ones, start a new version with `v()`.
//!
//! ## Seeing what runs do
//!
//! Every execution attempt of a run is a `tracing` span named `aiki.execution` (fields
//! `run_id`, `workflow`, `version`, `attempt`, `revision`, `worker`, `traceparent`,
//! `outcome`), and every task attempt that runs is an `aiki.task` span inside it (`task`,
//! `address`, `attempt`, `outcome`); what a task logs lands inside its attempt's span. Replayed
//! tasks and suspensions are `debug` events; divergences, schema mismatches, lost claims and
//! failed attempts are `warn` events. A worker and its executions report to the subscriber
//! that is current where [`WorkerHandle`] is started.
//!
//! A run keeps the W3C [`Traceparent`] it was started in ([`Start::traceparent`], or the
//! current OpenTelemetry context with the `otel` feature), children inherit their parent's,
//! and with `otel` every execution span links to it: each execution is a trace of its own,
//! linked to the request that started the run, however many days and machines apart.
//! [`metrics`] has the counters, histograms and queue gauges, as Prometheus text and (with
//! `otel`) through OpenTelemetry's global meter provider.
//!
//! ## Storage
//!
//! [`connect`] takes a URL: `sqlite://aiki.db` (embedded, the default), `postgres://…` (many
//! worker machines), `http://…` (an `aiki-server` in front of either, feature `http`) or
//! `memory:` (tests).
//!
//! ## Guides
//!
//! Longer walks through Aiki, each with examples that compile (the list, with what each
//! covers, is [`guide`]):
//!
//! * [`guide::concepts`]: runs, tasks, content addresses, the one rule of replay, sleeps,
//!   events, children, versions;
//! * [`guide::changing_running_workflows`]: safe and unsafe changes, recorded types, new
//!   versions, the impact check, retry and fork after a fix;
//! * [`guide::idempotency`]: side effects that must happen once;
//! * [`guide::operating_runs`]: statuses, the `aiki` command, the server and its API keys,
//!   stalled runs, pausing, retention;
//! * [`guide::schedules`]: cron and interval schedules, overlap, catch-up, time zones;
//! * [`guide::scaling_out`]: many workers on PostgreSQL;
//! * [`guide::delivery`][delivery] (features `endpoint` and `redis`): workers over HTTP,
//!   Redis, push endpoints;
//! * [`guide::testing_workflows`][testing] (feature `testing`): `TestEnv`.
//!
#![cfg_attr(
    all(feature = "endpoint", feature = "redis"),
    doc = "[delivery]: guide::delivery"
)]
#![cfg_attr(
    not(all(feature = "endpoint", feature = "redis")),
    doc = "[delivery]: guide"
)]
#![cfg_attr(feature = "testing", doc = "[testing]: guide::testing_workflows")]
#![cfg_attr(not(feature = "testing"), doc = "[testing]: guide")]
#![cfg_attr(feature = "testing", doc = "[test-env]: testing::TestEnv")]
#![cfg_attr(not(feature = "testing"), doc = "[test-env]: guide")]

mod address;
mod called;
mod catalog;
mod client;
mod clock;
mod connect;
mod direct;
#[cfg(feature = "endpoint")]
pub mod endpoint;
mod error;
mod executor;
pub mod guide;
mod handle;
pub mod impact;
mod liveness;
pub mod metrics;
pub mod ops;
mod panic;
#[cfg(feature = "redis")]
pub mod redis;
mod registry;
mod resend;
mod retry;
mod run;
mod schema;
mod subscriber;
mod task;
#[cfg(feature = "testing")]
pub mod testing;
mod trace;
mod wake;
mod worker;
mod workflow;

#[doc(hidden)]
pub mod __private;

pub use address::{TaskAddress, canonical_json, child_address, input_hash, sha256_hex};
pub use client::{
    Client, ConflictPolicy, DEFAULT_RIDE_OUT, NewSchedule, Start, StartJson, input_hash_accepts,
    input_hash_json,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use connect::connect;
pub use error::{ClientError, TaskError, WorkflowError};
pub use executor::{Executor, ExecutorBuilder};
pub use handle::{
    AnyRun, BulkAction, BulkCheck, BulkOutcome, FailedChild, ForkOptions, RetryOptions, RetryPlan,
    RunHandle, RunRef,
};
pub use registry::{Registry, RegistryBuilder};
pub use retry::{RetryPolicy, RetryPolicyError};
pub use run::{
    ChildRun, ChildStart, ContinueAsNew, EventWait, HistoryLimits, RECORDED_INPUT_MAX_BYTES, Run,
    SleepOutcome,
};
pub use schema::Schema;
pub use subscriber::{NotifySubscriber, PollingSubscriber, Subscriber};

/// The attribute for implementing [`Subscriber`] (and [`Store`]): their methods are
/// `async_trait` methods.
pub use async_trait::async_trait;
pub use liveness::{ClaimView, Liveness};
pub use task::{State, StateNeed, Task, TaskContext};
pub use trace::{InvalidTraceparent, Traceparent};
pub use worker::{Scheduled, Worker, WorkerBuilder, WorkerHandle, WorkerStore};
pub use workflow::{Event, EventSpec, Workflow};

#[doc = include_str!("../docs/task.md")]
pub use aiki_macros::task;
#[doc = include_str!("../docs/workflow.md")]
pub use aiki_macros::workflow;

pub use aiki_store::{
    self as store, BoxStore, ConfigKey, Connected, Connection, Failure, MigrationMode, Millis,
    Namespace, RunId, RunRecord, RunStatus, RuntimeConfig, Store, StoreError, WaitSpec,
};

/// The input type of a task or workflow function that takes no input. It hashes as `{}`, like
/// the TypeScript reference's input-less functions.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct NoInput;
