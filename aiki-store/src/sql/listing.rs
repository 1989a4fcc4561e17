//! The listing query: only the filters a request sets become conditions (a catch-all
//! `($1 IS NULL OR …)` would keep PostgreSQL's generic plans off the indexes), newest first by
//! `(created_at, id)`, the cursor a row comparison on the same pair.

use crate::{ListRuns, MAX_PAGE, RunPage, StoreError};

use super::SqlStore;
use super::decode;
use super::dialect::{Dialect, On, Param};
use super::statements::{Level, run_doc};

/// A statement under construction and its parameters.
struct Query<'a> {
    sql: String,
    params: Vec<Param<'a>>,
}

impl<'a> Query<'a> {
    /// The placeholder of a new parameter.
    fn bind(&mut self, param: impl Into<Param<'a>>) -> String {
        self.params.push(param.into());
        format!("${}", self.params.len())
    }

    fn and(&mut self, condition: String) {
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition);
    }
}

/// The statement (in PostgreSQL's syntax) and parameters of one page: `limit + 1` rows, the
/// extra one saying whether a next page exists.
fn page_query(request: &ListRuns, level: Level) -> Query<'_> {
    let filter = &request.filter;
    let mut q = Query {
        sql: format!(
            "SELECT {}::text FROM aiki_runs WHERE TRUE",
            run_doc("", level)
        ),
        params: Vec::new(),
    };
    if let Some(workflow) = &filter.workflow {
        let p = q.bind(workflow);
        q.and(format!("workflow = {p}"));
    }
    if let Some(version) = &filter.version {
        let p = q.bind(version);
        q.and(format!("version = {p}"));
    }
    if !filter.statuses.is_empty() {
        let list: Vec<String> = filter
            .statuses
            .iter()
            .map(|status| q.bind(status.as_str()))
            .collect();
        q.and(format!("status IN ({})", list.join(", ")));
    }
    if let Some(reference_id) = &filter.reference_id {
        let p = q.bind(reference_id);
        q.and(format!("reference_id = {p}"));
    }
    if let Some(parent) = filter.parent {
        let p = q.bind(parent);
        q.and(format!("parent_run_id = {p}::uuid"));
    }
    if let Some(pool) = &filter.pool {
        let p = q.bind(pool);
        q.and(format!("pool = {p}"));
    }
    if let Some(kind) = &filter.error_kind {
        let p = q.bind(kind);
        q.and(format!("error_kind = {p}"));
    }
    if let Some(task) = &filter.failed_task {
        // The failed call's address is `TASK:INPUT-HASH` (a failed child's, its start's).
        let p = q.bind(format!("{task}:"));
        q.and(format!(
            "substr(error_address, 1, length({p})) = {p} AND error_kind <> 'child_failed'"
        ));
    }
    if let Some(text) = &filter.error_contains {
        let p = q.bind(text);
        q.and(format!("strpos(error_message, {p}) > 0"));
    }
    if let Some(schedule) = &filter.schedule {
        if level.schedules {
            let p = q.bind(schedule);
            q.and(format!(
                "id IN (SELECT run_id FROM aiki_schedule_log WHERE schedule = {p} \
                 AND run_id IS NOT NULL)"
            ));
        } else {
            // A schema without schedules: no run was started by one.
            q.and("FALSE".to_owned());
        }
    }
    for (column, range) in [
        ("created_at", filter.created),
        ("updated_at", filter.updated),
    ] {
        if let Some(from) = range.from {
            let p = q.bind(from);
            q.and(format!("{column} >= {p}"));
        }
        if let Some(until) = range.until {
            let p = q.bind(until);
            q.and(format!("{column} < {p}"));
        }
    }
    if let Some(cursor) = request.after {
        // A row comparison: both databases turn it into an index range on the same pair.
        let at = q.bind(cursor.created_at);
        let id = q.bind(cursor.id);
        q.and(format!("(created_at, id) < ({at}, {id}::uuid)"));
    }
    let limit = q.bind(i64::from(request.limit.min(MAX_PAGE)) + 1);
    q.sql
        .push_str(&format!(" ORDER BY created_at DESC, id DESC LIMIT {limit}"));
    q
}

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError> {
        let limit = request.limit.min(MAX_PAGE);
        if limit == 0 {
            return Ok(RunPage::of(Vec::new(), 0));
        }
        let query = page_query(&request, self.level);
        let sql = (D::DRIVER.render)(&query.sql);
        let rows = self.fetch(On::Read, &sql, &query.params).await?;
        let runs = rows
            .into_iter()
            .map(|mut row| decode::run_from_json(&row.take_text(0)?.unwrap_or_default()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RunPage::of(runs, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunCursor, RunFilter, RunId, RunStatus};

    #[test]
    fn only_the_filters_set_become_conditions() {
        let request = ListRuns::new(RunFilter::default(), 50);
        let plain = page_query(&request, Level::CURRENT);
        assert!(
            plain
                .sql
                .ends_with("WHERE TRUE ORDER BY created_at DESC, id DESC LIMIT $1"),
            "{}",
            plain.sql
        );
        let cursor = RunCursor {
            created_at: 7,
            id: RunId::new(),
        };
        let filter = RunFilter::default()
            .workflow("w")
            .version("1")
            .status(RunStatus::Queued)
            .status(RunStatus::Failed);
        let request = ListRuns::new(filter, 50).after(Some(cursor));
        let query = page_query(&request, Level::CURRENT);
        assert!(
            query.sql.contains(
                "WHERE TRUE AND workflow = $1 AND version = $2 AND status IN ($3, $4) AND \
                 (created_at, id) < ($5, $6::uuid) ORDER BY created_at DESC, id DESC LIMIT $7"
            ),
            "{}",
            query.sql
        );
        assert_eq!(query.params.len(), 7);
    }
}
