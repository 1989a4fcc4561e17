//! The pre-deploy impact report: which in-flight runs a new build would break.
//!
//! [`check`] replays every run that is not over (and, if asked, recently failed runs that a
//! retry would revive) against the workflow versions a [`Registry`] registers, the build about to be
//! deployed, **without writing anything**: no task handler runs, nothing is recorded, no run
//! moves. Each run's history is read in one statement (one snapshot) and replayed exactly as
//! its next execution would replay it, by the same manifest and the same non-determinism rule;
//! where the execution would start work, the check notes it and stops. It also looks past the
//! waits a run is suspended on, assuming each satisfied (the sleep ends; the event arrives,
//! or a wait with a timeout times out, when no payload can be made; a child completes with the
//! smallest output its type allows; not past a retry delay or an attempt in progress, whose
//! output is not known yet, and at most 100 waits deep), so that a task appended after the
//! wait, or a divergence behind it, shows before the deploy; every finding made past such an assumption says which
//! ([`RunImpact::waits`], the `after` of a verdict).
//!
//! Each run gets a [`Verdict`]: [`Safe`](Verdict::Safe), [`NewWork`](Verdict::NewWork),
//! [`Diverges`](Verdict::Diverges), [`Mismatch`](Verdict::Mismatch),
//! [`Stranded`](Verdict::Stranded), [`Broken`](Verdict::Broken) or [`Ends`](Verdict::Ends);
//! the first four name what they found. Changed sleeps are listed beside the verdict. Runs of
//! workflows the build does not register at all (another service's) are listed apart, in
//! [`Report::other_services`].
//!
//! Workflow code outside tasks runs during the check, as at every replay; a `#[task]`
//! function it calls directly, instead of through the task, is caught before its body runs
//! ([`Verdict::Broken`], kind `direct_task_call`). Anything else workflow code does by itself
//! (printing, a network call) it does in the check too: keep side effects in tasks.
//!
//! ```no_run
//! # async fn demo(store: aiki::BoxStore) -> Result<(), aiki::ClientError> {
//! let registry = aiki::Registry::builder().build()?; // .register(..) the new build's workflows
//! let client = aiki::Client::new(store);
//! let options = aiki::impact::CheckOptions::default();
//! let report = aiki::impact::check(&registry, &client, &options).await?;
//! for run in report.failing(&aiki::impact::Gate::default()) {
//!     println!("{} {}: {}", run.run_id, run.namespace, run.verdict);
//! }
//! # Ok(()) }
//! ```

mod fork;
mod replay;
mod report;

use std::collections::HashSet;

use aiki_store::{ListRuns, Millis, RunFilter, RunId, RunRecord, RunStatus};

use crate::client::Client;
use crate::error::ClientError;
use crate::registry::Registry;

pub use fork::fork_onto;
pub use report::{
    Gate, NewWork, OtherRun, Report, RunImpact, SleepChange, Verdict, VersionSummary,
};

/// What [`check`] covers.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CheckOptions {
    /// Only these runs (workflow, version, pool, ...); its statuses are ignored: the check
    /// takes every status that is not over.
    pub filter: RunFilter,
    /// Also failed runs that changed status at or after this time: what a `retry` of them
    /// would do (the call that failed them runs again).
    pub failed_since: Option<Millis>,
    /// Runs replayed at once (default 16).
    pub concurrency: usize,
    /// Runs checked at most; `None`: all (default).
    pub max_runs: Option<usize>,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            filter: RunFilter::default(),
            failed_since: None,
            concurrency: 16,
            max_runs: None,
        }
    }
}

impl CheckOptions {
    /// Only runs that `filter` selects.
    pub fn filter(mut self, filter: RunFilter) -> Self {
        self.filter = filter;
        self
    }

    /// Also failed runs that failed at or after `since`.
    pub fn failed_since(mut self, since: Millis) -> Self {
        self.failed_since = Some(since);
        self
    }

    /// Runs replayed at once (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// At most this many runs.
    pub fn max_runs(mut self, n: usize) -> Self {
        self.max_runs = Some(n);
        self
    }
}

/// Checks the runs `options` select, read through `client` (its store and its clock), against
/// the workflow versions `registry` registers, writing nothing; see the [module docs](self).
///
/// Errors are the store's: the check could not run. What the check found is in the report.
pub async fn check(
    registry: &Registry,
    client: &Client,
    options: &CheckOptions,
) -> Result<Report, ClientError> {
    let registered: HashSet<&str> = registry
        .namespaces()
        .map(|namespace| namespace.workflow.as_str())
        .collect();
    let now = client.clock.now();
    let runs = select(client, options).await?;
    let (ours, theirs): (Vec<RunRecord>, Vec<RunRecord>) = runs
        .into_iter()
        .partition(|run| registered.contains(run.namespace.workflow.as_str()));
    // Each probe on a tokio task of its own (replay is CPU work: every core takes part), at
    // most `concurrency` at once; the report keeps the listing's order.
    let mut checked: Vec<Option<RunImpact>> = (0..ours.len()).map(|_| None).collect();
    let mut queue = ours.into_iter().enumerate();
    let mut probes = tokio::task::JoinSet::new();
    loop {
        while probes.len() < options.concurrency.max(1) {
            let Some((at, run)) = queue.next() else {
                break;
            };
            let (registry, client) = (registry.clone(), client.clone());
            probes.spawn(async move {
                let impact = replay::check_run(&registry, &client, &run, now).await;
                (at, impact)
            });
        }
        let Some(joined) = probes.join_next().await else {
            break;
        };
        let (at, impact) = joined.map_err(|error| {
            ClientError::Config(format!(
                "BUG: an impact probe ended without a verdict: {error}"
            ))
        })?;
        checked[at] = impact?;
    }
    Ok(Report::new(
        now,
        checked.into_iter().flatten().collect(),
        theirs,
    ))
}

/// The runs to check: every status that is not over, then failed ones if asked, newest first,
/// one page at a time.
async fn select(client: &Client, options: &CheckOptions) -> Result<Vec<RunRecord>, ClientError> {
    let store = &client.store;
    let mut live = options.filter.clone();
    live.statuses = RunStatus::ALL
        .into_iter()
        .filter(|status| !status.is_terminal())
        .collect();
    let mut passes = vec![live];
    if let Some(since) = options.failed_since {
        let mut failed = options.filter.clone();
        failed.statuses = vec![RunStatus::Failed];
        failed.updated.from = Some(since);
        passes.push(failed);
    }
    let max = options.max_runs.unwrap_or(usize::MAX);
    let mut seen: HashSet<RunId> = HashSet::new();
    let mut runs = Vec::new();
    for filter in passes {
        let mut cursor = None;
        loop {
            let page = store
                .list_runs(ListRuns::new(filter.clone(), 500).after(cursor))
                .await?;
            for run in page.runs {
                if runs.len() >= max {
                    return Ok(runs);
                }
                if seen.insert(run.id) {
                    runs.push(run);
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
    }
    Ok(runs)
}
