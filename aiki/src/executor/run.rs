//! Executing one claimed run: drive the workflow until it completes, fails, suspends or is
//! lost, keep its claim fresh meanwhile, and write where it ended.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::Poll;

use aiki_store::{Failure, Millis, RunRecord, RunStatus, StoreError, Transition};
use serde_json::Value;
use tracing::{Instrument, Span};

use super::Parts;
use super::budget::Budget;
use super::refresh::refresh_claim;
use crate::clock::millis;
use crate::direct::{DirectCalls, poll_workflow_code};
use crate::error::WorkflowError;
use crate::retry::RetryPolicy;
use crate::run::{Drain, Run, Suspension};
use crate::wake::work_available;

enum Outcome {
    Done(Result<(Value, String), WorkflowError>),
    Suspend(Suspension),
    /// Drained: the tasks in flight have recorded their results and no new one started.
    Drained(Drain),
    Lost,
}

/// What one execution did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    /// Where it left the run: the status it moved the run to, `handed_back` (its budget was
    /// spent: back to `queued`), or `lost`.
    pub(crate) outcome: &'static str,
    /// The task results it recorded.
    pub(crate) tasks_recorded: u64,
    /// A task of it was still running when its budget ran out.
    pub(crate) overran: bool,
}

impl Report {
    fn of(outcome: &'static str) -> Self {
        Report {
            outcome,
            tasks_recorded: 0,
            overran: false,
        }
    }
}

/// Executes one claimed run until it completes, fails, suspends, is lost or spends its
/// `budget`, inside its execution span.
pub(super) async fn execute(
    executor: Arc<Parts>,
    claimed: RunRecord,
    budget: Option<Budget>,
) -> Report {
    let span = crate::trace::execution_span(&claimed, &executor.id);
    drive(executor, claimed, budget).instrument(span).await
}

/// Records how the current execution ended on its span.
fn outcome(outcome: &'static str) -> &'static str {
    Span::current().record("outcome", outcome);
    outcome
}

/// Records where the execution moved the run: on its span, and in the metrics if it ended.
fn moved(record: &RunRecord) -> &'static str {
    if record.status.is_terminal() {
        let kind = record.error.as_ref().map(|error| error.kind.as_str());
        crate::metrics::run_ended(&record.namespace, record.status, kind);
    }
    outcome(record.status.as_str())
}

async fn drive(executor: Arc<Parts>, claimed: RunRecord, budget: Option<Budget>) -> Report {
    let id = claimed.id;
    let Some(workflow) = executor.registry.workflow(&claimed.namespace).cloned() else {
        // Handed a run it cannot execute: back to delivery at once, not after the claim's
        // idle timeout.
        tracing::error!(
            run_id = %id,
            namespace = %claimed.namespace,
            "handed a run of a version this executor's registry does not serve; releasing it"
        );
        let release = Transition::to(RunStatus::Queued, executor.clock.now());
        return Report::of(move_unexecuted(&executor, &claimed, release).await);
    };
    let history = match super::history::load_claimed(&executor, &claimed, budget).await {
        Ok(history) if history.run.revision == claimed.revision => history,
        Ok(_) => return Report::of(outcome("lost")),
        Err(error) => {
            crate::metrics::store_error("load_history", &error);
            return Report::of(unreadable_history(&executor, &claimed, error).await);
        }
    };
    let input = history.run.input.clone();
    let run = Run::from_history(
        history,
        crate::run::RunStore::Executor(executor.store.clone()),
        executor.clock.clone(),
        executor.registry.state().clone(),
        executor.registry.served().clone(),
    )
    .noting_calls(executor.called.clone())
    .with_history_limits(executor.history_limits);
    // A pause requested while an executor of an earlier release held it: drain at once.
    if claimed.pause_requested_at.is_some() {
        run.drain(Drain::Pause);
    }
    // The workflow future borrows the run; a panic while polling it is a workflow error.
    let mut future = workflow.execute(&run, input);
    let direct = Arc::new(DirectCalls::default());
    // The task results the workflow has seen are written with its next write; one that waits
    // on something it does not write (a task still running beside one that ended) has them
    // written here instead, at once. A workflow that ends meanwhile waits for that write (its
    // results are in it), not for another of the same results.
    let mut flushing: Option<Flushing<'_>> = None;
    let mut finished = None;
    let driven = poll_fn(|cx| {
        if finished.is_none() {
            let polled = poll_workflow_code(future.as_mut(), &direct, cx);
            run.set_waker(cx.waker());
            if let Poll::Ready(result) = polled {
                finished = Some(result);
            }
        }
        loop {
            if finished.is_none() {
                match (run.drained(), run.suspension()) {
                    (Some(reason), _) => return Poll::Ready(Outcome::Drained(reason)),
                    (None, Some(suspension)) => return Poll::Ready(Outcome::Suspend(suspension)),
                    (None, None) => {}
                }
                if flushing.is_none() && run.has_unsent() {
                    flushing = Some(Box::pin(run.flush_results()));
                }
            }
            let Some(flush) = flushing.as_mut() else {
                return match finished.take() {
                    Some(result) => Poll::Ready(Outcome::Done(result)),
                    None => Poll::Pending,
                };
            };
            let Poll::Ready(written) = flush.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            flushing = None;
            if let Err(error) = written {
                tracing::warn!(run_id = %id, %error, "task results refused; stopping");
                return Poll::Ready(Outcome::Lost);
            }
        }
    });
    // The claim refresher is a branch of this select, not a task of its own: it ends with the
    // execution, whether that completes, panics, or is dropped (a shutdown, a dropped worker).
    // At the end of an execution budget, the execution is dropped wherever it waits (something
    // no drain reaches: a sleep of its own, a call to another service) and the run handed
    // back: on a platform that ends the request at the budget, a claim held on would never be
    // answered.
    let outcome = tokio::select! {
        biased;
        () = refresh_claim(&executor, &run, budget) => Outcome::Lost,
        outcome = driven => outcome,
        () = budget_end(budget) => {
            tracing::warn!(
                run_id = %id,
                "the execution budget ran out while the workflow awaited something other than a \
                 task or a durable wait; handing the run back"
            );
            Outcome::Drained(Drain::Budget)
        }
    };
    // A flush still under way (the claim was lost) gives its results back, and its hold on
    // the run's writes.
    drop(flushing);
    drop(future);
    // Before the last writes: whether the workflow's own work outlasted the budget.
    let overran = budget.is_some_and(|budget| budget.overran());
    let ended = ended(&executor, &run, workflow.retry(), budget, outcome).await;
    Report {
        outcome: ended,
        tasks_recorded: run.recorded(),
        overran,
    }
}

/// Completes when `budget` ends (never without one).
async fn budget_end(budget: Option<Budget>) {
    match budget {
        // Real time: the budget is the platform's request timeout.
        Some(budget) => tokio::time::sleep_until(budget.ends_at).await,
        None => std::future::pending().await,
    }
}

/// The executor's write of the task results a waiting workflow has seen.
type Flushing<'r> = std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'r>>;

/// Writes where an execution that ended with `outcome` leaves the run; returns that.
async fn ended(
    executor: &Arc<Parts>,
    run: &Run,
    retry: RetryPolicy,
    budget: Option<Budget>,
    outcome: Outcome,
) -> &'static str {
    let id = run.id();
    let now = executor.clock.now();
    let result = match outcome {
        Outcome::Lost => return self::outcome("lost"),
        Outcome::Drained(reason) => match run.take_fatal() {
            Some(error) => Err(error),
            None => {
                tracing::debug!(?reason, "run drained");
                return match reason {
                    Drain::Pause => finish(run, Transition::to(RunStatus::Paused, now)).await,
                    // A shutdown releases the run for another worker (the store pauses it
                    // instead if a pause was requested meanwhile).
                    Drain::Shutdown => finish(run, Transition::to(RunStatus::Queued, now)).await,
                    Drain::Budget => match &budget {
                        Some(budget) => super::budget::hand_back(executor, run, budget, now).await,
                        None => finish(run, Transition::to(RunStatus::Queued, now)).await,
                    },
                };
            }
        },
        Outcome::Suspend(suspension) => match run.take_fatal() {
            Some(error) => Err(error),
            None => {
                tracing::debug!(
                    status = %suspension.status,
                    due_at = ?suspension.due_at,
                    "run suspended"
                );
                let mut transition = Transition::to(suspension.status, now).wait(suspension.wait);
                transition.due_at = suspension.due_at;
                return finish_then(run, transition, timer_for(executor)).await;
            }
        },
        Outcome::Done(result) => match run.take_fatal() {
            Some(error) => Err(error),
            None => result,
        },
    };
    match result {
        Ok((output, fingerprint)) => {
            let transition = Transition::to(RunStatus::Completed, now).output(output, fingerprint);
            match finish_sized(run, transition, |_| {}).await {
                Ok(moved) => moved,
                // An output the store does not keep fails the run (never retried: a replay
                // returns the same output).
                Err(too_large) => fail_or_retry(executor, run, retry, too_large).await,
            }
        }
        Err(WorkflowError::Lost(error)) => {
            tracing::warn!(run_id = %id, %error, "run lost by this executor; stopping");
            self::outcome("lost")
        }
        Err(WorkflowError::ContinueAsNew(next)) => match run.continue_with(next).await {
            Ok(continued) => {
                tracing::debug!(run_id = %id, successor = %continued.successor.id, "run continued as new");
                work_available();
                moved(&continued.predecessor)
            }
            Err(WorkflowError::Lost(error)) => {
                tracing::warn!(run_id = %id, %error, "continuation refused; stopping");
                self::outcome("lost")
            }
            Err(refused) => fail_or_retry(executor, run, retry, refused).await,
        },
        Err(error) => fail_or_retry(executor, run, retry, error).await,
    }
}

/// A claimed run whose history could not be loaded. A corrupt record would be read again by
/// every replay, so the run fails (`corrupt_history`) instead of cycling through claim and
/// release; a record from a newer release is left to a worker that can read it; any other
/// error (the claim lost meanwhile, or the store still unreachable when the worker shut down
/// or the execution's budget ran out: see `history::load_claimed`) leaves the run to whoever
/// holds it, or to claim recovery.
async fn unreadable_history(
    executor: &Parts,
    claimed: &RunRecord,
    error: StoreError,
) -> &'static str {
    let id = claimed.id;
    let now = executor.clock.now();
    let transition = match error {
        StoreError::Corrupt { message } => {
            tracing::error!(run_id = %id, %message, "history is corrupt; failing the run");
            let failure = Failure::new(
                "corrupt_history",
                format!(
                    "the history of run {id} cannot be read ({message}); the run is failed \
                     rather than retried, since every replay would read the same record"
                ),
            );
            Transition::to(RunStatus::Failed, now).error(failure)
        }
        StoreError::Incompatible { message } => {
            tracing::warn!(
                run_id = %id,
                %message,
                "history holds a record of a newer release; releasing the run for a newer worker"
            );
            executor.back_off_from(id);
            Transition::to(RunStatus::Queued, now)
        }
        error => {
            tracing::warn!(run_id = %id, %error, "history not loaded; leaving the run");
            return outcome("lost");
        }
    };
    move_unexecuted(executor, claimed, transition).await
}

/// Moves a claimed run this execution does not execute (released, or failed as unreadable),
/// at the revision it was claimed at.
async fn move_unexecuted(
    executor: &Parts,
    claimed: &RunRecord,
    transition: Transition,
) -> &'static str {
    let id = claimed.id;
    let moved_by = crate::resend::resent(
        || {
            executor
                .store
                .transition(id, claimed.revision, transition.clone())
        },
        // Until the worker shuts down: the store or server may be restarting.
        |_, _| !*executor.draining.borrow(),
    );
    match moved_by.await {
        Ok(record) => moved(&record),
        Err(error) => {
            tracing::warn!(run_id = %id, %error, "could not move the run; the claim will expire");
            outcome("lost")
        }
    }
}

/// Fails the run, or schedules a workflow retry. The retry replays every recorded entry as
/// recorded except the task call whose unhandled failure failed this attempt, which runs again;
/// a failure the workflow handled is history and replays as such.
async fn fail_or_retry(
    executor: &Arc<Parts>,
    run: &Run,
    policy: RetryPolicy,
    error: WorkflowError,
) -> &'static str {
    let now = executor.clock.now();
    let delay = if error.is_retryable() {
        policy.delay_after(run.attempt())
    } else {
        None
    };
    tracing::warn!(
        run_id = %run.id(),
        kind = error.kind(),
        error = %error,
        retry_in = ?delay,
        "workflow attempt failed"
    );
    let Some(delay) = delay else {
        return finish(
            run,
            Transition::to(RunStatus::Failed, now).error(error.to_failure()),
        )
        .await;
    };
    let due: Millis = now.saturating_add(millis(delay));
    let failure = error.to_failure();
    let transition = Transition::to(RunStatus::AwaitingRetry, now)
        .due_at(due)
        .rerun(failure.call.iter().cloned().collect())
        .error(failure)
        .attempts(run.attempt() + 1);
    finish_then(run, transition, timer_for(executor)).await
}

/// Sets this process's timer for a run's due time as the store wrote it: the store owns due
/// times (see `ExecutorStore::transition`), which may differ from what the executor sent.
fn timer_for(executor: &Arc<Parts>) -> impl FnOnce(&RunRecord) + '_ {
    |record| {
        if let Some(due) = record.due_at {
            crate::wake::timer_at(&executor.clock, due);
        }
    }
}

/// The executor's last write for this execution; where it left the run.
pub(super) async fn finish(run: &Run, transition: Transition) -> &'static str {
    finish_then(run, transition, |_| {}).await
}

/// [`finish`], calling `written` with the run as the store wrote it.
async fn finish_then(
    run: &Run,
    transition: Transition,
    written: impl FnOnce(&RunRecord),
) -> &'static str {
    match finish_sized(run, transition, written).await {
        Ok(moved) => moved,
        Err(error) => {
            tracing::warn!(run_id = %run.id(), %error, "final write refused; stopping");
            outcome("lost")
        }
    }
}

/// [`finish`], except that a transition whose output is over the store's size limit comes
/// back as [`WorkflowError::TooLarge`], nothing written, for the caller to fail the run with.
async fn finish_sized(
    run: &Run,
    transition: Transition,
    on_written: impl FnOnce(&RunRecord),
) -> Result<&'static str, WorkflowError> {
    let id = run.id();
    let revision = run.revision();
    let written = run
        .write_sized(move |store| {
            let transition = transition.clone();
            async move { store.transition(id, revision, transition).await }
        })
        .await;
    match written {
        Ok(record) => {
            tracing::debug!(run_id = %id, status = %record.status, "run moved");
            on_written(&record);
            work_available();
            Ok(moved(&record))
        }
        Err(too_large @ WorkflowError::TooLarge { .. }) => {
            tracing::warn!(run_id = %id, error = %too_large, "the run's output is refused");
            Err(too_large)
        }
        Err(error) => {
            tracing::warn!(run_id = %id, %error, "final write refused; stopping");
            Ok(outcome("lost"))
        }
    }
}
