//! Recovering failed runs: `retry` puts a `failed` run back into delivery after a fix.
//!
//! The rule, the same as the automatic workflow retry's: recorded entries replay as recorded,
//! except the task call whose unhandled failure failed the run, which runs again. A failure the
//! workflow handled is history and replays as such, so the retried run takes the same path. A
//! task interrupted under an at-most-once policy (`never`) runs again only when asked
//! explicitly. A child whose end its parent has already acted on is not retried unless asked.
//!
//! A run failed by a child's failure is different: it recorded the child's outcome, and replays
//! that record, so a plain retry fails the same way again. Such a run is never retried
//! automatically, and an operator's retry is refused unless it either retries the child with it
//! ([`RetryOptions::rerun_child`]: in one atomic operation, fenced on both runs' revisions, the
//! parent forgets the outcome it recorded and the same child run is retried by its own rule, so
//! a child with a reference id needs no second run; the parent then waits for it again) or is
//! forced ([`RetryOptions::force`]: the parent's code now handles the failure).

use std::future::Future;
use std::pin::Pin;

use aiki_store::{
    CallRef, EntryKind, EntryStatus, History, Move, RunId, RunRecord, RunStatus, SlotRef,
    StoreError, Transition,
};

use super::any::AnyRun;
use crate::error::ClientError;

/// How deep a retry follows a chain of failed children (a parent failed by a child failed by
/// its own child...).
const MAX_CHAIN: usize = 16;

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
    /// For a run failed by a failed child it recorded: forget the recorded outcome and retry
    /// that child run too (unless it has completed or runs again since), in the same atomic
    /// operation, so that the retried run waits for the child as it is then (the same run: a
    /// child with a reference id needs no second run). Follows a chain of failed children down
    /// to the first that failed on its own.
    pub rerun_child: bool,
    /// Retry even a run whose retry replays the same failure (a child's recorded failure):
    /// for code that now handles that failure.
    pub force: bool,
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

    /// Also retry the failed child whose recorded failure failed the run.
    pub fn rerun_child(mut self) -> Self {
        self.rerun_child = true;
        self
    }

    /// Retry even when the retry would replay the same failure.
    pub fn force(mut self) -> Self {
        self.force = true;
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
    /// The failed child whose recorded failure failed this run: a plain retry replays it and
    /// fails again; it needs [`RetryOptions::rerun_child`] or [`RetryOptions::force`].
    pub failed_child: Option<FailedChild>,
    /// The run's revision when the plan was made: the retry applies only at this revision.
    pub revision: u64,
    /// The run's attempts so far; the retry makes it one more.
    pub attempts: u32,
}

/// The child run whose failure failed its parent (see [`RetryPlan::failed_child`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailedChild {
    /// The child run.
    pub run_id: RunId,
    /// Its status now: `failed`; `cancelled`, which no retry revives; or, retried on its own
    /// since, `completed` or on its way again (the parent still replays the failure it
    /// recorded).
    pub status: RunStatus,
    /// Where the parent recorded the child's outcome (`None` for a parent that read the
    /// child's live row, as runs recorded before outcomes were kept do).
    pub observed: Option<SlotRef>,
    /// The child's own retry plan, when it is `failed`.
    pub plan: Option<Box<RetryPlan>>,
}

impl RetryPlan {
    /// Whether a retry with `options` would replay the recorded failure of a child and fail
    /// the same way again.
    pub fn fails_again(&self, options: RetryOptions) -> bool {
        self.failed_child.is_some() && !options.rerun_child && !options.force
    }

    /// Whether a retry with `options` would be refused, and why: the error
    /// [`retry`](AnyRun::retry) would return (an interrupted at-most-once task, a parent that
    /// acted on the run's end, a child's recorded failure, down the chain of failed children),
    /// without writing anything.
    pub fn check(&self, options: RetryOptions) -> Result<(), ClientError> {
        self.moves(options, 0, None, false).map(drop)
    }

    /// The store moves of a retry with `options`, checked against the rule: this run's, then
    /// (with [`RetryOptions::rerun_child`]) its failed child's, down the chain. `nested`: this
    /// run is retried as the failed child of the run before it.
    fn moves(
        &self,
        options: RetryOptions,
        now: aiki_store::Millis,
        actor: Option<&str>,
        nested: bool,
    ) -> Result<Vec<Move>, ClientError> {
        if let Some(call) = self.interrupted.first()
            && !options.rerun_interrupted
        {
            return Err(ClientError::InterruptedTask {
                run_id: self.run_id,
                call: call.clone(),
            });
        }
        if let Some(parent) = self.observed_by
            && !options.even_if_observed
            && !nested
        {
            return Err(ClientError::ObservedByParent {
                run_id: self.run_id,
                parent,
            });
        }
        let mut forget = Vec::new();
        let mut below = Vec::new();
        if let Some(child) = &self.failed_child {
            if options.rerun_child {
                // The parent forgets the outcome it recorded and waits for the child as it is
                // then: a failed child is retried with it, one that completed since (or is
                // running again) needs nothing more, a cancelled one cannot be revived.
                forget.extend(child.observed.clone());
                match (child.status, &child.plan) {
                    (RunStatus::Failed, Some(plan)) => {
                        below = plan.moves(options, now, actor, true)?;
                    }
                    (RunStatus::Failed | RunStatus::Cancelled, _) => {
                        return Err(ClientError::ChildNotRetryable {
                            run_id: self.run_id,
                            child: child.run_id,
                            status: child.status,
                        });
                    }
                    _ => {}
                }
            } else if !options.force {
                return Err(ClientError::RetryWouldFailAgain {
                    run_id: self.run_id,
                    child: child.run_id,
                    status: child.status,
                });
            }
        }
        let rerun = self
            .rerun
            .iter()
            .chain(&self.interrupted)
            .cloned()
            .collect();
        let change = Transition::to(RunStatus::Queued, now)
            .attempts(self.attempts + 1)
            .rerun(rerun)
            .forget(forget)
            .by(actor.map(str::to_owned));
        let mut moves = vec![Move::new(self.run_id, self.revision, change)];
        moves.extend(below);
        Ok(moves)
    }
}

type PlanFuture<'a> = Pin<Box<dyn Future<Output = Result<RetryPlan, ClientError>> + Send + 'a>>;

impl AnyRun {
    /// What [`retry`](AnyRun::retry) would do, without doing it: the call it runs again, an
    /// interrupted at-most-once task it would need leave to re-run, a parent that already acted
    /// on the run's end, a failed child whose recorded failure it would replay (with that
    /// child's own plan). [`ClientError::InvalidAction`] unless the run is `failed`.
    pub async fn retry_plan(&self) -> Result<RetryPlan, ClientError> {
        self.plan(0).await
    }

    fn plan(&self, depth: usize) -> PlanFuture<'_> {
        Box::pin(async move {
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
                failed_child: None,
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
                let queue = aiki_store::Queue::ChildWait(parent.address.clone());
                let events = self
                    .client()
                    .store
                    .load_history(parent.run_id)
                    .await?
                    .events;
                if events.iter().any(|event| {
                    event.queue() == queue && crate::run::holds_outcome_of(event, run.id)
                }) {
                    plan.observed_by = Some(parent.run_id);
                }
            }
            if let Some((child, observed)) = failing_child(&history) {
                let status = self.client().store.get_run(child).await?.status;
                let plan_of_child = if status == RunStatus::Failed && depth < MAX_CHAIN {
                    let child_run = AnyRun::new(self.client().clone(), child);
                    Some(Box::new(child_run.plan(depth + 1).await?))
                } else {
                    None
                };
                plan.failed_child = Some(FailedChild {
                    run_id: child,
                    status,
                    observed,
                    plan: plan_of_child,
                });
            }
            Ok(plan)
        })
    }

    /// Moves a `failed` run back to delivery with `attempts + 1` (timeline reason `retried`),
    /// after the code that failed it has been fixed and deployed. Recorded entries replay as
    /// recorded, except the task call whose unhandled failure failed the run, which runs again;
    /// a run failed by non-determinism, a schema mismatch or its own code replays its entries
    /// and continues under the new code. One atomic store operation: the status change and the
    /// entry reset land together or not at all (with [`RetryOptions::rerun_child`], the failed
    /// child's retry and the parent's forgotten record of it too).
    ///
    /// Refused: a run that is not `failed` ([`ClientError::InvalidAction`]); a run failed by a
    /// task interrupted under an at-most-once policy, unless
    /// [`rerun_interrupted`](RetryOptions::rerun_interrupted)
    /// ([`ClientError::InterruptedTask`]); a child whose parent has run since it ended, unless
    /// [`even_if_observed`](RetryOptions::even_if_observed)
    /// ([`ClientError::ObservedByParent`]); a run failed by a child's recorded failure, which a
    /// retry would replay, unless [`rerun_child`](RetryOptions::rerun_child) or
    /// [`force`](RetryOptions::force) ([`ClientError::RetryWouldFailAgain`]), and with
    /// `rerun_child` when that child was cancelled ([`ClientError::ChildNotRetryable`]).
    pub async fn retry(&self, options: RetryOptions) -> Result<RunRecord, ClientError> {
        loop {
            let plan = self.retry_plan().await?;
            let now = self.client().clock.now();
            let moves = plan.moves(options, now, self.client().actor(), false)?;
            let client = self.client();
            match client
                .sent(|| client.store.transition_all(moves.clone()))
                .await
            {
                Ok(mut runs) => {
                    crate::wake::work_available();
                    return Ok(runs.swap_remove(0));
                }
                // One of the runs moved since the plan: plan again (a run no longer failed is
                // refused).
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
    if error.kind == "child_failed" {
        // Its call is the child's start: no task to run again.
        return None;
    }
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

/// The child whose failure failed the run (its error is `child_failed`, naming the child's
/// run), and where the run recorded that child's outcome, if it did.
fn failing_child(history: &History) -> Option<(RunId, Option<SlotRef>)> {
    let error = history.run.error.as_ref()?;
    if error.kind != "child_failed" {
        return None;
    }
    // The error's call is the child's start, whose entry holds the child's run id; a run
    // failed before errors carried it names the child in its message: "child workflow
    // NAME@VERSION (run ID) ended ...".
    let started = error.call.as_ref().and_then(|call| {
        history
            .entries
            .iter()
            .find(|entry| {
                entry.kind == EntryKind::Child
                    && entry.address == call.address
                    && entry.index == call.index
            })
            .and_then(|entry| entry.output.as_ref()?.as_str()?.parse::<RunId>().ok())
    });
    let named = started.or_else(|| {
        error
            .message
            .split_once("(run ")
            .and_then(|(_, rest)| rest.split_once(')'))
            .and_then(|(id, _)| id.parse::<RunId>().ok())
    });
    let unsuccessful: Vec<(SlotRef, RunId)> = crate::run::observed_outcomes(&history.events)
        .into_iter()
        .filter(|(_, _, status)| status.is_unsuccessful())
        .map(|(slot, child, _)| (slot, child))
        .collect();
    match named {
        Some(child) => {
            let slot = unsuccessful
                .into_iter()
                .filter(|(_, id)| *id == child)
                .map(|(slot, _)| slot)
                .next_back();
            Some((child, slot))
        }
        None if unsuccessful.len() == 1 => {
            let (slot, child) = unsuccessful.into_iter().next()?;
            Some((child, Some(slot)))
        }
        None => None,
    }
}
