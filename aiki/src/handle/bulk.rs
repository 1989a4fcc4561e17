//! Bulk actions over a filter: a dry run lists the runs an action applies to and checks each as
//! the action would ([`Client::bulk_check`]: those it would skip, and why); execution takes
//! that list (or the filter with a maximum), acts on several runs at once, and reports one
//! outcome per run, skipping those that no longer qualify. [`Client::bulk_each`] reports each
//! outcome as it comes and stops cleanly when told to (a Ctrl-C), or at the first failure that
//! is not the run's own.

use std::future::Future;
use std::ops::ControlFlow;
use std::pin::pin;
use std::time::Duration;

use aiki_store::{RunAction, RunFilter, RunId, RunRecord, RunStatus, StoreError};
use futures_util::StreamExt;
use futures_util::future::join_all;
use futures_util::stream::FuturesUnordered;

use super::any::AnyRun;
use super::recover::RetryOptions;
use crate::client::Client;
use crate::error::ClientError;

/// An action applied to many runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BulkAction {
    /// [`AnyRun::cancel`].
    Cancel,
    /// [`AnyRun::retry`], with these options.
    Retry(RetryOptions),
    /// [`AnyRun::requeue`].
    Requeue,
    /// [`AnyRun::resume`].
    Resume,
}

impl BulkAction {
    /// The action's verb: `cancel`, `retry`, `requeue`, `resume`.
    pub fn verb(self) -> &'static str {
        match self {
            BulkAction::Cancel => "cancel",
            BulkAction::Retry(_) => "retry",
            BulkAction::Requeue => "requeue",
            BulkAction::Resume => "resume",
        }
    }

    /// The statuses the action applies to.
    pub fn applies_to(self) -> Vec<RunStatus> {
        match self {
            BulkAction::Cancel => RunAction::Cancel.applies_from(),
            BulkAction::Retry(_) => vec![RunStatus::Failed],
            BulkAction::Requeue => RunAction::Requeue.applies_from(),
            BulkAction::Resume => RunAction::Resume.applies_from(),
        }
    }

    async fn apply(self, run: &AnyRun) -> Result<RunRecord, ClientError> {
        match self {
            BulkAction::Cancel => {
                // Cancelling an ended run changes nothing: in a bulk action it no longer
                // qualifies, and is reported so.
                let record = run.record().await?;
                if record.status.is_terminal() {
                    return Err(self.not_for(&record));
                }
                run.cancel().await
            }
            BulkAction::Retry(options) => run.retry(options).await,
            BulkAction::Requeue => run.requeue().await,
            BulkAction::Resume => run.resume().await,
        }
    }

    /// What [`apply`](Self::apply) would refuse the run for, without acting: a status the action
    /// does not apply to, and for a retry every refusal of its plan (a child's recorded failure
    /// without `rerun_child`, an interrupted at-most-once task without `rerun_interrupted`, a
    /// parent that acted on the run's end without `even_if_observed`).
    async fn check(self, run: &AnyRun) -> Result<(), ClientError> {
        if let BulkAction::Retry(options) = self {
            return run.retry_plan().await?.check(options);
        }
        let record = run.record().await?;
        if self.applies_to().contains(&record.status) {
            Ok(())
        } else {
            Err(self.not_for(&record))
        }
    }

    /// The refusal of the action for a run whose status it does not apply to.
    fn not_for(self, run: &RunRecord) -> ClientError {
        ClientError::InvalidAction {
            run_id: run.id,
            action: self.verb(),
            status: run.status,
            expected: self.applies_to(),
        }
    }
}

/// The dry run of a bulk action on a list of runs ([`Client::bulk_check`]): the runs it would
/// act on, and those it would skip with the refusal each would meet.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct BulkCheck {
    /// The runs the action would act on, in the order given.
    pub acts: Vec<RunId>,
    /// The runs it would skip, in the order given, each with why: its status no longer
    /// qualifies, it is gone, or the action needs an option it was not given (a retry that would
    /// replay a child's recorded failure needs [`RetryOptions::rerun_child`] or
    /// [`RetryOptions::force`]); the error's message says which.
    pub skips: Vec<(RunId, ClientError)>,
}

/// What happened to one run of a bulk action.
#[derive(Debug)]
#[non_exhaustive]
pub enum BulkOutcome {
    /// Done: the run as it is afterwards.
    Done(Box<RunRecord>),
    /// Left alone: the run no longer qualifies (its status changed since the dry run, it is
    /// gone, or the action refused it), and why.
    Skipped(ClientError),
    /// The action could not be applied (the store failed); the run may be tried again. See
    /// [`is_fatal`](BulkOutcome::is_fatal) for a failure that is not the run's own.
    Failed(ClientError),
}

impl BulkOutcome {
    /// What applying the action to a run came to: the store's refusals that are about the run
    /// (it is gone, it moved, its status forbids the move) and the action's own refusals skip
    /// it; any other store error fails it.
    fn of(result: Result<RunRecord, ClientError>) -> BulkOutcome {
        match result {
            Ok(record) => BulkOutcome::Done(Box::new(record)),
            Err(ClientError::Store(error)) if !is_about_the_run(&error) => {
                BulkOutcome::Failed(ClientError::Store(error))
            }
            Err(error) => BulkOutcome::Skipped(error),
        }
    }

    /// `true` for a failure that is not the run's own and would fail every other run the
    /// same way: the store refused the write (a role without the right to write, a schema
    /// this release cannot use, a backend error), rather than being briefly unreachable
    /// ([`StoreError::is_transient`]) or finding one run's record unreadable.
    /// [`Client::bulk_each`] stops at the first.
    pub fn is_fatal(&self) -> bool {
        match self {
            BulkOutcome::Failed(ClientError::Store(error)) => {
                !error.is_transient()
                    && !matches!(
                        error,
                        StoreError::Corrupt { .. } | StoreError::Incompatible { .. }
                    )
            }
            _ => false,
        }
    }
}

/// Whether a store error refuses the action because of the run itself (it is gone, another
/// writer moved it, its status forbids the move, a pause is pending on it): the run no longer
/// qualifies.
fn is_about_the_run(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::NotFound { .. }
            | StoreError::RevisionConflict { .. }
            | StoreError::InvalidTransition { .. }
            | StoreError::PauseRequested { .. }
    )
}

/// How many runs a bulk action works on at once.
const CHUNK: usize = 25;

impl Client {
    /// The runs that `action` applies to among those `filter` passes, newest first, at most
    /// `max`: the dry run of a bulk action. The filter's statuses are narrowed to the
    /// action's (all of them when the filter names none).
    pub async fn bulk_plan(
        &self,
        action: BulkAction,
        mut filter: RunFilter,
        max: usize,
    ) -> Result<Vec<RunId>, ClientError> {
        let applies = action.applies_to();
        filter.statuses = if filter.statuses.is_empty() {
            applies
        } else {
            filter
                .statuses
                .into_iter()
                .filter(|status| applies.contains(status))
                .collect()
        };
        let mut ids = Vec::new();
        if filter.statuses.is_empty() {
            return Ok(ids);
        }
        let mut after = None;
        while ids.len() < max {
            let limit = u32::try_from((max - ids.len()).min(500)).unwrap_or(500);
            let page = self.list_runs(filter.clone(), after, limit).await?;
            ids.extend(page.runs.iter().map(|run| run.id));
            after = page.next;
            if after.is_none() {
                break;
            }
        }
        Ok(ids)
    }

    /// Checks each run of `ids` as `action` would, 25 runs at a time, changing nothing: the runs
    /// it would act on, and those it would skip, with why (see [`BulkCheck`]). What is checked
    /// may change before the action runs; the action checks again, run by run. A failure that is
    /// not a run's own (the store unreachable) is returned.
    ///
    /// ```no_run
    /// # async fn plan(client: aiki::Client, filter: aiki::store::RunFilter) -> Result<(), aiki::ClientError> {
    /// use aiki::{BulkAction, RetryOptions};
    ///
    /// let retry = BulkAction::Retry(RetryOptions::default());
    /// let candidates = client.bulk_plan(retry, filter, 1000).await?;
    /// let checked = client.bulk_check(retry, &candidates).await?;
    /// for (id, why) in &checked.skips {
    ///     println!("{id} would be skipped: {why}");
    /// }
    /// client.bulk(retry, &checked.acts).await;
    /// # Ok(()) }
    /// ```
    pub async fn bulk_check(
        &self,
        action: BulkAction,
        ids: &[RunId],
    ) -> Result<BulkCheck, ClientError> {
        let mut checked = BulkCheck::default();
        for chunk in ids.chunks(CHUNK) {
            let results = join_all(
                chunk
                    .iter()
                    .map(|id| async move { (*id, action.check(&self.any_run(*id)).await) }),
            )
            .await;
            for (id, result) in results {
                match result {
                    Ok(()) => checked.acts.push(id),
                    Err(ClientError::Store(error)) if !is_about_the_run(&error) => {
                        return Err(ClientError::Store(error));
                    }
                    Err(refused) => checked.skips.push((id, refused)),
                }
            }
        }
        Ok(checked)
    }

    /// Applies `action` to each run of `ids` (a dry run's list), 25 runs at a time, and
    /// returns one outcome per run, in the order given. A run that no longer qualifies is
    /// skipped and reported; nothing else is touched. Every run is tried, whatever the others
    /// came to: [`bulk_each`](Client::bulk_each) reports each outcome as it comes and stops
    /// when told to, or at a failure that would fail every run.
    pub async fn bulk(&self, action: BulkAction, ids: &[RunId]) -> Vec<(RunId, BulkOutcome)> {
        let mut outcomes = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let results = join_all(chunk.iter().map(|id| self.bulk_one(action, *id))).await;
            outcomes.extend(results);
        }
        outcomes
    }

    /// Applies `action` to each run of `ids` (a dry run's list) and hands every outcome to
    /// `each` as soon as it is known (in the order the runs finish), so that a caller can
    /// print it at once: what was done is never lost to an interruption.
    ///
    /// It starts with one run, then keeps up to 25 in flight, starting one at most every
    /// `pace` if given (a rate limit on the workers the action wakes). It stops starting runs
    /// when `stop` completes (a Ctrl-C), when `each` returns [`ControlFlow::Break`], or after
    /// a [fatal](BulkOutcome::is_fatal) outcome (the store refused a write for a reason that is
    /// not the run's: every other run would fail the same way); the runs in flight then finish
    /// and are reported. Returns the runs never attempted, in the order given (empty when it
    /// went through the whole list).
    ///
    /// ```no_run
    /// # async fn cancel_all(client: aiki::Client, ids: Vec<aiki::RunId>) {
    /// use std::ops::ControlFlow;
    ///
    /// let interrupted = async {
    ///     let _ = tokio::signal::ctrl_c().await;
    /// };
    /// let left = client
    ///     .bulk_each(aiki::BulkAction::Cancel, &ids, None, interrupted, |id, outcome| {
    ///         println!("{id}: {outcome:?}");
    ///         ControlFlow::Continue(())
    ///     })
    ///     .await;
    /// println!("{} not attempted", left.len());
    /// # }
    /// ```
    pub async fn bulk_each(
        &self,
        action: BulkAction,
        ids: &[RunId],
        pace: Option<Duration>,
        stop: impl Future<Output = ()>,
        mut each: impl FnMut(RunId, BulkOutcome) -> ControlFlow<()>,
    ) -> Vec<RunId> {
        let mut stop = pin!(stop);
        let mut stopping = false;
        let mut next = 0;
        let mut in_flight = FuturesUnordered::new();
        // One run alone first: a store that refuses every write says so once.
        let mut limit = 1;
        let mut next_start = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            while !stopping && next < ids.len() && in_flight.len() < limit && next_start <= now {
                in_flight.push(self.bulk_one(action, ids[next]));
                next += 1;
                if let Some(pace) = pace {
                    next_start = next_start.max(now) + pace;
                }
            }
            if in_flight.is_empty() && (stopping || next >= ids.len()) {
                break;
            }
            let may_start = !stopping && next < ids.len() && in_flight.len() < limit;
            tokio::select! {
                biased;
                () = &mut stop, if !stopping => stopping = true,
                Some((id, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                    limit = CHUNK;
                    let fatal = outcome.is_fatal();
                    if each(id, outcome).is_break() || fatal {
                        stopping = true;
                    }
                }
                () = tokio::time::sleep_until(next_start), if may_start => {}
            }
        }
        ids[next..].to_vec()
    }

    async fn bulk_one(&self, action: BulkAction, id: RunId) -> (RunId, BulkOutcome) {
        let run = self.any_run(id);
        (id, BulkOutcome::of(action.apply(&run).await))
    }
}
