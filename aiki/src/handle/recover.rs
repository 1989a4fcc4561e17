//! Recovering failed runs: `retry` puts a `failed` run back into delivery after a fix.
//!
//! The rule, the same as the automatic workflow retry's: recorded entries replay as recorded,
//! except the task call whose unhandled failure failed the run, which runs again. A failure the
//! workflow handled is history and replays as such, so the retried run takes the same path. A
//! task interrupted under an at-most-once policy (`never`) runs again only when asked
//! explicitly. A child whose end its parent has already acted on is not retried unless asked.

use aiki_store::{
    CallRef, EntryKind, EntryStatus, History, RunId, RunRecord, RunStatus, StoreError, Transition,
};

use super::any::AnyRun;
use crate::error::ClientError;

/// What a [`retry`](AnyRun::retry) may do beyond the default rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryOptions {
    /// Run again a task interrupted under an at-most-once policy (`never`): it may have had
    /// its effect before its executor stopped.
    pub rerun_interrupted: bool,
    /// Retry a child run even though its parent has recorded the child's end (and replays
    /// that record: the retried child's new outcome does not reach it).
    pub even_if_observed: bool,
}

impl RetryOptions {
    /// Also run again a task interrupted under an at-most-once policy.
    pub fn rerun_interrupted(mut self) -> Self {
        self.rerun_interrupted = true;
        self
    }

    /// Also retry a child whose parent has acted on its end.
    pub fn even_if_observed(mut self) -> Self {
        self.even_if_observed = true;
        self
    }
}

/// What a retry of a failed run will do (its dry run).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPlan {
    /// The run.
    pub run_id: RunId,
    /// The task calls that run again (at most one: the one whose unhandled failure failed the
    /// run); every other recorded entry replays as recorded.
    pub rerun: Vec<CallRef>,
    /// Task calls interrupted under an at-most-once policy that the retry would run again: it
    /// needs [`RetryOptions::rerun_interrupted`].
    pub interrupted: Vec<CallRef>,
    /// The parent that has recorded this child's end (and replays that record, whatever a
    /// retry makes of the child): the retry needs [`RetryOptions::even_if_observed`].
    pub observed_by: Option<RunId>,
    /// The run's revision when the plan was made: the retry applies only at this revision.
    pub revision: u64,
    /// The run's attempts so far; the retry makes it one more.
    pub attempts: u32,
}

impl AnyRun {
    /// What [`retry`](AnyRun::retry) would do, without doing it: the call it runs again, an
    /// interrupted at-most-once task it would need leave to re-run, a parent that already acted
    /// on the run's end. [`ClientError::InvalidAction`] unless the run is `failed`.
    pub async fn retry_plan(&self) -> Result<RetryPlan, ClientError> {
        let history = self.client().store.load_history(self.id()).await?;
        let run = &history.run;
        if run.status != RunStatus::Failed {
            return Err(not_failed(run));
        }
        let mut plan = RetryPlan {
            run_id: run.id,
            rerun: Vec::new(),
            interrupted: Vec::new(),
            observed_by: None,
            revision: run.revision,
            attempts: run.attempts,
        };
        if let Some(call) = failed_call(&history) {
            if run.error.as_ref().is_some_and(|e| e.kind == "interrupted") {
                plan.interrupted.push(call);
            } else {
                plan.rerun.push(call);
            }
        }
        if let Some(parent) = &run.parent {
            // A parent records each child outcome it observes, in the child wait's queue.
            let queue = crate::run::outcome_queue(&parent.address);
            let events = self
                .client()
                .store
                .load_history(parent.run_id)
                .await?
                .events;
            if events
                .iter()
                .any(|event| event.name == queue && crate::run::holds_outcome_of(event, run.id))
            {
                plan.observed_by = Some(parent.run_id);
            }
        }
        Ok(plan)
    }

    /// Moves a `failed` run back to delivery with `attempts + 1` (timeline reason `retried`),
    /// after the code that failed it has been fixed and deployed. Recorded entries replay as
    /// recorded, except the task call whose unhandled failure failed the run, which runs again;
    /// a run failed by non-determinism, a schema mismatch or its own code replays its entries
    /// and continues under the new code. One atomic store operation: the status change and the
    /// entry reset land together or not at all.
    ///
    /// Refused: a run that is not `failed` ([`ClientError::InvalidAction`]); a run failed by a
    /// task interrupted under an at-most-once policy, unless
    /// [`rerun_interrupted`](RetryOptions::rerun_interrupted)
    /// ([`ClientError::InterruptedTask`]); a child whose parent has run since it ended, unless
    /// [`even_if_observed`](RetryOptions::even_if_observed)
    /// ([`ClientError::ObservedByParent`]).
    pub async fn retry(&self, options: RetryOptions) -> Result<RunRecord, ClientError> {
        loop {
            let plan = self.retry_plan().await?;
            if let Some(call) = plan.interrupted.first()
                && !options.rerun_interrupted
            {
                return Err(ClientError::InterruptedTask {
                    run_id: plan.run_id,
                    call: call.clone(),
                });
            }
            if let Some(parent) = plan.observed_by
                && !options.even_if_observed
            {
                return Err(ClientError::ObservedByParent {
                    run_id: plan.run_id,
                    parent,
                });
            }
            let rerun = plan.rerun.into_iter().chain(plan.interrupted).collect();
            let change = Transition::to(RunStatus::Queued, self.client().clock.now())
                .attempts(plan.attempts + 1)
                .rerun(rerun);
            match self
                .client()
                .store
                .transition(plan.run_id, plan.revision, change)
                .await
            {
                Ok(run) => {
                    crate::wake::work_available();
                    return Ok(run);
                }
                // It moved since the plan: plan again (a run no longer failed is refused).
                Err(StoreError::RevisionConflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }
}

fn not_failed(run: &RunRecord) -> ClientError {
    ClientError::InvalidAction {
        run_id: run.id,
        action: "retry",
        status: run.status,
        expected: vec![RunStatus::Failed],
    }
}

/// The task call whose unhandled failure failed the run: recorded with the run's error; for a
/// run failed before the call was recorded, the last failed entry at the address its error
/// names.
fn failed_call(history: &History) -> Option<CallRef> {
    let error = history.run.error.as_ref()?;
    if let Some(call) = &error.call {
        return Some(call.clone());
    }
    if error.kind != "task_failed" && error.kind != "interrupted" {
        return None;
    }
    let (_, rest) = error.message.split_once(" at `")?;
    let (address, _) = rest.split_once('`')?;
    history
        .entries
        .iter()
        .filter(|entry| {
            entry.kind == EntryKind::Task
                && entry.status == EntryStatus::Failed
                && entry.address == address
        })
        .map(|entry| CallRef::new(&entry.address, entry.index))
        .max_by_key(|call| call.index)
}
