//! Catching a `#[task]` function called directly from workflow code.
//!
//! `charge_card(x).await` in a workflow, instead of `ChargeCard.start(run, x).await`, runs the
//! side effect outside the run's record: again at every replay, and in the impact check, which
//! must never cause one. The executor (and the check) polls workflow code inside a scope that
//! marks it as such; every `#[task]` function starts by asking whether it is polled there
//! ([`guard`]), and if so records the mistake and never goes on. Task attempts run outside the
//! scope (on tokio tasks of their own, or in place inside [`outside_workflow_code`]), so a task
//! calling another task's function as a helper, and a unit test calling it, are fine.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::error::WorkflowError;

tokio::task_local! {
    static WORKFLOW_CODE: Option<Arc<DirectCalls>>;
}

/// Where the first direct call of one execution is recorded.
#[derive(Debug, Default)]
pub(crate) struct DirectCalls(Mutex<Option<WorkflowError>>);

impl DirectCalls {
    /// The direct call made, if any.
    pub(crate) fn take(&self) -> Option<WorkflowError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Polls a workflow's future once, marked as workflow code: a panic is a workflow error, and
/// so is a direct task call made during the poll (whatever the workflow did with it).
pub(crate) fn poll_workflow_code<F, T>(
    future: Pin<&mut F>,
    calls: &Arc<DirectCalls>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, WorkflowError>>
where
    F: Future<Output = Result<T, WorkflowError>> + ?Sized,
{
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        WORKFLOW_CODE.sync_scope(Some(calls.clone()), || future.poll(cx))
    }));
    if let Some(error) = calls.take() {
        return Poll::Ready(Err(error));
    }
    match polled {
        Ok(polled) => polled,
        Err(payload) => Poll::Ready(Err(WorkflowError::Panicked {
            message: crate::panic::message(&*payload),
        })),
    }
}

/// A task attempt run in place, inside a poll of workflow code: not workflow code itself.
pub(crate) fn outside_workflow_code<F: Future>(future: F) -> impl Future<Output = F::Output> {
    WORKFLOW_CODE.scope(None, future)
}

/// The prologue of every `#[task]` function: ready at once, unless workflow code is polling it;
/// then the mistake is recorded for the executor, which fails the run with
/// [`WorkflowError::DirectTaskCall`], and the function's body never runs.
pub(crate) async fn guard(task: &'static str, task_type: &'static str, function: &'static str) {
    let Ok(Some(calls)) = WORKFLOW_CODE.try_with(Clone::clone) else {
        return;
    };
    tracing::warn!(
        task,
        function,
        "a task function was called directly from workflow code"
    );
    calls
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(WorkflowError::DirectTaskCall {
            task: task.to_owned(),
            function: function.to_owned(),
            task_type: task_type.to_owned(),
        });
    std::future::pending::<()>().await;
}
