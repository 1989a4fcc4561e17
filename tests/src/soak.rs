//! The chaos soak's workflow and its side table: five tasks under
//! `fixed(max_attempts = 20, delay_ms = 5)`, each of which records its start (run id,
//! address, call index, attempt, start time on the worker's clock) in a table of its own
//! before doing its work. The worker processes (`aiki_test_worker`) serve it when
//! `AIKI_SOAK_SIDE_TABLE_URL` names that table's database; [`crate::chaos`] reads it back.
//!
//! The side table lives in a SQL database reached with sqlx, whatever the store's transport:
//! on PostgreSQL the store's own database and schema, on SQLite a file of its own beside the
//! store's (the store's single writer is not shared with the log).

use std::str::FromStr;
use std::time::{Duration, Instant};

use aiki::{Clock, Millis, Run, State, SystemClock, TaskContext, TaskError, WorkflowError};
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

/// The soak tasks' retry budget: `max_attempts` of [`SoakStep`]'s policy (20).
pub fn max_attempts() -> u32 {
    aiki::Task::retry(&SoakStep).max_attempts()
}

/// How long a handler keeps trying to log its start while the database is unreachable (a
/// restart), so an outage of the log never reads as a failed attempt.
const LOG_PATIENCE: Duration = Duration::from_secs(60);

/// One handler start, as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Start {
    /// The run.
    pub run_id: String,
    /// The task's content address.
    pub address: String,
    /// The call's position in the address's queue.
    pub index: u32,
    /// The attempt, counting from 1.
    pub attempt: u32,
    /// When the handler started, in ms since the epoch ([`SystemClock`], the clock the
    /// workers stamp entries with).
    pub started_at: Millis,
    /// The worker process that ran it.
    pub worker: String,
}

/// The table handler starts are logged to (`aiki_soak_starts`), on PostgreSQL or SQLite.
#[derive(Clone, Debug)]
pub enum SideTable {
    /// In a PostgreSQL database (the URL's search path picks the schema).
    Postgres(PgPool),
    /// In a SQLite file.
    Sqlite(SqlitePool),
}

const CREATE: &str = "CREATE TABLE IF NOT EXISTS aiki_soak_starts (run_id TEXT NOT NULL, \
     address TEXT NOT NULL, idx BIGINT NOT NULL, attempt BIGINT NOT NULL, \
     started_at BIGINT NOT NULL, worker TEXT NOT NULL)";
const INSERT: &str = "INSERT INTO aiki_soak_starts \
     (run_id, address, idx, attempt, started_at, worker) VALUES ($1, $2, $3, $4, $5, $6)";
const SELECT: &str =
    "SELECT run_id, address, idx, attempt, started_at, worker FROM aiki_soak_starts";

impl SideTable {
    /// A pool on the database `url` names (`postgres://…` or `sqlite://…`), connecting
    /// lazily: a worker started while the database restarts does not fail.
    pub fn connect(url: &str) -> Result<SideTable, sqlx::Error> {
        if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_secs(30));
            Ok(SideTable::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(2)
                    .connect_lazy_with(options),
            ))
        } else {
            Ok(SideTable::Postgres(
                PgPoolOptions::new().max_connections(4).connect_lazy(url)?,
            ))
        }
    }

    /// Connects and creates the table (the soak does this before any worker starts).
    pub async fn create(url: &str) -> Result<SideTable, sqlx::Error> {
        let table = SideTable::connect(url)?;
        match &table {
            SideTable::Postgres(pool) => {
                sqlx::query(CREATE).execute(pool).await?;
            }
            SideTable::Sqlite(pool) => {
                let create = CREATE.replace("BIGINT", "INTEGER");
                sqlx::query(&create).execute(pool).await?;
            }
        }
        Ok(table)
    }

    /// Logs one start.
    pub async fn record(&self, start: &Start) -> Result<(), sqlx::Error> {
        macro_rules! insert {
            ($pool:expr) => {
                sqlx::query(INSERT)
                    .bind(&start.run_id)
                    .bind(&start.address)
                    .bind(i64::from(start.index))
                    .bind(i64::from(start.attempt))
                    .bind(start.started_at)
                    .bind(&start.worker)
                    .execute($pool)
                    .await
                    .map(|_| ())
            };
        }
        match self {
            SideTable::Postgres(pool) => insert!(pool),
            SideTable::Sqlite(pool) => insert!(pool),
        }
    }

    /// Every start logged so far.
    pub async fn starts(&self) -> Result<Vec<Start>, sqlx::Error> {
        macro_rules! select {
            ($pool:expr) => {
                sqlx::query(SELECT)
                    .fetch_all($pool)
                    .await?
                    .into_iter()
                    .map(|row| {
                        Ok(Start {
                            run_id: row.try_get(0)?,
                            address: row.try_get(1)?,
                            index: u32::try_from(row.try_get::<i64, _>(2)?).unwrap_or(u32::MAX),
                            attempt: u32::try_from(row.try_get::<i64, _>(3)?).unwrap_or(u32::MAX),
                            started_at: row.try_get(4)?,
                            worker: row.try_get(5)?,
                        })
                    })
                    .collect()
            };
        }
        match self {
            SideTable::Postgres(pool) => select!(pool),
            SideTable::Sqlite(pool) => select!(pool),
        }
    }
}

/// What the soak's handlers share in a worker process.
#[derive(Debug)]
pub struct SoakEnv {
    /// Where starts are logged.
    pub side_table: SideTable,
    /// This worker's id.
    pub worker: String,
    /// How long a handler works after logging its start (`AIKI_SOAK_TASK_MS`, default 100 ms:
    /// long enough that a kill finds handlers mid-work).
    pub work: Duration,
}

/// One soak task: logs its start, then works for a moment.
#[aiki::task(name = "soak-step", retry = fixed(max_attempts = 20, delay_ms = 5))]
pub async fn soak_step(
    input: String,
    env: State<SoakEnv>,
    ctx: TaskContext,
) -> Result<String, TaskError> {
    let start = Start {
        run_id: ctx.run_id().to_string(),
        address: ctx.address().to_owned(),
        index: ctx.index(),
        attempt: ctx.attempt(),
        started_at: SystemClock.now(),
        worker: env.worker.clone(),
    };
    let patience = Instant::now() + LOG_PATIENCE;
    let mut pause = Duration::from_millis(20);
    while let Err(error) = env.side_table.record(&start).await {
        if Instant::now() > patience {
            return Err(error.into());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
    tokio::time::sleep(env.work).await;
    Ok(input)
}

/// Five soak tasks in a row.
#[aiki::workflow(name = "soak", version = "1")]
pub async fn soak(run: &Run, key: String) -> Result<usize, WorkflowError> {
    for i in 0..5 {
        SoakStep.start(run, format!("{key}/{i}")).await?;
    }
    Ok(5)
}
