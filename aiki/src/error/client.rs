//! The errors of the client API: starting, reading and operating runs.

use aiki_store::{Failure, RunId, RunStatus, StoreError};

/// Errors of the [`Client`](crate::Client), run handles and worker set-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The store failed. (A refusal of the runtime's own that an aiki server answered, a
    /// [`StoreError::Refused`], is read back as its own kind instead: see `From<StoreError>`.)
    #[error(transparent)]
    Store(StoreError),
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
    /// A retry of a run failed by a child's failure it recorded: the retry would replay that
    /// record and fail the same way.
    #[error(
        "run {run_id} failed because its child run {child} ended `{status}`, and it replays the \
         outcome it recorded: a retry would fail the same way; retry the child with it \
         (`--rerun-child`), or retry anyway if its code now handles that failure (`--force`)"
    )]
    RetryWouldFailAgain {
        /// The run.
        run_id: RunId,
        /// The child whose failure it recorded.
        child: RunId,
        /// How the child ended.
        status: RunStatus,
    },
    /// A retry asked to retry a failed child that cannot be retried (it was cancelled).
    #[error(
        "run {run_id} failed because its child run {child} ended `{status}`, which no retry \
         revives (only a failed run is retried); fork run {run_id} instead (`aiki runs fork`), \
         or retry it anyway with `--force` if its code now handles that"
    )]
    ChildNotRetryable {
        /// The run.
        run_id: RunId,
        /// The child.
        child: RunId,
        /// How the child ended.
        status: RunStatus,
    },
    /// A fork dropping a child start that names a reference id: the fork's start would find
    /// the same child run by that id, and replay it instead of running it again.
    #[error(
        "run {run_id}'s child start `{address}` names reference id `{reference_id}`: a fork that \
         drops it would start it again under the same id and find the same child run, replaying \
         it rather than running it again; fork without dropping it (the fork then reads that \
         child's outcome), or start a new run"
    )]
    SharedChildDropped {
        /// The run forked.
        run_id: RunId,
        /// The child start's address.
        address: String,
        /// Its reference id.
        reference_id: String,
    },
    /// An operator's release of a claim that claim recovery has not confirmed stale.
    #[error(
        "run {run_id} is held by `{owner}`, whose claim is not confirmed stale yet: right after a \
         store outage every executor looks gone, and a live one refreshes its claim within one \
         refresh interval{allowed}; claim recovery releases the run by itself{due}. Release it \
         with `--force` only if you know the executor is dead (were it alive, it loses the run \
         at its next write, and a task it had in flight may run again)",
        allowed = allowed_at
            .map(|at| format!(" (a release is allowed from {})", crate::error::client::when(at)))
            .unwrap_or_default(),
        due = release_due
            .map(|at| format!(" at {} at the latest", crate::error::client::when(at)))
            .unwrap_or_default()
    )]
    ClaimNotStale {
        /// The run.
        run_id: RunId,
        /// Who holds its claim.
        owner: String,
        /// When an operator's release is allowed, once a sweep has marked the claim stale.
        allowed_at: Option<aiki_store::Millis>,
        /// When claim recovery releases the run at the latest.
        release_due: Option<aiki_store::Millis>,
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

/// A store time for a message: ms since the epoch, and how far from now.
pub(crate) fn when(at: aiki_store::Millis) -> String {
    let now = crate::Clock::now(&crate::SystemClock);
    let secs = (at - now) / 1000;
    if secs >= 0 {
        format!("{at} (in {secs} s)")
    } else {
        format!("{at} ({} s ago)", -secs)
    }
}
