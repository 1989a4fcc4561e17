//! The reads of the API and their query strings: a `GET` names what it reads in its query
//! (a listing flattened into [`ListRunsQuery`]); the previous release's `POST` forms are
//! answered for one release ([`READ_POSTS`]).

use serde::{Deserialize, Serialize};

use crate::{Millis, StoreError};

/// The reads a previous release sent as `POST` with a body, and this one as `GET` with a
/// query: a server answers both forms, for one release, so that the previous release's clients
/// keep working through a rolling deploy; it never keeps their answers for repeats (only
/// writes' answers are kept).
pub const READ_POSTS: [&str; 4] = [
    super::path::RUNS_LIST,
    super::path::CHANGES,
    super::path::SCHEDULE,
    super::path::SCHEDULE_LOG,
];

/// The query string of a `GET` of [`path::RUNS_LIST`](super::path::RUNS_LIST): a
/// [`ListRuns`](crate::ListRuns) flattened (statuses comma-separated, each time range as two
/// bounds).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRunsQuery {
    /// [`RunFilter::workflow`](crate::RunFilter::workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// [`RunFilter::version`](crate::RunFilter::version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// [`RunFilter::statuses`](crate::RunFilter::statuses), comma-separated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// [`RunFilter::reference_id`](crate::RunFilter::reference_id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_id: Option<String>,
    /// [`RunFilter::parent`](crate::RunFilter::parent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<crate::RunId>,
    /// [`RunFilter::pool`](crate::RunFilter::pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// [`RunFilter::error_kind`](crate::RunFilter::error_kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// [`RunFilter::failed_task`](crate::RunFilter::failed_task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_task: Option<String>,
    /// [`RunFilter::error_contains`](crate::RunFilter::error_contains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_contains: Option<String>,
    /// [`RunFilter::schedule`](crate::RunFilter::schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// [`RunFilter::created`](crate::RunFilter::created)'s first time included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_from: Option<Millis>,
    /// [`RunFilter::created`](crate::RunFilter::created)'s first time no longer included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_until: Option<Millis>,
    /// [`RunFilter::updated`](crate::RunFilter::updated)'s first time included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_from: Option<Millis>,
    /// [`RunFilter::updated`](crate::RunFilter::updated)'s first time no longer included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_until: Option<Millis>,
    /// [`ListRuns::limit`](crate::ListRuns::limit).
    pub limit: u32,
    /// [`ListRuns::after`](crate::ListRuns::after), as `CREATED_AT.RUN_ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

impl From<&crate::ListRuns> for ListRunsQuery {
    fn from(request: &crate::ListRuns) -> Self {
        let filter = &request.filter;
        let statuses: Vec<&str> = filter
            .statuses
            .iter()
            .map(|status| status.as_str())
            .collect();
        ListRunsQuery {
            workflow: filter.workflow.clone(),
            version: filter.version.clone(),
            status: (!statuses.is_empty()).then(|| statuses.join(",")),
            reference_id: filter.reference_id.clone(),
            parent: filter.parent,
            pool: filter.pool.clone(),
            error_kind: filter.error_kind.clone(),
            failed_task: filter.failed_task.clone(),
            error_contains: filter.error_contains.clone(),
            schedule: filter.schedule.clone(),
            created_from: filter.created.from,
            created_until: filter.created.until,
            updated_from: filter.updated.from,
            updated_until: filter.updated.until,
            limit: request.limit,
            after: request.after.map(|cursor| cursor.to_string()),
        }
    }
}

impl TryFrom<ListRunsQuery> for crate::ListRuns {
    type Error = StoreError;

    /// The request; [`StoreError::Invalid`] naming the field for an unknown status or a
    /// malformed cursor.
    fn try_from(query: ListRunsQuery) -> Result<Self, StoreError> {
        let invalid = |message: String| StoreError::Invalid { message };
        let mut filter = crate::RunFilter {
            workflow: query.workflow,
            version: query.version,
            reference_id: query.reference_id,
            parent: query.parent,
            pool: query.pool,
            error_kind: query.error_kind,
            failed_task: query.failed_task,
            error_contains: query.error_contains,
            schedule: query.schedule,
            created: crate::TimeRange {
                from: query.created_from,
                until: query.created_until,
            },
            updated: crate::TimeRange {
                from: query.updated_from,
                until: query.updated_until,
            },
            ..crate::RunFilter::default()
        };
        for status in query.status.iter().flat_map(|text| text.split(',')) {
            let status = status.trim().parse::<crate::RunStatus>().map_err(|error| {
                invalid(format!("`status`: {error} (statuses are comma-separated)"))
            })?;
            filter = filter.status(status);
        }
        let after = query
            .after
            .map(|text| text.parse::<crate::RunCursor>())
            .transpose()
            .map_err(|error| invalid(format!("`after`: {error}")))?;
        Ok(crate::ListRuns::new(filter, query.limit).after(after))
    }
}
