//! An execution budget: the time a push endpoint's platform gives one request. Below a margin
//! of it the run drains (no new task starts, those in flight record their results) and is
//! handed back to delivery; at the budget's end an execution still going (awaiting something
//! that is neither a task nor a durable wait) is dropped and the run handed back all the same.
//! Handed back without recording anything too many times in a row, it fails instead of
//! looping: each hand-back leaves a typed error kind on the run ([`IDLE_KIND`] when idle),
//! which its timeline keeps.

use aiki_store::{Failure, Millis, RunId, RunStatus, Transition};
use tokio::time::Instant;

use super::Parts;
use super::run::finish;
use crate::run::Run;

/// The error kind a hand-back that recorded no task result leaves on the run, which the
/// timeline keeps with the change (a typed fact: the count of such hand-backs in a row reads
/// it, whoever the change's actor is, e.g. the API key an aiki server stamps).
pub(crate) const IDLE_KIND: &str = "execution_budget_idle";

/// The error kind a hand-back that recorded task results leaves on the run (it replaces an
/// earlier idle hand-back's, ending the count).
const PROGRESS_KIND: &str = "execution_budget";

/// One execution's budget.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// When the run drains: no task starts from then on.
    pub(crate) drain_at: Instant,
    /// When the budget is spent (the platform ends the request).
    pub(crate) ends_at: Instant,
    /// How many hand-backs in a row that recorded no task result fail the run.
    pub(crate) max_idle: u32,
}

impl Budget {
    /// Whether the execution outlasted the budget (a task longer than the budget ran).
    pub(super) fn overran(&self) -> bool {
        Instant::now() >= self.ends_at
    }
}

/// Hands a run drained by its budget back to delivery (`queued`, with an error of kind
/// [`IDLE_KIND`] when it recorded no task result, `execution_budget` otherwise), or fails it (`execution_budget`) when this is the `max_idle`-th
/// hand-back in a row that recorded no task result. Returns `handed_back` or where it left the
/// run.
pub(super) async fn hand_back(
    executor: &Parts,
    run: &Run,
    budget: &Budget,
    now: Millis,
) -> &'static str {
    let recorded = run.recorded();
    if recorded == 0 {
        let before = idle_hand_backs(executor, run.id()).await;
        if before.saturating_add(1) >= budget.max_idle {
            tracing::error!(
                run_id = %run.id(),
                deliveries = before + 1,
                "no task result recorded within the execution budget, again; failing the run"
            );
            let failure = Failure::new(
                "execution_budget",
                format!(
                    "{} deliveries in a row recorded no task result within the endpoint's \
                     execution budget: a task takes longer than the budget (or the workflow \
                     spends it before its first task). Raise the endpoint's budget \
                     (`aiki endpoints set --budget`) or run this version on workers, then retry \
                     the run",
                    before + 1
                ),
            );
            return finish(run, Transition::to(RunStatus::Failed, now).error(failure)).await;
        }
    }
    let handed_back = if recorded == 0 {
        Failure::new(
            IDLE_KIND,
            "the execution budget was spent before any task result was recorded; handed back \
             to be delivered again",
        )
    } else {
        Failure::new(
            PROGRESS_KIND,
            format!(
                "the execution budget was spent after {recorded} task results were recorded; \
                 handed back to go on in the next delivery"
            ),
        )
    };
    let transition = Transition::to(RunStatus::Queued, now)
        .by(Some(executor.id.clone()))
        .error(handed_back);
    match finish(run, transition).await {
        "queued" => "handed_back",
        moved => moved,
    }
}

/// How many times in a row, counting back from the last, the run was handed back without a
/// task result recorded.
async fn idle_hand_backs(executor: &Parts, id: RunId) -> u32 {
    let timeline = match executor.store.timeline(id).await {
        Ok(timeline) => timeline,
        Err(error) => {
            tracing::warn!(run_id = %id, %error, "could not read the timeline; counting no hand-backs");
            return 0;
        }
    };
    let mut count = 0;
    for change in timeline.iter().rev() {
        if change.to == RunStatus::Running {
            continue;
        }
        let idle = change.from == Some(RunStatus::Running)
            && change.to == RunStatus::Queued
            && change.error_kind.as_deref() == Some(IDLE_KIND);
        if !idle {
            break;
        }
        count += 1;
    }
    count
}
