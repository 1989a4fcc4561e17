//! Tasks: the units of side effect a workflow calls, recorded by content address.

use std::any::Any;
use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use aiki_store::RunId;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::address::{TaskAddress, input_hash, sha256_hex};
use crate::error::{TaskError, WorkflowError};
use crate::retry::RetryPolicy;
use crate::run::Run;
use crate::schema::Schema;

/// A task: a named, retryable side effect whose result is recorded in the run's manifest under
/// its content address, `name:hash(input)`.
///
/// `#[aiki::task]` implements this for you; implement it by hand only for tasks the macro
/// cannot express.
///
/// ```
/// use aiki::{Task, TaskContext, TaskError};
///
/// struct Double;
///
/// impl Task for Double {
///     type Input = u64;
///     type Output = u64;
///     const NAME: &'static str = "double";
///
///     async fn execute(&self, input: u64, _ctx: TaskContext) -> Result<u64, TaskError> {
///         Ok(input * 2)
///     }
/// }
///
/// assert!(Double.address(&21).unwrap().as_str().starts_with("double:"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an aiki task",
    label = "annotate its function with `#[aiki::task(name = \"...\")]`"
)]
pub trait Task: Send + Sync + 'static {
    /// The input; its canonical JSON is hashed into the address.
    type Input: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static;
    /// The output, recorded as JSON with its schema's fingerprint.
    type Output: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// The durable name. Renaming a task changes its addresses: runs in flight that recorded it
    /// fail with a non-determinism error.
    const NAME: &'static str;

    /// The retry policy (default: never).
    fn retry(&self) -> RetryPolicy {
        RetryPolicy::never()
    }

    /// Runs one attempt.
    fn execute(
        &self,
        input: Self::Input,
        ctx: TaskContext,
    ) -> impl Future<Output = Result<Self::Output, TaskError>> + Send;

    /// The content address of a call with `input`.
    fn address(&self, input: &Self::Input) -> Result<TaskAddress<Self::Output>, WorkflowError> {
        Ok(TaskAddress::new(Self::NAME, &input_hash(input)?))
    }

    /// An owned copy of the task, when it has one to give: the runtime then runs each attempt
    /// on a tokio task of its own, so that the concurrent calls of a fan-out
    /// ([`Run::join_all`]) use every core. `#[aiki::task]` types return `Some`; the default,
    /// `None`, runs attempts on the workflow's own tokio task. Override it (`Some(self.clone())`)
    /// for a hand-written CPU-bound task.
    fn spawnable(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// The schema of the output, with its fingerprint (computed once per type).
    fn output_schema(&self) -> Arc<Schema> {
        Schema::of::<Self::Output>()
    }

    /// The shared state the task reads (`#[aiki::task]` lists its `State<T>` arguments), so
    /// that a worker registering the task without that state fails at
    /// [`build`](crate::WorkerBuilder::build) instead of at the task's first call.
    fn needs_state() -> Vec<StateNeed>
    where
        Self: Sized,
    {
        Vec::new()
    }

    /// Calls the task from a workflow: returns the recorded result if the run has one at this
    /// address, runs it otherwise (after checking that no recorded result was skipped).
    ///
    /// The caller's source location is kept (`#[track_caller]`), so that a call that diverges
    /// from the run's record is reported with where the code makes it.
    #[track_caller]
    fn start(
        &self,
        run: &Run,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output, WorkflowError>> + Send
    where
        Self: Sized,
    {
        run.call_task(self, input, Some(std::panic::Location::caller()))
    }
}

/// What a task attempt knows about where it runs, and the worker's shared state.
#[derive(Clone)]
pub struct TaskContext {
    pub(crate) run_id: RunId,
    pub(crate) lineage: RunId,
    pub(crate) task: &'static str,
    pub(crate) address: Arc<str>,
    pub(crate) index: u32,
    pub(crate) attempt: u32,
    pub(crate) state: Arc<StateMap>,
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("run_id", &self.run_id)
            .field("task", &self.task)
            .field("address", &self.address)
            .field("index", &self.index)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

impl TaskContext {
    /// The run calling the task.
    pub fn run_id(&self) -> RunId {
        self.run_id
    }

    /// The call's content address (`name:input-hash`). Two runs with the same input share it,
    /// so it is not an idempotency key for an outside system: use
    /// [`idempotency_key`](TaskContext::idempotency_key).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Which call at this address within the run: 0 for the first, 1 for the second call with
    /// the same task and input.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// A key to hand to an outside system (a payment provider) so that it performs this call's
    /// side effect once: unique per run lineage, address and call index, and the same for every
    /// attempt and every replay of the call. 64 hex digits.
    ///
    /// It is derived from the first run of the run's lineage (the run itself, unless it is a
    /// [fork](crate::AnyRun::fork)), so a call that a fork runs again hands the provider the
    /// original's key.
    pub fn idempotency_key(&self) -> String {
        let lineage = self.lineage;
        sha256_hex(format!("aiki-task\n{lineage}\n{}\n{}", self.address, self.index).as_bytes())
    }

    /// This attempt's number, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Shared state the worker was given with `Worker::builder(..).state(value)`.
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<State<T>, TaskError> {
        self.state.get::<T>().map(State).ok_or_else(|| {
            TaskError::permanent(WorkflowError::MissingState {
                task: self.task.to_owned(),
                type_name: std::any::type_name::<T>(),
            })
        })
    }
}

/// A type of shared state a task needs (see [`Task::needs_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateNeed {
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
}

impl StateNeed {
    /// State of type `T`.
    pub fn of<T: Send + Sync + 'static>() -> Self {
        StateNeed {
            type_id: TypeId::of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }

    /// The type's name.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }
}

/// Shared state handed to tasks (a database pool, an HTTP client), like axum's `State`.
#[derive(Debug)]
pub struct State<T>(pub Arc<T>);

impl<T> Clone for State<T> {
    fn clone(&self) -> Self {
        State(self.0.clone())
    }
}

impl<T> std::ops::Deref for State<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// A task's handler replaced for a test ([`TestEnv`](crate::testing::TestEnv)): the input as
/// JSON in, the output as JSON out.
pub(crate) type MockFn = Arc<
    dyn Fn(
            serde_json::Value,
        )
            -> std::pin::Pin<Box<dyn Future<Output = Result<serde_json::Value, TaskError>> + Send>>
        + Send
        + Sync,
>;

/// The mocked tasks of a test worker, by name; kept in its state.
#[derive(Clone, Default)]
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) struct Mocks(pub(crate) HashMap<&'static str, MockFn>);

/// The shared state tasks read, by type.
#[derive(Default)]
pub(crate) struct StateMap {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// Adds `other`'s values; a type in both takes `other`'s.
    pub(crate) fn extend(&mut self, other: &StateMap) {
        self.values
            .extend(other.values.iter().map(|(id, value)| (*id, value.clone())));
    }

    /// Whether state of this type was given.
    pub(crate) fn has(&self, need: &StateNeed) -> bool {
        self.values.contains_key(&need.type_id)
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.clone().downcast::<T>().ok())
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StateMap({} values)", self.values.len())
    }
}
