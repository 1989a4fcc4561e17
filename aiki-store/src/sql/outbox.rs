//! The change stream (`ReadStore::changes_since`) on the SQL stores.
//!
//! Every status change is a timeline row with a number (`seq`). Two ways to read them in order
//! without missing one:
//!
//! * **Sequence** (SQLite): one writer numbers the changes inside the statements that make them,
//!   so numbers become visible in order; the cursor is the last number read.
//! * **Snapshots** (PostgreSQL): numbers are taken before their transactions commit, so a
//!   smaller number can become visible after a larger one (a reader paging by number alone
//!   would skip it). Each row also records its transaction id. A reader takes the changes in
//!   batches between two transaction snapshots: a batch is what is visible in the later one
//!   and was not in the earlier one (no transaction is in both, so nothing repeats; every
//!   transaction commits before some snapshot, so nothing is missed), paged in number order.
//!   The cursor is `EARLIER/LATER/LAST`: the batch's two snapshots (`-` for none) and the last
//!   number read in it.

use crate::{Change, ChangeCursor, ChangePage, MAX_PAGE, Namespace, RunId, RunStatus, StoreError};

use super::SqlStore;
use super::decode;
use super::dialect::{Dialect, On, Param, Row};

/// The statements of one way of reading the stream.
#[derive(Clone, Debug)]
pub(crate) enum OutboxStatements {
    /// By number: `page` (`$1` after, `$2` limit) and `head` (the last number given).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    Sequence { page: String, head: String },
    /// By snapshots: `first` (the first batch: `$1` its snapshot, `$2` after, `$3` limit),
    /// `page` (the first page of a later batch: `$1` the earlier snapshot, `$2` the later one,
    /// `$3` after, `$4` limit), `page_after` (a later page of that batch, the same parameters)
    /// and `now` (the current snapshot).
    ///
    /// A later batch's first page is found by its transaction ids (the index
    /// `aiki_timeline_by_xid`), not by walking the numbers of every change before it. Its
    /// later pages walk the numbers from the last one read (`aiki_timeline_by_seq`): read by
    /// transaction ids as well, each of them would read and sort the whole batch, and a reader
    /// far behind would pay for its backlog at every page. Two statements, since PostgreSQL
    /// plans a prepared statement once for any parameters.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Snapshots {
        first: String,
        page: String,
        page_after: String,
        now: String,
    },
}

/// The columns of a change: `seq, run_id, revision, from, to, at, workflow, version, pool`.
const COLUMNS: &str = "t.seq, t.run_id::text, t.revision, t.from_status, t.to_status, t.at, \
     r.workflow, r.version, r.pool";

impl OutboxStatements {
    /// SQLite's.
    #[cfg(feature = "sqlite")]
    pub(crate) fn sequence() -> Self {
        let page = super::statements::render_for_sqlite(&format!(
            "SELECT {COLUMNS} FROM aiki_timeline t JOIN aiki_runs r ON r.id = t.run_id \
             WHERE t.seq > $1 ORDER BY t.seq LIMIT $2"
        ));
        OutboxStatements::Sequence {
            page,
            head: "SELECT last FROM aiki_outbox_seq WHERE id = 1".to_owned(),
        }
    }

    /// PostgreSQL's.
    #[cfg(feature = "postgres")]
    pub(crate) fn snapshots() -> Self {
        let first = format!(
            "SELECT {COLUMNS} FROM aiki_timeline t JOIN aiki_runs r ON r.id = t.run_id \
             WHERE t.xid IS NOT NULL \
             AND t.xid < pg_snapshot_xmax($1::pg_snapshot) \
             AND pg_visible_in_snapshot(t.xid, $1::pg_snapshot) \
             AND t.seq > $2 ORDER BY t.seq LIMIT $3"
        );
        let page = format!(
            "SELECT {COLUMNS} FROM aiki_timeline t JOIN aiki_runs r ON r.id = t.run_id \
             WHERE t.xid IS NOT NULL \
             AND t.xid < pg_snapshot_xmax($2::pg_snapshot) \
             AND t.xid >= pg_snapshot_xmin($1::pg_snapshot) \
             AND pg_visible_in_snapshot(t.xid, $2::pg_snapshot) \
             AND NOT pg_visible_in_snapshot(t.xid, $1::pg_snapshot) \
             AND t.seq > $3 ORDER BY t.seq LIMIT $4"
        );
        // The transaction ids' bounds, which the index could read by, are left out: they are
        // implied by the snapshots' visibility.
        let page_after = format!(
            "SELECT {COLUMNS} FROM aiki_timeline t JOIN aiki_runs r ON r.id = t.run_id \
             WHERE pg_visible_in_snapshot(t.xid, $2::pg_snapshot) \
             AND NOT pg_visible_in_snapshot(t.xid, $1::pg_snapshot) \
             AND t.seq > $3 ORDER BY t.seq LIMIT $4"
        );
        OutboxStatements::Snapshots {
            first,
            page,
            page_after,
            now: "SELECT pg_current_snapshot()::text".to_owned(),
        }
    }
}

fn invalid(cursor: &ChangeCursor) -> StoreError {
    StoreError::bad_cursor(cursor)
}

/// `EARLIER/LATER/LAST` of a snapshot cursor (`None` for the empty one).
fn parse_snapshots(
    cursor: &ChangeCursor,
) -> Result<(Option<String>, Option<String>, i64), StoreError> {
    if cursor.as_str().is_empty() {
        return Ok((None, None, 0));
    }
    let parts: Vec<&str> = cursor.as_str().split('/').collect();
    let [earlier, later, last] = parts.as_slice() else {
        return Err(invalid(cursor));
    };
    let snapshot = |text: &str| -> Result<Option<String>, StoreError> {
        if text == "-" {
            return Ok(None);
        }
        // `xmin:xmax:xip,...`: digits, colons and commas.
        let valid = text.split(':').count() == 3
            && text
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':' || c == ',');
        if valid {
            Ok(Some(text.to_owned()))
        } else {
            Err(invalid(cursor))
        }
    };
    let last = last.parse::<i64>().map_err(|_| invalid(cursor))?;
    Ok((snapshot(earlier)?, snapshot(later)?, last))
}

fn change(row: &Row) -> Result<Change, StoreError> {
    let status = |text: Option<String>| -> Result<Option<RunStatus>, StoreError> {
        text.map(|text| {
            text.parse().map_err(|error| StoreError::Incompatible {
                message: format!("the change stream: {error}"),
            })
        })
        .transpose()
    };
    let run_id: RunId =
        row.text(1)?
            .unwrap_or_default()
            .parse()
            .map_err(|_| StoreError::Corrupt {
                message: "the change stream holds a malformed run id".to_owned(),
            })?;
    Ok(Change {
        seq: decode::unsigned(row.int(0)?.unwrap_or_default(), "change number")?,
        run_id,
        revision: decode::unsigned(row.int(2)?.unwrap_or_default(), "revision")?,
        from: status(row.text(3)?)?,
        to: status(row.text(4)?)?.ok_or_else(|| StoreError::Corrupt {
            message: format!("a change of run {run_id} has no status"),
        })?,
        at: row.int(5)?.unwrap_or_default(),
        namespace: Namespace::new(
            row.text(6)?.unwrap_or_default(),
            row.text(7)?.unwrap_or_default(),
        ),
        pool: row.text(8)?.unwrap_or_default(),
    })
}

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn changes_since(
        &self,
        cursor: &ChangeCursor,
        limit: u32,
    ) -> Result<ChangePage, StoreError> {
        let Some(outbox) = &self.sql.own.outbox else {
            return Err(StoreError::Schema {
                message: "the change stream needs the schema of this release (the database's \
                          is older: run `aiki migrate`)"
                    .to_owned(),
            });
        };
        let limit = i64::from(limit.min(MAX_PAGE));
        match outbox {
            OutboxStatements::Sequence { page, head } => {
                let after: i64 = match cursor.as_str() {
                    "" => 0,
                    text => text.parse().map_err(|_| invalid(cursor))?,
                };
                if limit == 0 {
                    let head = self
                        .fetch_optional(On::Read, head, &[])
                        .await?
                        .map(|row| row.int(0))
                        .transpose()?
                        .flatten()
                        .unwrap_or_default();
                    return Ok(ChangePage {
                        changes: Vec::new(),
                        next: ChangeCursor::new(head.max(after).to_string()),
                    });
                }
                let rows = self
                    .fetch(On::Read, page, &[Param::from(after), Param::from(limit)])
                    .await?;
                let changes = rows.iter().map(change).collect::<Result<Vec<_>, _>>()?;
                let last = changes.last().map_or(after, |change| change.seq as i64);
                Ok(ChangePage {
                    changes,
                    next: ChangeCursor::new(last.to_string()),
                })
            }
            OutboxStatements::Snapshots {
                first,
                page,
                page_after,
                now,
            } => {
                let (earlier, later, last) = parse_snapshots(cursor)?;
                let current = || async {
                    self.fetch_text(On::Read, now, &[])
                        .await?
                        .ok_or_else(|| StoreError::Corrupt {
                            message: "the database returned no snapshot".to_owned(),
                        })
                };
                if limit == 0 {
                    // Everything visible now is behind the reader.
                    let now = current().await?;
                    return Ok(ChangePage {
                        changes: Vec::new(),
                        next: ChangeCursor::new(format!("{now}/-/0")),
                    });
                }
                // A batch is fixed by its later snapshot, taken when the batch starts. A batch
                // read to its end starts the next at once, so that an empty page means the
                // reader is caught up, not merely at a batch's end.
                let (mut earlier, mut later, mut last) = match later {
                    Some(later) => (earlier, later, last),
                    None => (earlier, current().await?, 0),
                };
                let mut fresh = last == 0;
                let changes = loop {
                    let rows = match &earlier {
                        Some(earlier) => {
                            let params = [
                                Param::from(earlier.as_str()),
                                Param::from(later.as_str()),
                                Param::from(last),
                                Param::from(limit),
                            ];
                            let statement = if last == 0 { page } else { page_after };
                            self.fetch(On::Read, statement, &params).await?
                        }
                        None => {
                            let params = [
                                Param::from(later.as_str()),
                                Param::from(last),
                                Param::from(limit),
                            ];
                            self.fetch(On::Read, first, &params).await?
                        }
                    };
                    let changes = rows.iter().map(change).collect::<Result<Vec<_>, _>>()?;
                    if !changes.is_empty() || fresh {
                        break changes;
                    }
                    earlier = Some(std::mem::replace(&mut later, current().await?));
                    last = 0;
                    fresh = true;
                };
                let next = if (changes.len() as i64) < limit {
                    // The batch is read: the next one starts where it ended.
                    format!("{later}/-/0")
                } else {
                    let last = changes.last().map_or(last, |change| change.seq as i64);
                    format!("{}/{later}/{last}", earlier.as_deref().unwrap_or("-"))
                };
                Ok(ChangePage {
                    changes,
                    next: ChangeCursor::new(next),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_cursors_parse_and_bad_ones_are_refused() {
        assert_eq!(
            parse_snapshots(&ChangeCursor::start()).unwrap(),
            (None, None, 0)
        );
        assert_eq!(
            parse_snapshots(&ChangeCursor::new("10:20:12,15/-/0")).unwrap(),
            (Some("10:20:12,15".to_owned()), None, 0)
        );
        assert_eq!(
            parse_snapshots(&ChangeCursor::new("-/30:30:/7")).unwrap(),
            (None, Some("30:30:".to_owned()), 7)
        );
        for bad in ["x", "1/2", "a:b:c/-/0", "-/-/x", "1:2:3;drop/-/0"] {
            assert!(
                matches!(
                    parse_snapshots(&ChangeCursor::new(bad)),
                    Err(StoreError::Invalid { .. })
                ),
                "{bad}"
            );
        }
    }
}
