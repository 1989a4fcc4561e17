//! The commit rates the rows are measured against, measured in the same run as the rows, all
//! with the same single-row `INSERT` of a small JSON text and the store's durability settings
//! (SQLite: a file in the temp folder, WAL, `synchronous=NORMAL`; PostgreSQL: the server's
//! `synchronous_commit`). The engines' own rates, the yardsticks every throughput row is
//! divided by:
//!
//! * SQLite: the C library called in process through `rusqlite` (the same `libsqlite3-sys` sqlx
//!   links, so the same SQLite build), on a blocking thread: one commit per `INSERT`,
//!   sequential. No driver thread hop, which every `sqlx` statement pays.
//! * PostgreSQL: 1 and 16 connections (`sqlx::PgConnection`s, one tokio task each), each a loop
//!   of `INSERT`s, one autocommit transaction each, into a fresh table of the phase's schema;
//!   total commits per second over the same fixed time.
//!
//! And the `sqlx` rows: one connection (the old limit row, SQLite's second yardstick), and a
//! one-connection pool as the stores use, with and without `test_before_acquire`.

use std::path::Path;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use super::{Backend, Stores};

/// The row every measurement inserts.
const PAYLOAD: &str = "{\"output\":12345,\"fingerprint\":\"0123456789abcdef0123456789abcdef\"}";

/// Concurrent connections of the wide PostgreSQL yardstick.
const POSTGRES_CONNECTIONS: usize = 16;

/// Measures the backend's yardsticks for `seconds` each; `sqlx_rate` is the `sqlx` 1-connection
/// row already measured, which is SQLite's second yardstick. Returns them in print order, each
/// `{ "key", "label", "short", "commits_per_s" }`.
pub(crate) async fn measure(
    stores: &mut Stores,
    seconds: f64,
    sqlx_rate: f64,
) -> anyhow::Result<Value> {
    let limit = |key: &str, label: &str, short: &str, rate: f64| json!({ "key": key, "label": label, "short": short, "commits_per_s": rate });
    Ok(match stores.backend {
        Backend::Sqlite => {
            let in_process = sqlite_in_process(&stores.dir, seconds).await?;
            json!([
                limit(
                    "sqlite_in_process",
                    "SQLite in process (rusqlite), 1 commit per INSERT",
                    "in-process SQLite",
                    in_process,
                ),
                limit(
                    "sqlx_1_conn",
                    "sqlx 1 conn, 1 commit per INSERT (the old limit row)",
                    "sqlx 1 conn",
                    sqlx_rate,
                ),
            ])
        }
        Backend::Postgres => {
            let url = stores.fresh_url("engine").await?;
            let one = postgres_commits(&url, 1, seconds).await?;
            let wide = postgres_commits(&url, POSTGRES_CONNECTIONS, seconds).await?;
            json!([
                limit(
                    "postgres_1_conn",
                    "PostgreSQL, 1 connection, 1 commit per INSERT",
                    "1 conn",
                    one,
                ),
                limit(
                    "postgres_16_conn",
                    "PostgreSQL, 16 connections, 1 commit per INSERT",
                    "16 conns",
                    wide,
                ),
            ])
        }
    })
}

/// `{ key: rate ÷ that yardstick }` for every yardstick in `limits`.
pub(crate) fn ratios(limits: &Value, rate: f64) -> Value {
    let mut ratios = Map::new();
    for limit in limits.as_array().into_iter().flatten() {
        let key = limit["key"].as_str().unwrap_or("?").to_owned();
        let engine = limit["commits_per_s"].as_f64().unwrap_or(f64::NAN);
        ratios.insert(key, json!(rate / engine));
    }
    Value::Object(ratios)
}

/// `0.12 × in-process SQLite, 0.25 × sqlx 1 conn`: a row's `ratios` in the order of `limits`.
pub(crate) fn describe(limits: &Value, ratios: &Value) -> String {
    limits
        .as_array()
        .into_iter()
        .flatten()
        .map(|limit| {
            let ratio = ratios[limit["key"].as_str().unwrap_or("?")]
                .as_f64()
                .unwrap_or(f64::NAN);
            format!("{ratio:.2} × {}", limit["short"].as_str().unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Prints the yardsticks, and the `sqlx` 1-connection rate `raw` where it is not one of them.
pub(crate) fn print(limits: &Value, raw: f64) {
    let limits = limits.as_array().map_or(&[][..], Vec::as_slice);
    for limit in limits {
        println!(
            "    limit: {:<55} {:>8.0} /s",
            limit["label"].as_str().unwrap_or("?"),
            limit["commits_per_s"].as_f64().unwrap_or(f64::NAN),
        );
    }
    if !limits.iter().any(|limit| limit["key"] == "sqlx_1_conn") {
        println!(
            "    {:<62} {raw:>8.0} /s",
            "sqlx 1 conn, 1 commit per INSERT (the old limit row):"
        );
    }
}

/// SQLite's commit rate in process: `rusqlite` on a blocking thread, a file in `dir`, WAL,
/// `synchronous=NORMAL`, one autocommit single-row `INSERT` after another for `seconds`.
async fn sqlite_in_process(dir: &Path, seconds: f64) -> anyhow::Result<f64> {
    let path = dir.join("engine.db");
    let budget = Duration::from_secs_f64(seconds);
    tokio::task::spawn_blocking(move || {
        let connection = rusqlite::Connection::open(&path)?;
        let mode: String =
            connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
        anyhow::ensure!(mode.eq_ignore_ascii_case("wal"), "journal_mode is {mode}");
        connection.pragma_update(None, "synchronous", "NORMAL")?;
        connection.execute_batch("CREATE TABLE raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
        let mut insert = connection.prepare("INSERT INTO raw (v) VALUES (?1)")?;
        let mut count = 0u64;
        let started = Instant::now();
        while started.elapsed() < budget {
            insert.execute([PAYLOAD])?;
            count += 1;
        }
        Ok(count as f64 / started.elapsed().as_secs_f64())
    })
    .await?
}

/// PostgreSQL's commit rate with `connections` concurrent connections to `url`, each inserting
/// one row per transaction into a fresh table for `seconds`: total commits per second.
async fn postgres_commits(url: &str, connections: usize, seconds: f64) -> anyhow::Result<f64> {
    use sqlx::Connection;
    let table = format!("engine_{connections}");
    let mut setup = sqlx::PgConnection::connect(url).await?;
    sqlx::query(&format!(
        "CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)"
    ))
    .execute(&mut setup)
    .await?;
    let _ = setup.close().await;
    // Every connection is open before the clock starts.
    let mut open = Vec::with_capacity(connections);
    for _ in 0..connections {
        open.push(sqlx::PgConnection::connect(url).await?);
    }
    let insert = format!("INSERT INTO {table} (v) VALUES ($1)");
    let budget = Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut loops = JoinSet::new();
    for mut connection in open {
        let insert = insert.clone();
        loops.spawn(async move {
            let mut count = 0u64;
            while started.elapsed() < budget {
                sqlx::query(&insert)
                    .bind(PAYLOAD)
                    .execute(&mut connection)
                    .await?;
                count += 1;
            }
            let ended = started.elapsed();
            let _ = connection.close().await;
            anyhow::Ok((count, ended))
        });
    }
    let (mut total, mut elapsed) = (0u64, Duration::ZERO);
    while let Some(joined) = loops.join_next().await {
        let (count, ended) = joined??;
        total += count;
        elapsed = elapsed.max(ended);
    }
    Ok(total as f64 / elapsed.as_secs_f64())
}

/// The `sqlx` 1-connection row (the old limit row): sequential single-row `INSERT`
/// transactions on one connection, for `seconds`.
pub(crate) async fn raw_commits(stores: &mut Stores, seconds: f64) -> anyhow::Result<f64> {
    use sqlx::Connection;
    let budget = Duration::from_secs_f64(seconds);
    let spinner = ProgressBar::new_spinner().with_message("raw commits");
    let mut count = 0u64;
    let started;
    match stores.backend {
        Backend::Sqlite => {
            use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
            let options = SqliteConnectOptions::new()
                .filename(stores.dir.join("raw.db"))
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            let mut connection = sqlx::SqliteConnection::connect_with(&options).await?;
            sqlx::query("CREATE TABLE raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
                .execute(&mut connection)
                .await?;
            started = Instant::now();
            while started.elapsed() < budget {
                sqlx::query("INSERT INTO raw (v) VALUES (?1)")
                    .bind(PAYLOAD)
                    .execute(&mut connection)
                    .await?;
                count += 1;
                if count.is_multiple_of(256) {
                    spinner.tick();
                }
            }
        }
        Backend::Postgres => {
            let url = stores.fresh_url("raw").await?;
            let mut connection = sqlx::PgConnection::connect(&url).await?;
            sqlx::query("CREATE TABLE raw (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)")
                .execute(&mut connection)
                .await?;
            started = Instant::now();
            while started.elapsed() < budget {
                sqlx::query("INSERT INTO raw (v) VALUES ($1)")
                    .bind(PAYLOAD)
                    .execute(&mut connection)
                    .await?;
                count += 1;
                if count.is_multiple_of(256) {
                    spinner.tick();
                }
            }
            let _ = connection.close().await;
        }
    }
    spinner.finish_and_clear();
    Ok(count as f64 / started.elapsed().as_secs_f64())
}

/// The same INSERTs through a one-connection `sqlx` pool, as the stores use, with the pool's
/// default `test_before_acquire` (a ping before every statement) on or off: how much of the
/// gap between the raw rate and the store's comes from going through a pool.
pub(crate) async fn pool_commits(
    stores: &mut Stores,
    seconds: f64,
    test: bool,
) -> anyhow::Result<f64> {
    let budget = Duration::from_secs_f64(seconds);
    let mut count = 0u64;
    let started;
    match stores.backend {
        Backend::Sqlite => {
            use sqlx::sqlite::{
                SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
            };
            let options = SqliteConnectOptions::new()
                .filename(stores.dir.join(format!("pool-{test}.db")))
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .test_before_acquire(test)
                .connect_with(options)
                .await?;
            sqlx::query("CREATE TABLE raw (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
                .execute(&pool)
                .await?;
            started = Instant::now();
            while started.elapsed() < budget {
                sqlx::query("INSERT INTO raw (v) VALUES (?1)")
                    .bind(PAYLOAD)
                    .execute(&pool)
                    .await?;
                count += 1;
            }
            pool.close().await;
        }
        Backend::Postgres => {
            let url = stores.fresh_url(&format!("pool_{test}")).await?;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .test_before_acquire(test)
                .connect(&url)
                .await?;
            sqlx::query("CREATE TABLE raw (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)")
                .execute(&pool)
                .await?;
            started = Instant::now();
            while started.elapsed() < budget {
                sqlx::query("INSERT INTO raw (v) VALUES ($1)")
                    .bind(PAYLOAD)
                    .execute(&pool)
                    .await?;
                count += 1;
            }
            pool.close().await;
        }
    }
    Ok(count as f64 / started.elapsed().as_secs_f64())
}
