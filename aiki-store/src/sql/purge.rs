//! Retention of ended runs on both SQL databases (see [`crate::Sweeper::purge_runs`]): one
//! transaction deletes a batch of runs, checked again as it deletes each, and then their rows
//! in every table that records something for a run.

use super::statements::{Level, fence, status_list};
use super::{Dialect, On, Param, Row, SqlStore, decode, params};
use crate::{Lease, Millis, PurgeRuns, RunId, RunStatus, StoreError};

/// The tables that record something for a run, with the column naming it.
const RUN_ROWS: &[(&str, &str)] = &[
    ("aiki_entries", "run_id"),
    ("aiki_sleeps", "run_id"),
    ("aiki_events", "run_id"),
    ("aiki_timeline", "run_id"),
    ("aiki_waits", "waiter"),
    ("aiki_waits", "child"),
];

/// `column` is one of the ids in the list `$1`.
fn in_ids<D: Dialect>(column: &str) -> String {
    if D::DRIVER.backend == "postgres" {
        format!("{column} = ANY($1::uuid[])")
    } else {
        format!("{column} IN (SELECT value FROM json_each($1))")
    }
}

/// Whether `D` is SQLite.
fn sqlite<D: Dialect>() -> bool {
    D::DRIVER.backend == "sqlite"
}

/// Whether run `r` ended before the cutoff `$1` (`status IN (...)` spelled as the index
/// `aiki_runs_ended` is, so that both databases may use it). `by_id`: the run is found by its
/// id, and SQLite is told not to read runs by these columns instead (`+column`).
fn ended<D: Dialect>(r: &str, by_id: bool) -> String {
    let plus = if by_id && sqlite::<D>() { "+" } else { "" };
    format!(
        "{plus}{r}.status IN {terminal} AND {plus}{r}.updated_at < $1",
        terminal = status_list(RunStatus::is_terminal)
    )
}

/// The ids of up to `$2` runs ended before `$1` whose parent is gone or ended before it too,
/// the oldest first.
///
/// SQLite reads them down `aiki_runs_ended` (on a schema that has it) and stops at the limit.
/// The store never runs `ANALYZE`, and without statistics SQLite's planner chose to read every
/// ended run by its status and sort them all to take a batch: a batch cost more the more ended
/// runs the store held (120 ms with 200,000). PostgreSQL plans from its own statistics.
fn purgeable<D: Dialect>(level: Level) -> String {
    let indexed = if sqlite::<D>() && level.ended_runs {
        " INDEXED BY aiki_runs_ended"
    } else {
        ""
    };
    format!(
        "SELECT r.id FROM aiki_runs r{indexed} WHERE {ended} AND (r.parent_run_id IS NULL OR \
         NOT EXISTS (SELECT 1 FROM aiki_runs p WHERE p.id = r.parent_run_id AND NOT \
         ({parent_ended}))) ORDER BY r.updated_at LIMIT $2",
        ended = ended::<D>("r", false),
        parent_ended = ended::<D>("p", true),
    )
}

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn purge_runs(
        &self,
        lease: &Lease,
        now: Millis,
        purge: PurgeRuns,
    ) -> Result<Vec<RunId>, StoreError> {
        let base = params![purge.cutoff(now), i64::from(purge.limit), now];
        let params = self.fenced(&base, lease);
        if purge.dry_run {
            let rows = self
                .fetch(On::Read, &self.purge_statement(true), &params)
                .await?;
            return oldest_first(&rows);
        }
        let mut tx = self.begin().await?;
        let rows = self
            .fetch(On::Tx(&mut tx), &self.purge_statement(false), &params)
            .await?;
        let ids = oldest_first(&rows)?;
        if !ids.is_empty() {
            let list = Param::List(ids.iter().map(RunId::to_string).collect());
            for (table, column) in RUN_ROWS {
                let sql = (D::DRIVER.render)(&format!(
                    "DELETE FROM {table} WHERE {member}",
                    member = in_ids::<D>(column)
                ));
                self.execute(On::Tx(&mut tx), &sql, std::slice::from_ref(&list))
                    .await?;
            }
        }
        self.commit(tx).await?;
        Ok(ids)
    }

    /// The query plan of a purge's `DELETE` of its batch of runs (`explain`: the database's
    /// `EXPLAIN` statement), its lines read from `column`; nothing is deleted.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(crate) async fn explain_purge(
        &self,
        lease: &Lease,
        now: Millis,
        purge: PurgeRuns,
        explain: &str,
        column: usize,
    ) -> Result<String, StoreError> {
        let base = params![purge.cutoff(now), i64::from(purge.limit), now];
        let params = self.fenced(&base, lease);
        self.explain(
            On::Read,
            explain,
            &self.purge_statement(false),
            &params,
            column,
        )
        .await
    }

    /// The statement that lists (`dry_run`) or deletes a batch of runs, returning each one's
    /// id and end time. Parameters: the cutoff, the limit, now and the lease's fence.
    fn purge_statement(&self, dry_run: bool) -> String {
        let fence = fence(&self.dialect, self.level, "$3", 4);
        let purgeable = purgeable::<D>(self.level);
        (D::DRIVER.render)(&if dry_run {
            format!(
                "SELECT q.id::text, q.updated_at FROM aiki_runs q WHERE q.id IN ({purgeable}) \
                 {fence}"
            )
        } else {
            // The batch is checked again row by row as it is deleted: a run an operator moved
            // out of its end since the batch was chosen is left alone.
            format!(
                "DELETE FROM aiki_runs WHERE id IN ({purgeable}) AND {ended}{fence} \
                 RETURNING id::text, updated_at",
                ended = ended::<D>("aiki_runs", true),
            )
        })
    }
}

/// The ids of `(id, ended at)` rows, the oldest first.
fn oldest_first(rows: &[Row]) -> Result<Vec<RunId>, StoreError> {
    let mut runs = rows
        .iter()
        .map(|row| {
            let id = decode::parse_id(&row.text(0)?.unwrap_or_default())?;
            Ok((row.int(1)?.unwrap_or_default(), id))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    runs.sort_unstable();
    Ok(runs.into_iter().map(|(_, id)| id).collect())
}
