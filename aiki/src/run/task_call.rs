//! Task calls: replay of recorded results, fresh executions and their in-process retries.

use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{EntryKind, EntryRecord, EntryStatus, Millis};
use serde_json::Value;
use tracing::Instrument;

use super::manifest::Slot;
use super::suspend::Block;
use super::{Found, Run};
use crate::clock::millis;
use crate::error::{TaskError, WorkflowError};
use crate::schema;
use crate::task::{Task, TaskContext};

/// Failed attempts whose retry delay is at most this long are retried in process; longer
/// delays suspend the run as `awaiting_retry`.
pub(crate) const INLINE_RETRY_MAX: Duration = Duration::from_millis(5);

/// The largest task input recorded with its call, as JSON text: a larger one is recorded as
/// `{"aiki_input_omitted_bytes": N}` (its size), so that a run's records stay small.
pub const RECORDED_INPUT_MAX_BYTES: usize = 64 * 1024;

/// A task call's input as recorded with it: the value, or its size when larger than
/// [`RECORDED_INPUT_MAX_BYTES`].
fn recorded_input(input: &Value) -> Option<Value> {
    let bytes = aiki_store::limit::json_bytes(input);
    if bytes <= RECORDED_INPUT_MAX_BYTES {
        Some(input.clone())
    } else {
        Some(serde_json::json!({ "aiki_input_omitted_bytes": bytes }))
    }
}

/// Aborts a spawned task attempt when the call is dropped (the workflow future was dropped:
/// the run suspended, was lost or ended), as dropping an attempt run in place would.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs one attempt, on a tokio task of its own when the task has an owned copy to give, and
/// turns a panic into `Err(message)`.
async fn attempt_once<T: Task>(
    task: &T,
    input: T::Input,
    ctx: TaskContext,
) -> Result<Result<T::Output, TaskError>, String> {
    if let Some(mock) = ctx
        .state
        .get::<crate::task::Mocks>()
        .and_then(|mocks| mocks.0.get(T::NAME).cloned())
    {
        let attempt = crate::direct::outside_workflow_code(mocked::<T>(mock, input));
        return crate::panic::caught(attempt).await;
    }
    let Some(owned) = task.spawnable() else {
        let attempt = crate::direct::outside_workflow_code(task.execute(input, ctx));
        return crate::panic::caught(attempt).await;
    };
    // The attempt's own task logs inside the attempt's span, to the same subscriber.
    let attempt = crate::trace::in_current_dispatch(
        async move { owned.execute(input, ctx).await }.in_current_span(),
    );
    let mut handle = AbortOnDrop(tokio::spawn(attempt));
    match (&mut handle.0).await {
        Ok(result) => Ok(result),
        Err(error) if error.is_panic() => Err(crate::panic::message(&*error.into_panic())),
        Err(error) => {
            tracing::warn!(%error, "a task attempt's tokio task ended without a result");
            Err(format!("its tokio task ended without a result ({error})"))
        }
    }
}

/// One attempt of a mocked task: its input and output through JSON, as recorded ones are.
async fn mocked<T: Task>(
    mock: crate::task::MockFn,
    input: T::Input,
) -> Result<T::Output, TaskError> {
    let input = serde_json::to_value(&input)
        .map_err(|error| TaskError::new(format!("the mock's input: {error}")))?;
    let output = mock(input).await?;
    serde_json::from_value(output).map_err(|error| {
        TaskError::new(format!(
            "the mock of task `{}` returned what its output type refuses: {error}",
            T::NAME
        ))
    })
}

impl Run {
    fn context(&self, task: &'static str, address: &str, index: u32, attempt: u32) -> TaskContext {
        TaskContext {
            run_id: self.inner.id,
            lineage: self.inner.lineage,
            task,
            address: Arc::from(address),
            index,
            attempt,
            state: self.inner.state.clone(),
        }
    }

    pub(crate) async fn call_task<T: Task>(
        &self,
        task: &T,
        input: T::Input,
        call_site: Option<&'static Location<'static>>,
    ) -> Result<T::Output, WorkflowError> {
        self.check_fatal()?;
        if let Some(called) = &self.inner.called {
            called.note(&self.inner.namespace, T::NAME, || {
                crate::catalog::task(task)
            });
        }
        let address = task.address(&input)?.into_string();
        let what = || format!("task `{}`", T::NAME);
        let resume = |address: &str| Found::Resume {
            address: address.to_owned(),
        };
        let (index, failed_attempts) = match self.take_slot(&address, call_site)? {
            Slot::Fresh(index) => {
                let found = || Found::NewTask {
                    task: T::NAME,
                    address: address.clone(),
                    call_site: call_site.map(ToString::to_string),
                };
                if self.note(found) {
                    self.stop_here().await
                }
                (index, 0)
            }
            Slot::Recorded(entry) => match entry.status {
                EntryStatus::Completed => {
                    tracing::debug!(task = T::NAME, %address, "task replayed");
                    return self.decode_recorded::<T::Output>(
                        what(),
                        &address,
                        entry.output.unwrap_or(Value::Null),
                        entry.fingerprint.as_deref(),
                    );
                }
                EntryStatus::Failed => {
                    let error = entry.error.unwrap_or_else(|| {
                        aiki_store::Failure::new("task_failed", "no error recorded")
                    });
                    return Err(WorkflowError::TaskFailed {
                        task: T::NAME.to_owned(),
                        address,
                        index: entry.index,
                        attempts: entry.attempts,
                        interrupted: error.kind == "interrupted",
                        message: error.message,
                    });
                }
                EntryStatus::AwaitingRetry => {
                    let at = entry.retry_at.unwrap_or(Millis::MIN);
                    if at > self.now() {
                        let blocked = self.block(Block::Retry {
                            at,
                            address: address.clone(),
                            attempt: entry.attempts + 1,
                        });
                        match blocked.await {}
                    }
                    if self.note(|| resume(&address)) {
                        self.stop_here().await
                    }
                    (entry.index, entry.attempts)
                }
                EntryStatus::Running => {
                    // The executor died mid-attempt: that attempt failed.
                    if task.retry().delay_after(entry.attempts).is_none() {
                        let error = aiki_store::Failure::new(
                            "interrupted",
                            format!(
                                "attempt {} was interrupted (its executor stopped) and the \
                                 retry policy allows no other",
                                entry.attempts
                            ),
                        );
                        // The check reports the failure the execution would record.
                        if !self.probing() {
                            let mut failed = entry.clone();
                            failed.status = EntryStatus::Failed;
                            failed.error = Some(error.clone());
                            failed.updated_at = self.now();
                            self.put_entry(failed).await?;
                        }
                        return Err(WorkflowError::TaskFailed {
                            task: T::NAME.to_owned(),
                            address,
                            index: entry.index,
                            attempts: entry.attempts,
                            interrupted: true,
                            message: error.message,
                        });
                    }
                    if self.note(|| resume(&address)) {
                        self.stop_here().await
                    }
                    (entry.index, entry.attempts)
                }
            },
        };
        self.execute_task(task, input, address, index, failed_attempts)
            .await
    }

    async fn execute_task<T: Task>(
        &self,
        task: &T,
        input: T::Input,
        address: String,
        index: u32,
        mut failed_attempts: u32,
    ) -> Result<T::Output, WorkflowError> {
        let policy = task.retry();
        let schema = task.output_schema();
        let in_flight = self.in_flight();
        // Recorded with the attempt's first record (what `runs show` says it was given), and
        // the input of in-process retries.
        let input_json =
            serde_json::to_value(&input).map_err(|error| WorkflowError::InputNotSerializable {
                what: format!("input of task `{}`", T::NAME),
                message: error.to_string(),
            })?;
        let recorded_input = recorded_input(&input_json);
        let retry_input = (policy.max_attempts() > 1).then_some(input_json);
        let mut input = Some(input);
        let entry = |status, attempts, now| {
            EntryRecord::new(
                self.inner.id,
                address.clone(),
                index,
                EntryKind::Task,
                status,
                now,
            )
            .attempts(attempts)
        };
        loop {
            let attempt = failed_attempts + 1;
            // No new attempt while the run drains: its executor waits for those in flight.
            if self.draining().is_some() {
                drop(in_flight);
                match self.hold().await {}
            }
            let start =
                entry(EntryStatus::Running, attempt, self.now()).input(recorded_input.clone());
            if !self.start_attempt(start).await? {
                drop(in_flight);
                match self.hold().await {}
            }
            let this_input = match input.take() {
                Some(input) => input,
                None => serde_json::from_value(retry_input.clone().unwrap_or(Value::Null))
                    .map_err(|error| WorkflowError::InputNotSerializable {
                        what: format!("input of task `{}`", T::NAME),
                        message: error.to_string(),
                    })?,
            };
            let ctx = self.context(T::NAME, &address, index, attempt);
            let span = crate::trace::task_span(T::NAME, &address, attempt);
            let started = std::time::Instant::now();
            let attempted = attempt_once(task, this_input, ctx)
                .instrument(span.clone())
                .await;
            let (result, panicked) = match attempted {
                Ok(result) => (result, false),
                Err(panic) => (
                    Err(TaskError::new(format!("the task panicked: {panic}"))),
                    true,
                ),
            };
            let outcome = match (&result, panicked) {
                (Ok(_), _) => "completed",
                (Err(_), false) => "failed",
                (Err(_), true) => "panicked",
            };
            span.record("outcome", outcome);
            crate::metrics::task_attempt(T::NAME, outcome, started.elapsed());
            self.check_fatal()?;
            match result {
                Ok(output) => {
                    let json = serde_json::to_value(&output).map_err(|error| {
                        WorkflowError::InputNotSerializable {
                            what: format!("output of task `{}`", T::NAME),
                            message: error.to_string(),
                        }
                    })?;
                    let fingerprint = Some(schema.fingerprint().to_owned());
                    let completed = entry(EntryStatus::Completed, attempt, self.now())
                        .output(json, fingerprint);
                    // Written with the run's next write when it can be (one round trip per
                    // step), else now.
                    let Some(completed) = self.defer_result(completed) else {
                        return Ok(output);
                    };
                    match self.put_result(completed).await {
                        Ok(()) => return Ok(output),
                        // The store keeps no output this large, and the same call would make
                        // it again: the task fails for good, as a permanent error fails it.
                        Err(too_large @ WorkflowError::TooLarge { .. }) => {
                            let message = too_large.to_string();
                            span.in_scope(|| {
                                tracing::warn!(
                                    task = T::NAME,
                                    %address,
                                    attempt,
                                    error = %message,
                                    "task output over the store's size limit; the task fails"
                                );
                            });
                            let failure = aiki_store::Failure::new("too_large", message);
                            let failed = entry(EntryStatus::Failed, attempt, self.now());
                            return Err(self.failed_for_good(T::NAME, failed, failure).await);
                        }
                        Err(error) => return Err(error),
                    }
                }
                Err(error) => {
                    failed_attempts = attempt;
                    let kind = if panicked { "panicked" } else { "task_failed" };
                    let failure = aiki_store::Failure::new(kind, error.message());
                    let delay = if error.is_retryable() {
                        policy.delay_after(attempt)
                    } else {
                        None
                    };
                    span.in_scope(|| {
                        tracing::warn!(
                            task = T::NAME,
                            %address,
                            attempt,
                            kind,
                            error = error.message(),
                            retry_in = ?delay,
                            "task attempt failed"
                        );
                    });
                    match delay {
                        None => {
                            let failed = entry(EntryStatus::Failed, attempt, self.now());
                            return Err(self.failed_for_good(T::NAME, failed, failure).await);
                        }
                        Some(delay) if delay <= INLINE_RETRY_MAX => {
                            tracing::debug!(
                                task = T::NAME,
                                attempt,
                                "task failed; retrying in process"
                            );
                            crate::clock::sleep(&*self.inner.clock, delay).await;
                        }
                        Some(delay) => {
                            let at = self.now().saturating_add(millis(delay));
                            self.put_entry(
                                entry(EntryStatus::AwaitingRetry, attempt, self.now())
                                    .error(failure)
                                    .retry_at(at),
                            )
                            .await?;
                            drop(in_flight);
                            let blocked = self.block(Block::Retry {
                                at,
                                address: address.clone(),
                                attempt: attempt + 1,
                            });
                            match blocked.await {}
                        }
                    }
                }
            }
        }
    }

    /// Records `failed` (the call's last attempt) with `failure`, and returns the error the
    /// workflow gets for it: [`WorkflowError::TaskFailed`], or the write's own error.
    async fn failed_for_good(
        &self,
        task: &str,
        failed: EntryRecord,
        failure: aiki_store::Failure,
    ) -> WorkflowError {
        let (address, index, attempts) = (failed.address.clone(), failed.index, failed.attempts);
        let message = failure.message.clone();
        if let Err(error) = self.put_entry(failed.error(failure)).await {
            return error;
        }
        WorkflowError::TaskFailed {
            task: task.to_owned(),
            address,
            index,
            attempts,
            message,
            interrupted: false,
        }
    }

    /// Decodes a recorded output: trusted when its fingerprint is the current schema's,
    /// checked otherwise ([`schema::decode_recorded`]). A mismatch fails the run.
    pub(super) fn decode_recorded<O: schema::Recorded>(
        &self,
        what: String,
        address: &str,
        output: Value,
        fingerprint: Option<&str>,
    ) -> Result<O, WorkflowError> {
        schema::decode_recorded::<O>(output, fingerprint).map_err(|mismatch| {
            self.fail_fatally(WorkflowError::OutputSchemaMismatch {
                what,
                address: address.to_owned(),
                mismatch,
            })
        })
    }
}
