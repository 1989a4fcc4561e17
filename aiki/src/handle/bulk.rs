//! Bulk actions over a filter: a dry run lists the runs an action applies to; execution takes
//! that list (or the filter with a maximum), acts on each run in chunks, and reports one
//! outcome per run, skipping those that no longer qualify.

use aiki_store::{RunFilter, RunId, RunRecord, RunStatus};
use futures_util::future::join_all;

use super::any::{Action, AnyRun};
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
    /// The statuses the action applies to.
    pub fn applies_to(self) -> Vec<RunStatus> {
        match self {
            BulkAction::Cancel => Action::Cancel.from(),
            BulkAction::Retry(_) => vec![RunStatus::Failed],
            BulkAction::Requeue => Action::Requeue.from(),
            BulkAction::Resume => Action::Resume.from(),
        }
    }

    async fn apply(self, run: &AnyRun) -> Result<RunRecord, ClientError> {
        match self {
            BulkAction::Cancel => {
                // Cancelling an ended run changes nothing: in a bulk action it no longer
                // qualifies, and is reported so.
                let record = run.record().await?;
                if record.status.is_terminal() {
                    return Err(ClientError::InvalidAction {
                        run_id: record.id,
                        action: "cancel",
                        status: record.status,
                        expected: self.applies_to(),
                    });
                }
                run.cancel().await
            }
            BulkAction::Retry(options) => run.retry(options).await,
            BulkAction::Requeue => run.requeue().await,
            BulkAction::Resume => run.resume().await,
        }
    }
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
    /// The action could not be applied (the store failed); the run may be tried again.
    Failed(ClientError),
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

    /// Applies `action` to each run of `ids` (a dry run's list), 25 runs at a time, and
    /// returns one outcome per run, in the order given. A run that no longer qualifies is
    /// skipped and reported; nothing else is touched.
    pub async fn bulk(&self, action: BulkAction, ids: &[RunId]) -> Vec<(RunId, BulkOutcome)> {
        let mut outcomes = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(CHUNK) {
            let results = join_all(chunk.iter().map(|id| async move {
                let run = self.any_run(*id);
                let outcome = match action.apply(&run).await {
                    Ok(record) => BulkOutcome::Done(Box::new(record)),
                    Err(error @ ClientError::Store(_)) if !is_not_found(&error) => {
                        BulkOutcome::Failed(error)
                    }
                    Err(error) => BulkOutcome::Skipped(error),
                };
                (*id, outcome)
            }))
            .await;
            outcomes.extend(results);
        }
        outcomes
    }
}

fn is_not_found(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::Store(aiki_store::StoreError::NotFound { .. })
    )
}
