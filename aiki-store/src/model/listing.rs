//! Listing runs: which ones ([`RunFilter`]), how many per page and from where
//! ([`ListRuns`], [`RunCursor`]), and what comes back ([`RunPage`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Millis, RunId, RunRecord};
use crate::RunStatus;

/// The most runs one page holds.
pub const MAX_PAGE: u32 = 1000;

/// A time range: `from` inclusive, `until` exclusive; either end open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// The earliest time included.
    pub from: Option<Millis>,
    /// The first time no longer included.
    pub until: Option<Millis>,
}

impl TimeRange {
    /// Whether `at` lies in the range.
    pub fn contains(&self, at: Millis) -> bool {
        self.from.is_none_or(|from| at >= from) && self.until.is_none_or(|until| at < until)
    }
}

/// Which runs to list. A field left empty does not filter; the filters that are set all
/// apply.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunFilter {
    /// The workflow's name.
    pub workflow: Option<String>,
    /// The workflow's version (usually with `workflow`).
    pub version: Option<String>,
    /// Any of these statuses (empty: any status).
    pub statuses: Vec<RunStatus>,
    /// The caller's idempotency key.
    pub reference_id: Option<String>,
    /// Child runs of this run.
    pub parent: Option<RunId>,
    /// The worker pool.
    pub pool: Option<String>,
    /// The kind of the recorded error (`task_failed`, `non_determinism`, ...).
    pub error_kind: Option<String>,
    /// The name of the task whose call failed the run (the task of the failed call its error
    /// names).
    #[serde(default)]
    pub failed_task: Option<String>,
    /// Text the recorded error's message contains (case-sensitive).
    #[serde(default)]
    pub error_contains: Option<String>,
    /// Runs started by this schedule (fired, triggered or backfilled), as its log records
    /// them: the one filter [`matches`](RunFilter::matches) cannot check on a run alone.
    #[serde(default)]
    pub schedule: Option<String>,
    /// When the run was created.
    pub created: TimeRange,
    /// When the run last changed status.
    pub updated: TimeRange,
}

impl RunFilter {
    /// Runs of a workflow (any version unless [`version`](RunFilter::version) is set).
    pub fn workflow(mut self, workflow: impl Into<String>) -> Self {
        self.workflow = Some(workflow.into());
        self
    }

    /// Runs of a version.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// Runs in `status` (added to the statuses already asked for).
    pub fn status(mut self, status: RunStatus) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    /// Runs with this reference id.
    pub fn reference_id(mut self, reference_id: impl Into<String>) -> Self {
        self.reference_id = Some(reference_id.into());
        self
    }

    /// Children of `parent`.
    pub fn parent(mut self, parent: RunId) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Runs of a pool.
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = Some(pool.into());
        self
    }

    /// Runs whose recorded error is of this kind.
    pub fn error_kind(mut self, kind: impl Into<String>) -> Self {
        self.error_kind = Some(kind.into());
        self
    }

    /// Runs failed by a call of task `task`.
    pub fn failed_task(mut self, task: impl Into<String>) -> Self {
        self.failed_task = Some(task.into());
        self
    }

    /// Runs whose recorded error's message contains `text`.
    pub fn error_contains(mut self, text: impl Into<String>) -> Self {
        self.error_contains = Some(text.into());
        self
    }

    /// Runs started by the schedule `name`.
    pub fn schedule(mut self, name: impl Into<String>) -> Self {
        self.schedule = Some(name.into());
        self
    }

    /// Runs created in a range.
    pub fn created(mut self, range: TimeRange) -> Self {
        self.created = range;
        self
    }

    /// Runs last changed in a range.
    pub fn updated(mut self, range: TimeRange) -> Self {
        self.updated = range;
        self
    }

    /// Whether `run` passes the filter (what every store's query must agree with), all but
    /// [`schedule`](RunFilter::schedule), which needs the schedule's log.
    pub fn matches(&self, run: &RunRecord) -> bool {
        let is = |wanted: &Option<String>, actual: Option<&str>| {
            wanted
                .as_deref()
                .is_none_or(|wanted| actual == Some(wanted))
        };
        is(&self.workflow, Some(&run.namespace.workflow))
            && is(&self.version, Some(&run.namespace.version))
            && (self.statuses.is_empty() || self.statuses.contains(&run.status))
            && is(&self.reference_id, run.reference_id.as_deref())
            && self
                .parent
                .is_none_or(|parent| run.parent.as_ref().is_some_and(|p| p.run_id == parent))
            && is(&self.pool, Some(&run.pool))
            && is(
                &self.error_kind,
                run.error.as_ref().map(|error| error.kind.as_str()),
            )
            && self.failed_task.as_deref().is_none_or(|task| {
                run.error
                    .as_ref()
                    .filter(|error| error.kind != "child_failed")
                    .and_then(|error| error.call.as_ref())
                    .and_then(|call| call.address.strip_prefix(task))
                    .is_some_and(|rest| rest.starts_with(':'))
            })
            && self.error_contains.as_deref().is_none_or(|text| {
                run.error
                    .as_ref()
                    .is_some_and(|error| error.message.contains(text))
            })
            && self.created.contains(run.created_at)
            && self.updated.contains(run.updated_at)
    }
}

/// Where a page ended: the next page starts after this run. Runs are listed newest first, by
/// creation time and then id (both descending), so a run whose filtered fields do not change
/// is listed exactly once however many pages it takes. Written as `CREATED_AT.RUN_ID`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RunCursor {
    /// The last listed run's creation time.
    pub created_at: Millis,
    /// The last listed run's id.
    pub id: RunId,
}

impl RunCursor {
    /// The cursor after `run`.
    pub fn after(run: &RunRecord) -> Self {
        RunCursor {
            created_at: run.created_at,
            id: run.id,
        }
    }
}

impl fmt::Display for RunCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.created_at, self.id)
    }
}

/// A cursor that is not `CREATED_AT.RUN_ID`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a page cursor (one comes back with each page: `CREATED_AT.RUN_ID`)")]
pub struct InvalidCursor(pub String);

impl FromStr for RunCursor {
    type Err = InvalidCursor;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidCursor(text.to_owned());
        let (created_at, id) = text.split_once('.').ok_or_else(invalid)?;
        Ok(RunCursor {
            created_at: created_at.parse().map_err(|_| invalid())?,
            id: id.parse().map_err(|_| invalid())?,
        })
    }
}

/// A request for one page of runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ListRuns {
    /// Which runs.
    pub filter: RunFilter,
    /// At most this many (capped at [`MAX_PAGE`]).
    pub limit: u32,
    /// Start after this run (the previous page's [`RunPage::next`]).
    pub after: Option<RunCursor>,
}

impl ListRuns {
    /// The first page of up to `limit` runs passing `filter`.
    pub fn new(filter: RunFilter, limit: u32) -> Self {
        ListRuns {
            filter,
            limit: limit.min(MAX_PAGE),
            after: None,
        }
    }

    /// The page after `cursor`.
    pub fn after(mut self, cursor: Option<RunCursor>) -> Self {
        self.after = cursor;
        self
    }
}

/// One page of runs, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<RunRecord>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<RunCursor>,
}

impl RunPage {
    /// A page of `runs` read with one more than `limit` asked for: the extra one only says a
    /// next page exists.
    pub fn of(mut runs: Vec<RunRecord>, limit: u32) -> Self {
        let more = runs.len() > limit as usize;
        runs.truncate(limit as usize);
        let next = if more {
            runs.last().map(RunCursor::after)
        } else {
            None
        };
        RunPage { runs, next }
    }
}
