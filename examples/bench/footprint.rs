//! Bytes per task entry: the store's size when freshly migrated and again after the throughput
//! row with one worker process wrote its runs (N runs × 10 tasks, each task one row of
//! `aiki_entries`), the growth divided by the entries written. Two figures per backend:
//!
//! * **entries table**: `aiki_entries` with its indexes. SQLite: the pages the `dbstat` virtual
//!   table gives the table and its indexes; PostgreSQL: `pg_total_relation_size` (heap, indexes,
//!   TOAST, free space and visibility maps), dead row versions the updates left included until a
//!   vacuum reclaims them.
//! * **whole store**: everything the runs left (runs, entries, timeline, indexes). SQLite:
//!   `PRAGMA page_count × page_size`, the database as of the last commit, WAL frames included,
//!   free pages too (the WAL file's own size is not counted); PostgreSQL: the sum of
//!   `pg_total_relation_size` over the tables of the store's schema.

use serde_json::{Value, json};

/// A store's size at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    entries_bytes: i64,
    store_bytes: i64,
    entries: i64,
}

/// The size of the store at `url`, after migrating it (the baseline of [`per_entry`]).
pub(crate) async fn empty(url: &str) -> anyhow::Result<Size> {
    drop(aiki::store::connect(url).await?);
    size(url).await
}

/// The growth of the store at `url` since `before`, per task entry written.
pub(crate) async fn per_entry(url: &str, before: Size) -> anyhow::Result<Value> {
    let after = size(url).await?;
    let entries = after.entries - before.entries;
    anyhow::ensure!(entries > 0, "no task entries were written");
    let per = |bytes: i64| bytes as f64 / entries as f64;
    Ok(json!({
        "entries": entries,
        "entries_table_bytes": after.entries_bytes - before.entries_bytes,
        "store_bytes": after.store_bytes - before.store_bytes,
        "entries_table_bytes_per_entry": per(after.entries_bytes - before.entries_bytes),
        "store_bytes_per_entry": per(after.store_bytes - before.store_bytes),
    }))
}

async fn size(url: &str) -> anyhow::Result<Size> {
    use sqlx::{Connection, Row};
    if url.starts_with("sqlite:") {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse()?;
        let mut connection = sqlx::SqliteConnection::connect_with(&options).await?;
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&mut connection)
            .await?;
        let page_size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut connection)
            .await?;
        let row = sqlx::query(
            "SELECT (SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN \
                 (SELECT name FROM sqlite_schema WHERE tbl_name = 'aiki_entries')), \
             (SELECT count(*) FROM aiki_entries)",
        )
        .fetch_one(&mut connection)
        .await?;
        let _ = connection.close().await;
        Ok(Size {
            entries_bytes: row.get(0),
            store_bytes: pages * page_size,
            entries: row.get(1),
        })
    } else {
        // The URL's search path is the store's schema.
        let mut connection = sqlx::PgConnection::connect(url).await?;
        let row = sqlx::query(
            "SELECT pg_total_relation_size('aiki_entries'::regclass), \
             (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
              WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'), \
             (SELECT count(*) FROM aiki_entries)",
        )
        .fetch_one(&mut connection)
        .await?;
        let _ = connection.close().await;
        Ok(Size {
            entries_bytes: row.get(0),
            store_bytes: row.get(1),
            entries: row.get(2),
        })
    }
}

/// `entries table 312 B, whole store 1,024 B (1000 entries)`.
pub(crate) fn describe(footprint: &Value) -> String {
    format!(
        "entries table {:.0} B, whole store {:.0} B ({} entries)",
        footprint["entries_table_bytes_per_entry"]
            .as_f64()
            .unwrap_or(f64::NAN),
        footprint["store_bytes_per_entry"]
            .as_f64()
            .unwrap_or(f64::NAN),
        footprint["entries"],
    )
}
