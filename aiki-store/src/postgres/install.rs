//! Where Aiki's PostgreSQL tables live: a schema of their own (default `aiki`), holding their
//! own migration bookkeeping, so that they never collide with the host application's tables or
//! its own `sqlx::migrate!` (sqlx 0.8 cannot rename its `_sqlx_migrations` table). An install
//! of v0.1.0 kept them in the connection's own schema (usually `public`); the first connect of
//! this release that migrates moves them over, in the migration's transaction.

use sqlx::postgres::Postgres;
use sqlx::{Row, Transaction};

use crate::StoreError;
use crate::sql::driver;

/// The tables of v0.1.0 (migration 0001); later tables are created in Aiki's schema already.
const TABLES: [&str; 4] = ["aiki_runs", "aiki_entries", "aiki_sleeps", "aiki_events"];

/// The function of v0.1.0's trigger (migration 0002).
const FUNCTIONS: [&str; 1] = ["aiki_wake_parent()"];

/// Letters, digits and `_`, not starting with a digit: a name that needs no quoting rules.
pub(super) fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 63
}

/// Moves an install of v0.1.0 from schema `from` into `to`, inside `tx`: its tables (with their
/// indexes, trigger and rows), its trigger function, and its rows of `from._sqlx_migrations`
/// (only the versions `migrator` knows; the table goes if nothing else is left in it). Does
/// nothing unless `from` holds Aiki's tables and `to` does not.
pub(super) async fn move_install(
    tx: &mut Transaction<'_, Postgres>,
    from: &str,
    to: &str,
    migrator: &sqlx::migrate::Migrator,
) -> Result<(), StoreError> {
    let map = |error| driver::POSTGRES.map_error(error);
    let located = sqlx::query(
        "SELECT to_regclass(format('%I.aiki_runs', $1::text)) IS NOT NULL, \
                to_regclass(format('%I.aiki_runs', $2::text)) IS NOT NULL, \
                to_regclass(format('%I._sqlx_migrations', $1::text)) IS NOT NULL",
    )
    .bind(from)
    .bind(to)
    .fetch_one(&mut **tx)
    .await
    .map_err(map)?;
    let (theirs, ours, bookkeeping): (bool, bool, bool) = (
        located.try_get(0).map_err(map)?,
        located.try_get(1).map_err(map)?,
        located.try_get(2).map_err(map)?,
    );
    if !theirs || ours {
        return Ok(());
    }
    tracing::info!(from, to, "moving Aiki's tables into a schema of their own");
    let quoted = |schema: &str| format!("\"{}\"", schema.replace('"', "\"\""));
    let (from_q, to_q) = (quoted(from), quoted(to));
    for table in TABLES {
        sqlx::query(&format!("ALTER TABLE {from_q}.{table} SET SCHEMA {to_q}"))
            .execute(&mut **tx)
            .await
            .map_err(map)?;
    }
    for function in FUNCTIONS {
        sqlx::query(&format!(
            "ALTER FUNCTION {from_q}.{function} SET SCHEMA {to_q}"
        ))
        .execute(&mut **tx)
        .await
        .map_err(map)?;
    }
    if !bookkeeping {
        return Ok(());
    }
    let versions: Vec<i64> = migrator.iter().map(|migration| migration.version).collect();
    let statements = [
        format!(
            "CREATE TABLE IF NOT EXISTS {to_q}._sqlx_migrations \
             (LIKE {from_q}._sqlx_migrations INCLUDING ALL)"
        ),
        format!(
            "INSERT INTO {to_q}._sqlx_migrations SELECT * FROM {from_q}._sqlx_migrations \
             WHERE version = ANY($1)"
        ),
        format!("DELETE FROM {from_q}._sqlx_migrations WHERE version = ANY($1)"),
    ];
    for statement in &statements {
        let query = sqlx::query(statement);
        let query = if statement.contains("$1") {
            query.bind(&versions)
        } else {
            query
        };
        query.execute(&mut **tx).await.map_err(map)?;
    }
    let left: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {from_q}._sqlx_migrations"))
        .fetch_one(&mut **tx)
        .await
        .map_err(map)?;
    if left == 0 {
        sqlx::query(&format!("DROP TABLE {from_q}._sqlx_migrations"))
            .execute(&mut **tx)
            .await
            .map_err(map)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["aiki", "aiki_e2e_1", "_x", "A1"] {
            assert!(is_plain_identifier(good), "{good}");
        }
        for bad in ["", "1a", "a-b", "a;drop", "a b", "\"q\""] {
            assert!(!is_plain_identifier(bad), "{bad}");
        }
    }
}
