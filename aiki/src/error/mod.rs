//! The errors of the runtime.

use std::fmt;

use aiki_store::{Failure, RunId, RunStatus, StoreError};

mod client;
mod client_wire;

pub use client::ClientError;

/// Why a workflow call (a task, a sleep, an event wait, a child) or a whole workflow failed.
///
/// A workflow returns `Result<Output, WorkflowError>`; `?` on task calls propagates failures,
/// and a workflow may also match on them to handle a failed task. A few kinds fail the run no
/// matter what the workflow does with them, and are never retried:
/// [`NonDeterminism`](WorkflowError::NonDeterminism),
/// [`OutputSchemaMismatch`](WorkflowError::OutputSchemaMismatch) and a lost claim.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The code reached a call with no recorded result while results recorded by an earlier
    /// execution were still unconsumed: the code changed under a running workflow in a way that
    /// is not safe (an inserted task, a changed input or name, a new branch). Nothing new ran,
    /// and the run fails whatever the workflow does with the error. It is recovered by deploying
    /// code that replays its record and retrying it ([`RunHandle::retry`](crate::RunHandle::retry),
    /// `aiki runs retry`); an intended change goes in a new workflow version.
    #[error(
        "non-determinism: the workflow reached the new address `{new_address}`{} while recorded \
         results were still unconsumed at {}; the code changed under a running workflow (an \
         inserted task, a changed task input or name, or a new branch), so the run has failed, \
         and nothing new ran. To recover it, deploy code that reaches the recorded calls as \
         before (new work goes after all recorded work), then retry the run (`aiki runs retry \
         <run-id>`, or `RunHandle::retry`); if the change is intended, keep this version's code \
         for its runs and put the change in a new workflow version for new runs (a new \
         `#[aiki::workflow]` fn with the same name and a higher `version`, registered beside \
         this one with `WorkerBuilder::register` and started with `Client::start`)",
        called_at(call_site.as_deref()),
        list(unconsumed)
    )]
    NonDeterminism {
        /// The address with no recorded result.
        new_address: String,
        /// The addresses recorded by an earlier execution and not consumed, one per entry.
        unconsumed: Vec<String>,
        /// Where the code calls the new address (`src/order.rs:42:9`), when known: task calls
        /// through `start` record their caller.
        call_site: Option<String>,
    },
    /// A `#[task]` function was called directly from workflow code (`charge_card(x).await`)
    /// instead of through its task (`ChargeCard.start(run, x)`): it would run outside the
    /// run's record, again at every replay, and its side effect is not durable. Detected
    /// before the function's body runs. Calling it from a task, a helper or a unit test is
    /// fine.
    #[error(
        "`{function}` is the function of task `{task}`, and workflow code called it directly: \
         it would run outside the run's record, again at every replay; call the task instead: \
         `{task_type}.start(run, input).await`"
    )]
    DirectTaskCall {
        /// The task's durable name.
        task: String,
        /// The function called.
        function: String,
        /// The task type `#[task]` generated, whose `start` is the right call.
        task_type: String,
    },
    /// A task failed after its last attempt (or was interrupted with no attempt left).
    #[error("task `{task}` at `{address}` failed after {attempts} attempt(s): {message}")]
    TaskFailed {
        /// The task's name.
        task: String,
        /// The call's address.
        address: String,
        /// The call's index among the calls with this address.
        index: u32,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        message: String,
        /// `true` when the last attempt was cut short by a crash of its executor.
        interrupted: bool,
    },
    /// A recorded output does not match the current output schema (the output type changed
    /// under a running workflow).
    #[error(
        "recorded output of {what} at `{address}` does not match its current output schema: \
         {mismatch}; keep output changes backwards compatible (add fields, don't rename them) \
         or start a new workflow version with `v()`"
    )]
    OutputSchemaMismatch {
        /// What produced the output: `task \`fetch-user\`` or `child workflow \`name@version\``.
        what: String,
        /// The call's address.
        address: String,
        /// What did not match.
        mismatch: String,
    },
    /// A child workflow run ended without an output.
    #[error("child workflow {namespace} (run {run_id}) ended {status}: {message}")]
    ChildFailed {
        /// The child's namespace.
        namespace: String,
        /// The child run.
        run_id: RunId,
        /// Where the parent recorded the child's start.
        start: aiki_store::CallRef,
        /// How it ended: `failed` or `cancelled`.
        status: RunStatus,
        /// Its error.
        message: String,
    },
    /// A child start reused a reference id with a different input, under
    /// [`ConflictPolicy::Error`](crate::ConflictPolicy::Error).
    #[error(
        "child workflow {namespace} with reference id `{reference_id}` already exists with a \
         different input; use another reference id, or `ConflictPolicy::ReturnExisting`"
    )]
    ChildConflict {
        /// The child's namespace.
        namespace: String,
        /// The reference id.
        reference_id: String,
    },
    /// A received event does not match the event's current payload type (the type changed
    /// under a running workflow).
    #[error(
        "event `{event}` does not match its payload type: {message}; keep payload changes \
         backwards compatible (add optional fields, don't rename them) or start a new workflow \
         version with `v()`"
    )]
    EventPayloadMismatch {
        /// The event's name.
        event: String,
        /// What did not match.
        message: String,
    },
    /// A run's recorded input does not match its workflow's current input type (the type
    /// changed under a running workflow), checked at every execution of the run.
    #[error(
        "the recorded input of this run of {namespace} does not match its current input type: \
         {mismatch}; keep input changes backwards compatible (add optional fields, don't rename \
         them) or start a new workflow version with `v()`"
    )]
    InputSchemaMismatch {
        /// The run's namespace.
        namespace: String,
        /// What did not match.
        mismatch: String,
    },
    /// A value could not be serialized to JSON.
    #[error("{what} could not be serialized to JSON: {message}")]
    InputNotSerializable {
        /// The type.
        what: String,
        /// The serializer's message.
        message: String,
    },
    /// A child run's input breaks the JSON schema of the child's input type (checked when the
    /// child is created, never when a recorded start replays).
    #[error("invalid input of child workflow {namespace}: {message}")]
    InvalidChildInput {
        /// The child's namespace.
        namespace: String,
        /// What did not match.
        message: String,
    },
    /// A task asked for shared state the worker was not given.
    #[error(
        "task `{task}` needs state of type `{type_name}`; give it to the worker with \
         `Worker::builder(..).state(value)`"
    )]
    MissingState {
        /// The task's name.
        task: String,
        /// The missing type.
        type_name: &'static str,
    },
    /// This executor lost the run (another executor owns it now, or it was paused or
    /// cancelled), or the store failed; the executor stops and writes nothing more.
    #[error("the run was lost by this executor: {0}")]
    Lost(#[source] StoreError),
    /// The workflow's own code panicked (outside its tasks: a task that panics is a failed
    /// attempt, [`TaskFailed`](WorkflowError::TaskFailed)). It is a workflow error like any
    /// other: the workflow's retry policy applies.
    #[error(
        "the workflow code panicked: {message}; a panic is a bug in the workflow: return an \
         error instead"
    )]
    Panicked {
        /// The panic's message.
        message: String,
    },
    /// A sleep or wait timeout longer than the ten-year maximum.
    #[error(
        "{what} of {duration:?} is longer than the maximum of ten years; use a shorter \
         duration (far-future work belongs in a schedule or a run started later)"
    )]
    DurationTooLong {
        /// What asked for it: `sleep \`name\``, the timeout of an event or child wait.
        what: String,
        /// The duration asked for.
        duration: std::time::Duration,
    },
    /// A payload the workflow hands the store is over the store's size limit (see
    /// [`aiki_store::limit`]): the input of a child it starts, or its own output (which fails
    /// the run). Nothing was written, and the same payload is refused again, so it is never
    /// retried: keep large data elsewhere and pass a reference to it. (A task's output over
    /// the limit fails that task instead: [`TaskFailed`](WorkflowError::TaskFailed).)
    #[error(
        "{}",
        StoreError::TooLarge { what: what.clone(), bytes: *bytes, limit: *limit }
    )]
    TooLarge {
        /// What is too large: `the output of run …`, `the input of child run …`.
        what: String,
        /// Its size, in bytes of JSON text.
        bytes: u64,
        /// The store's limit, in bytes.
        limit: u64,
    },
    /// The run's history holds as many entries as the executor's hard limit allows
    /// ([`WorkerBuilder::history_limits`](crate::WorkerBuilder::history_limits)): no new task
    /// or child starts, and the run fails (never retried: a replay reaches the same size). A
    /// workflow that loops for ever continues as new before it gets there
    /// ([`Run::continue_as_new`](crate::Run::continue_as_new)).
    #[error(
        "the run's history holds {entries} entries, the limit is {limit}: a workflow that          loops or runs for ever must continue as new (`run.continue_as_new::<W>(state)`)          before its history grows this large; fix the workflow, then retry the run with a          raised limit (`WorkerBuilder::history_limits`) or fork it onto a fixed version"
    )]
    HistoryTooLarge {
        /// The entries the history holds.
        entries: usize,
        /// The executor's hard limit.
        limit: usize,
    },
    /// Not a failure: the run ends here and continues as a new run, returned by
    /// [`Run::continue_as_new`](crate::Run::continue_as_new) for the workflow to return
    /// (`return Err(run.continue_as_new::<W>(state))`).
    #[error("the run continues as a new run of {}", .0.namespace)]
    ContinueAsNew(crate::run::ContinueAsNew),
    /// The workflow's own error.
    #[error("{message}")]
    Failed {
        /// What went wrong.
        message: String,
    },
}

fn called_at(call_site: Option<&str>) -> String {
    call_site
        .map(|at| format!(" (called at {at})"))
        .unwrap_or_default()
}

fn list(addresses: &[String]) -> String {
    addresses
        .iter()
        .map(|address| format!("`{address}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl WorkflowError {
    /// The workflow's own failure, with a message.
    pub fn failed(message: impl fmt::Display) -> Self {
        WorkflowError::Failed {
            message: message.to_string(),
        }
    }

    /// `false` for the kinds that a retry can never fix: non-determinism, a schema mismatch
    /// of a recorded output, a child reference conflict, a mismatched event payload, a duration
    /// beyond the maximum, a payload over the store's size limit, a lost run; and for an interrupted task whose policy allows no other
    /// attempt (`never`: at most once), which only an operator's explicit retry runs again.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            WorkflowError::NonDeterminism { .. }
                | WorkflowError::OutputSchemaMismatch { .. }
                | WorkflowError::ChildConflict { .. }
                | WorkflowError::EventPayloadMismatch { .. }
                | WorkflowError::DurationTooLong { .. }
                | WorkflowError::TooLarge { .. }
                | WorkflowError::InputSchemaMismatch { .. }
                | WorkflowError::DirectTaskCall { .. }
                | WorkflowError::HistoryTooLarge { .. }
                | WorkflowError::ContinueAsNew(_)
                // The parent replays the child's outcome it recorded: a retry fails the same
                // way (an operator retries the child with it, `RetryOptions::rerun_child`).
                | WorkflowError::ChildFailed { .. }
                | WorkflowError::Lost(_)
                | WorkflowError::TaskFailed {
                    interrupted: true,
                    ..
                }
        )
    }

    /// Every kind a run's recorded error may have: those of [`kind`](WorkflowError::kind),
    /// and the runtime's own `corrupt_history` (a history that cannot be read).
    pub const KINDS: &'static [&'static str] = &[
        "non_determinism",
        "direct_task_call",
        "interrupted",
        "task_failed",
        "output_schema_mismatch",
        "child_failed",
        "child_conflict",
        "event_payload_mismatch",
        "input_schema_mismatch",
        "not_serializable",
        "invalid_input",
        "missing_state",
        "lost",
        "panicked",
        "duration_too_long",
        "too_large",
        "history_too_large",
        "continue_as_new",
        "failed",
        "corrupt_history",
    ];

    /// A short `snake_case` name of the kind, as recorded in the run's error.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkflowError::NonDeterminism { .. } => "non_determinism",
            WorkflowError::DirectTaskCall { .. } => "direct_task_call",
            WorkflowError::TaskFailed {
                interrupted: true, ..
            } => "interrupted",
            WorkflowError::TaskFailed { .. } => "task_failed",
            WorkflowError::OutputSchemaMismatch { .. } => "output_schema_mismatch",
            WorkflowError::ChildFailed { .. } => "child_failed",
            WorkflowError::ChildConflict { .. } => "child_conflict",
            WorkflowError::EventPayloadMismatch { .. } => "event_payload_mismatch",
            WorkflowError::InputSchemaMismatch { .. } => "input_schema_mismatch",
            WorkflowError::InputNotSerializable { .. } => "not_serializable",
            WorkflowError::InvalidChildInput { .. } => "invalid_input",
            WorkflowError::MissingState { .. } => "missing_state",
            WorkflowError::Lost(_) => "lost",
            WorkflowError::Panicked { .. } => "panicked",
            WorkflowError::DurationTooLong { .. } => "duration_too_long",
            WorkflowError::TooLarge { .. } => "too_large",
            WorkflowError::HistoryTooLarge { .. } => "history_too_large",
            WorkflowError::ContinueAsNew(_) => "continue_as_new",
            WorkflowError::Failed { .. } => "failed",
        }
    }

    /// The error as recorded on a run.
    pub fn to_failure(&self) -> Failure {
        let failure = Failure::new(self.kind(), self.to_string());
        match self {
            WorkflowError::TaskFailed { address, index, .. } => {
                failure.call(aiki_store::CallRef::new(address.clone(), *index))
            }
            WorkflowError::ChildFailed { start, .. } => failure.call(start.clone()),
            _ => failure,
        }
    }
}

impl From<String> for WorkflowError {
    fn from(message: String) -> Self {
        WorkflowError::Failed { message }
    }
}

impl From<&str> for WorkflowError {
    fn from(message: &str) -> Self {
        WorkflowError::failed(message)
    }
}

/// A task's failure.
///
/// Any `std::error::Error` converts into it with `?`, so a task may return its own error type;
/// [`TaskError::new`] makes one from a message. [`TaskError::permanent`] marks a failure that retries cannot fix.
///
/// Like `anyhow::Error`, this type does not implement `std::error::Error` itself, which is what
/// lets every error type convert into it.
pub struct TaskError {
    message: String,
    retryable: bool,
}

impl TaskError {
    /// A failure that the task's retry policy may retry.
    pub fn new(message: impl fmt::Display) -> Self {
        TaskError {
            message: message.to_string(),
            retryable: true,
        }
    }

    /// A failure that no retry can fix: the task fails at once, whatever its policy.
    pub fn permanent(message: impl fmt::Display) -> Self {
        TaskError {
            message: message.to_string(),
            retryable: false,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `false` for [`TaskError::permanent`] failures.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskError")
            .field("message", &self.message)
            .field("retryable", &self.retryable)
            .finish()
    }
}

impl<E: std::error::Error> From<E> for TaskError {
    fn from(error: E) -> Self {
        TaskError::new(error)
    }
}

#[cfg(test)]
mod kinds {
    use super::WorkflowError;

    /// `KINDS` lists exactly the kinds `kind` gives (read from its match, so a new variant's
    /// kind cannot be forgotten), and the worker's own.
    #[test]
    fn every_kind_is_listed() {
        let source = include_str!("mod.rs");
        let start = source.find("pub fn kind(&self)").expect("kind's source");
        let body = &source[start..start + source[start..].find("\n    }\n").expect("its end")];
        let given: Vec<&str> = body
            .split("=> \"")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').expect("a string")])
            .collect();
        assert_eq!(given.len(), 19, "{given:?}");
        let mut listed: Vec<&str> = WorkflowError::KINDS.to_vec();
        listed.retain(|kind| *kind != "corrupt_history");
        assert_eq!(listed, given);
    }
}

#[cfg(test)]
mod messages {
    use super::WorkflowError;

    /// A non-determinism failure says what diverged, that the run has failed, and both ways
    /// out: a fix and a retry (by the CLI's and the API's real names), or a new version.
    #[test]
    fn non_determinism_says_the_run_failed_and_how_to_recover_it() {
        let message = WorkflowError::NonDeterminism {
            new_address: "charge-card:d162".to_owned(),
            unconsumed: vec!["charge-card:92f1".to_owned()],
            call_site: Some("src/order.rs:80:10".to_owned()),
        }
        .to_string();
        for expected in [
            "the new address `charge-card:d162` (called at src/order.rs:80:10)",
            "still unconsumed at `charge-card:92f1`",
            "the run has failed",
            "`aiki runs retry <run-id>`, or `RunHandle::retry`",
            "new workflow version for new runs",
            "`WorkerBuilder::register`",
            "`Client::start`",
        ] {
            assert!(message.contains(expected), "{expected:?} in {message}");
        }
    }
}
