//! The errors of the client API: starting, reading and operating runs.

use aiki_store::{Failure, RunId, RunStatus, StoreError};

/// Errors of the [`Client`](crate::Client), run handles and worker set-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A start reused a reference id with a different input, under
    /// [`ConflictPolicy::Error`](crate::ConflictPolicy::Error).
    #[error(
        "a run of {namespace} with reference id `{reference_id}` already exists (run {existing}) \
         with a different input; use another reference id, or `ConflictPolicy::ReturnExisting` \
         to get the existing run"
    )]
    ReferenceConflict {
        /// The namespace.
        namespace: String,
        /// The reference id.
        reference_id: String,
        /// The run that holds it.
        existing: RunId,
    },
    /// A value could not be serialized, or JSON does not match the schema it must match.
    #[error("invalid {what}: {message}")]
    InvalidInput {
        /// What was invalid (`input of order-processing@1.0.0`, `event \`approved\``).
        what: String,
        /// What is wrong.
        message: String,
    },
    /// An event name the workflow does not declare.
    #[error("workflow {namespace} declares no event `{event}`; declared events: {declared}")]
    UnknownEvent {
        /// The namespace.
        namespace: String,
        /// The name sent.
        event: String,
        /// The names it declares.
        declared: String,
    },
    /// A workflow version no worker has published in the catalog, so what it accepts is not
    /// known.
    #[error(
        "workflow {namespace} is not in the catalog: no worker registering it has started \
         against this store (known: {known}); start a worker of the release that has it, or \
         check the name and version"
    )]
    NotInCatalog {
        /// The namespace asked for.
        namespace: String,
        /// The namespaces the catalog holds.
        known: String,
    },
    /// A test env's run waits only on outside input (an event nobody sends, a paused or stalled
    /// run): no timer is left for time to skip to.
    #[error(
        "run {run_id} is `{status}` and nothing in the test env will move it (it waits on \
         {waits}); send it what it waits for, or advance time past its deadline"
    )]
    Blocked {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
        /// What it waits on, as its stored wait set.
        waits: String,
    },
    /// A workflow version this build (the worker given) does not register.
    #[error(
        "workflow {namespace} is not registered in this build; register it with the worker \
         (`Worker::builder(..).register(..)`) before forking onto it or checking against it"
    )]
    NotRegistered {
        /// The namespace asked for.
        namespace: String,
    },
    /// A fork onto another version was refused: what it carries does not replay on that
    /// version's code (the impact check's verdict). Nothing was written.
    #[error(
        "refused to fork run {run_id} onto {namespace}: {problem}; drop the entries the new \
         version does not reach (`--drop ADDRESS`), or fork onto a version whose code replays \
         them"
    )]
    ForkRefused {
        /// The run forked.
        run_id: RunId,
        /// The version forked onto.
        namespace: String,
        /// What the check found.
        problem: String,
        /// The addresses at which the fork would diverge or mismatch.
        diverging: Vec<String>,
    },
    /// The run ended in another terminal status than the one waited for.
    #[error(
        "run {run_id} ended `{status}` instead of reaching `{wanted}`{}",
        error_suffix(error)
    )]
    EndedInOtherStatus {
        /// The run.
        run_id: RunId,
        /// The status it ended in.
        status: RunStatus,
        /// The status waited for.
        wanted: RunStatus,
        /// Its error, if it failed.
        error: Option<Failure>,
    },
    /// The run belongs to another workflow version than the handle's type.
    #[error("run {run_id} belongs to {actual}, not {expected}")]
    WrongWorkflow {
        /// The run.
        run_id: RunId,
        /// The handle's namespace.
        expected: String,
        /// The run's namespace.
        actual: String,
    },
    /// The recorded output does not deserialize into the workflow's output type.
    #[error("run {run_id} output does not match the workflow's output type: {message}")]
    OutputMismatch {
        /// The run.
        run_id: RunId,
        /// What did not match.
        message: String,
    },
    /// An operator action that does not apply to the run's status (resuming a run that is not
    /// paused, requeueing one that is not stalled).
    #[error(
        "cannot {action} run {run_id}: it is `{status}`; {action} applies to runs that are {}",
        expected.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(" or ")
    )]
    InvalidAction {
        /// The run.
        run_id: RunId,
        /// The action tried.
        action: &'static str,
        /// The run's status.
        status: RunStatus,
        /// The statuses the action applies to.
        expected: Vec<RunStatus>,
    },
    /// A retry would run again a task that was interrupted under an at-most-once policy.
    #[error(
        "run {run_id} failed because task call `{call}` was interrupted, and its retry policy \
         runs it at most once: it may have had its effect; check, then retry with the explicit \
         re-run of interrupted tasks (`--rerun-interrupted`) if it must run again"
    )]
    InterruptedTask {
        /// The run.
        run_id: RunId,
        /// The interrupted call.
        call: aiki_store::CallRef,
    },
    /// A retry of a child run whose end its parent has already acted on.
    #[error(
        "run {run_id} is a child of run {parent}, which has already run since this child ended \
         and acted on its outcome; retrying the child would not change the parent: retry or fork \
         the parent instead, or override with `--even-if-observed`"
    )]
    ObservedByParent {
        /// The run.
        run_id: RunId,
        /// Its parent.
        parent: RunId,
    },
    /// An address the run has not recorded, given to an action on its history.
    #[error(
        "run {run_id} has recorded nothing at `{address}`; `aiki runs show {run_id}` lists its \
         addresses"
    )]
    UnknownAddress {
        /// The run.
        run_id: RunId,
        /// The address given.
        address: String,
    },
    /// The run has ended, so it takes no more events.
    #[error(
        "run {run_id} has ended (`{status}`): it takes no more events; start a new run, or send \
         events only while a run has not ended"
    )]
    RunEnded {
        /// The run.
        run_id: RunId,
        /// The terminal status it ended in.
        status: RunStatus,
    },
    /// A wait gave up.
    #[error("timed out after {0:?} waiting for the run")]
    Timeout(std::time::Duration),
    /// A worker's configuration is invalid.
    #[error("invalid worker configuration: {0}")]
    Config(String),
}

fn error_suffix(error: &Option<Failure>) -> String {
    error
        .as_ref()
        .map(|failure| format!(": {}", failure.message))
        .unwrap_or_default()
}
