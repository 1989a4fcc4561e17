//! The embedded default: SQLite in WAL mode with one writer connection.
//!
//! Every write goes through one connection (SQLite has one writer anyway; queueing in
//! process is cheaper than `SQLITE_BUSY` retries), reads go through a separate pool so they
//! never wait behind writes. Multi-statement writes run in `BEGIN IMMEDIATE` transactions,
//! so other processes sharing the file are serialized by SQLite's lock, never by a snapshot
//! error. Statements are prepared once per connection and cached (`persistent`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::Sqlite;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous as DriverSynchronous,
};

use crate::sql::dialect::DialectStatements;
use crate::sql::driver::{self, Driver};
use crate::sql::statements::{
    Level, claim_idle_column, entry_columns, entry_conflict, insert_event, render_for_sqlite,
    run_doc, starts_allowed, status_list, transition_set,
};
use crate::sql::{Dialect, On, SqlStore, Tx};
use crate::{MigrationMode, RunStatus, StoreError};

mod options;

pub use options::{SqliteOptions, SqliteSynchronous};

/// The embedded migrations of the SQLite schema.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The SQLite backend: the SQL store over SQLite's dialect.
pub type SqliteStore = SqlStore<SqliteDialect>;

/// SQLite's driver: one writer connection, and a read pool (the writer itself for an in-memory
/// database, which lives exactly as long as its connection).
#[derive(Clone, Debug)]
pub struct SqliteDialect {
    writer: SqlitePool,
    reader: SqlitePool,
    /// The writer connection, held between statements (see [`driver::Lane`]); every statement
    /// on the writer (and, for an in-memory database, every read) runs through it.
    lane: driver::Lane<Sqlite>,
    /// Reads go through the writer (an in-memory database).
    reads_on_writer: bool,
}

impl Dialect for SqliteDialect {
    type Db = Sqlite;

    const DRIVER: Driver<Sqlite> = driver::SQLITE;

    fn statements(&self, level: Level) -> DialectStatements {
        let run = render_for_sqlite(&run_doc("", level));
        let terminal = status_list(RunStatus::is_terminal);
        let unsuccessful = status_list(RunStatus::is_unsuccessful);
        let set = render_for_sqlite(&transition_set(level, "$4"));
        // A claim's move, by owner `$1` at `$2`, and what it returns.
        let claim = "UPDATE aiki_runs SET status = 'running', owner = $1, heartbeat_at = $2, \
                     revision = revision + 1, due_at = NULL, updated_at = $2";
        let claimed = format!(
            "RETURNING {run}, {}",
            render_for_sqlite(&claim_idle_column(level))
        );
        DialectStatements {
            claim: format!(
                "{claim} WHERE id IN (SELECT id FROM aiki_runs WHERE status = 'queued' AND pool = $3 \
                 AND namespace IN (SELECT value FROM json_each($4)) \
                 AND id NOT IN (SELECT value FROM json_each($6)) \
                 ORDER BY queued_at, id LIMIT $5) {claimed}"
            ),
            // In a transaction that records the answer (`claims.rs`).
            claims_answered: None,
            claim_run: format!(
                "{claim} WHERE id = $3 AND status = 'queued' \
                 AND namespace IN (SELECT value FROM json_each($4)) {claimed}"
            ),
            // One `UPDATE … FROM (is the awaited thing already there?)`; a terminal move wakes
            // a waiting parent through the `aiki_runs_wake_parent` trigger inside it. The
            // awaited children are found by id: `+c.status` keeps the planner off the status
            // indexes, through which it scanned every ended run of the store at every
            // transition (15–20 ms per statement with 100,000 of them).
            transition: format!(
                "UPDATE aiki_runs SET \
                 {set} \
                 FROM (SELECT v.ev OR v.ch AS sat, v.ev AS by_event \
                 FROM (SELECT \
                   $12 AND EXISTS (SELECT 1 FROM json_each($13) AS name \
                     JOIN json_each($14) AS idx ON idx.key = name.key \
                     JOIN aiki_events AS e ON e.run_id = $1 AND e.name = name.value \
                     AND e.idx = idx.value) AS ev, \
                   $12 AND ((NOT $19 AND EXISTS (SELECT 1 FROM aiki_runs AS c \
                     WHERE c.id IN (SELECT value FROM json_each($15)) \
                     AND +c.status IN {terminal})) \
                   OR ($19 AND (EXISTS (SELECT 1 FROM aiki_runs AS c \
                     WHERE c.id IN (SELECT value FROM json_each($15)) \
                     AND +c.status IN {unsuccessful}) \
                     OR NOT EXISTS (SELECT 1 FROM aiki_runs AS c \
                     WHERE c.id IN (SELECT value FROM json_each($15)) \
                     AND +c.status NOT IN {terminal})))) AS ch) AS v) AS w \
                 WHERE aiki_runs.id = $1 AND aiki_runs.revision = $2 \
                 AND aiki_runs.status IN (SELECT value FROM json_each($16)) \
                 RETURNING {run}"
            ),
            // One statement writes one table: the answer takes a transaction.
            transition_answered: None,
            // The batch is read once (each field extracted once, into the materialized `j`),
            // and each row is checked against its run with one lookup.
            upsert_entries: format!(
                "WITH j AS MATERIALIZED (SELECT json_extract(value, '$.run_id') AS run_id, \
                   json_extract(value, '$.address') AS address, \
                   json_extract(value, '$.idx') AS idx, \
                   json_extract(value, '$.kind') AS kind, \
                   json_extract(value, '$.status') AS status, \
                   json_extract(value, '$.output') AS output, \
                   json_extract(value, '$.fingerprint') AS fingerprint, \
                   json_extract(value, '$.attempts') AS attempts, \
                   json_extract(value, '$.error_kind') AS error_kind, \
                   json_extract(value, '$.error_message') AS error_message, \
                   json_extract(value, '$.retry_at') AS retry_at, \
                   json_extract(value, '$.updated_at') AS updated_at, \
                   json_extract(value, '$.input') AS input, \
                   json_extract(value, '$.expected') AS expected \
                   FROM json_each($1)) \
                 INSERT INTO aiki_entries {columns} \
                 SELECT j.run_id, j.address, j.idx, j.kind, j.status, j.output, j.fingerprint, \
                 j.attempts, j.error_kind, j.error_message, j.retry_at, j.updated_at{input} \
                 FROM j, aiki_runs AS r \
                 WHERE r.id = j.run_id AND r.revision = j.expected AND {allowed} \
                 {conflict} RETURNING run_id, address, idx",
                columns = entry_columns(level),
                input = if level.operations { ", j.input" } else { "" },
                allowed = starts_allowed(level, "r.", "j.status"),
                conflict = entry_conflict(level, "aiki_entries"),
            ),
            revisions_of: format!(
                "SELECT id, revision, {paused} FROM aiki_runs \
                 WHERE id IN (SELECT value FROM json_each($1))",
                paused = if level.operations {
                    "(pause_requested_at IS NOT NULL)"
                } else {
                    "0"
                }
            ),
            lock_first: None,
            cancel_sleeps: Some(
                "UPDATE aiki_sleeps SET cancelled = 1 \
                 WHERE run_id = $1 AND cancelled = 0 AND wake_at > $2"
                    .to_owned(),
            ),
            insert_event: render_for_sqlite(&insert_event(level)),
            insert_event_wakes: false,
            outbox: level
                .contract
                .then(crate::sql::outbox::OutboxStatements::sequence),
            table_exists: "SELECT COUNT(*) FROM sqlite_master \
                 WHERE type = 'table' AND name = $1"
                .to_owned(),
        }
    }

    async fn begin(&self) -> Result<Tx<Self>, StoreError> {
        self.lane
            .begin(&driver::SQLITE, Some("BEGIN IMMEDIATE"))
            .await
    }

    async fn commit(tx: Tx<Self>) -> Result<(), StoreError> {
        tx.commit()
            .await
            .map_err(|error| Self::DRIVER.map_error(error))
    }

    async fn execute<'a>(
        &'a self,
        on: On<'a, Tx<Self>>,
        sql: &'a str,
        params: &'a [crate::sql::Param<'a>],
    ) -> Result<u64, StoreError> {
        match on {
            On::Tx(_) | On::Read if !self.on_lane(&on) => {
                driver::execute(&Self::DRIVER, (&self.reader, &self.writer), on, sql, params).await
            }
            _ => {
                let mut held = self.lane.hold(&Self::DRIVER).await?;
                let done = driver::execute_on(&Self::DRIVER, held.connection(), sql, params).await;
                held.settle(done)
            }
        }
    }

    async fn fetch<'a>(
        &'a self,
        on: On<'a, Tx<Self>>,
        sql: &'a str,
        params: &'a [crate::sql::Param<'a>],
    ) -> Result<Vec<crate::sql::Row>, StoreError> {
        match on {
            On::Tx(_) | On::Read if !self.on_lane(&on) => {
                driver::fetch(&Self::DRIVER, (&self.reader, &self.writer), on, sql, params).await
            }
            _ => {
                let mut held = self.lane.hold(&Self::DRIVER).await?;
                let rows = driver::fetch_on(&Self::DRIVER, held.connection(), sql, params).await;
                held.settle(rows)
            }
        }
    }

    /// The migration runs inside one `BEGIN IMMEDIATE` transaction, so a second process waits
    /// and then finds nothing to do.
    async fn migrate(&self, migrator: &sqlx::migrate::Migrator) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        // `run_direct` rather than `run`: `run`'s `Acquire` bound makes the future not `Send`
        // (sqlx's own workaround, see `Migrator::run_direct`).
        migrator
            .run_direct(&mut *tx)
            .await
            .map_err(|error| driver::SQLITE.map_migrate_error(error))?;
        Self::commit(tx).await
    }

    fn migrator() -> &'static sqlx::migrate::Migrator {
        &MIGRATOR
    }

    // Run documents read the `wait_set` column of migration 0005, and the wake-ups need its
    // triggers; the timeline, the workers and the catalog are the tables of migrations 0006 to
    // 0008; run documents read the failed call's columns of 0009.
    const OLDEST_READABLE: i64 = 9;

    const OPERATIONS: i64 = 10;

    const CONTRACT: i64 = 11;

    const LEASES: i64 = 12;

    const CONFIG: i64 = 16;
    const KEYS: i64 = 17;
    const ANSWERS: i64 = 18;
    const ANSWER_DIGESTS: i64 = 24;
    const ENDPOINTS: i64 = 19;
    const SCHEDULES: i64 = 20;
    const ENDED_RUNS: i64 = 21;
    const CONTINUATION: i64 = 22;

    async fn close(&self) {
        self.lane.release().await;
        self.reader.close().await;
        self.writer.close().await;
    }
}

impl SqliteDialect {
    /// Whether a statement `on` runs through the writer's lane: every write outside a
    /// transaction, and the reads of an in-memory database (whose reads use the writer).
    fn on_lane(&self, on: &On<'_, Tx<Self>>) -> bool {
        match on {
            On::Write => true,
            On::Read => self.reads_on_writer,
            On::Tx(_) => false,
        }
    }
}

/// The file is created if missing, its folder is not: say which folder and what to do.
fn check_folder(url: &str, file: &std::path::Path) -> Result<(), StoreError> {
    let folder = match file.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => return Ok(()),
    };
    if folder.is_dir() {
        return Ok(());
    }
    Err(StoreError::CannotOpen {
        url: url.to_owned(),
        reason: format!(
            "the folder `{}` of the database file `{}` does not exist; create it first \
             (`mkdir -p {}`) or point the URL at a file in an existing folder",
            folder.display(),
            file.display(),
            folder.display()
        ),
    })
}

/// Aiki's SQLite database is a file of its own: one that holds another application's tables is
/// refused, so that neither side's migrations touch the other's.
async fn refuse_a_foreign_file(dialect: &SqliteDialect, url: &str) -> Result<(), StoreError> {
    let rows = dialect
        .fetch(
            On::Write,
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT LIKE 'aiki\\_%' ESCAPE '\\' \
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name <> '_sqlx_migrations' \
             ORDER BY name",
            &[],
        )
        .await?;
    let foreign = rows
        .iter()
        .map(|row| Ok(format!("`{}`", row.text(0)?.unwrap_or_default())))
        .collect::<Result<Vec<_>, StoreError>>()?;
    if foreign.is_empty() {
        return Ok(());
    }
    Err(StoreError::CannotOpen {
        url: url.to_owned(),
        reason: format!(
            "the file holds another application's tables ({}); Aiki keeps its runs in a \
             SQLite file of its own: point the URL at a new file",
            foreign.join(", ")
        ),
    })
}

impl SqliteStore {
    /// The query plan of `request`'s claim, as `EXPLAIN QUERY PLAN` prints it; nothing is
    /// claimed (for tests that check a claim stays indexed).
    #[doc(hidden)]
    pub async fn claim_plan(&self, request: &crate::ClaimRequest) -> Result<String, StoreError> {
        self.explain_claim(request, "EXPLAIN QUERY PLAN", 3).await
    }

    /// The query plan of the `DELETE` of a purge's batch of runs, as `EXPLAIN QUERY PLAN`
    /// prints it; nothing is deleted (for tests that check a purge stays indexed).
    #[doc(hidden)]
    pub async fn purge_plan(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        purge: crate::PurgeRuns,
    ) -> Result<String, StoreError> {
        self.explain_purge(lease, now, purge, "EXPLAIN QUERY PLAN", 3)
            .await
    }

    /// Opens (creating if missing) the database a URL names, with default options, and
    /// applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(SqliteOptions::new(url)).await
    }

    /// Opens a database with the given options.
    pub async fn connect_with(options: SqliteOptions) -> Result<Self, StoreError> {
        // Several processes opening one fresh file at once race for the lock that switching
        // it to WAL and migrating need; SQLite answers "database is locked" at once for some
        // of those steps instead of waiting out the busy timeout. Such an open is retried.
        let started = std::time::Instant::now();
        loop {
            match Self::open_once(&options).await {
                Err(error) if error.is_transient() && started.elapsed() < options.busy_timeout => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                result => return result,
            }
        }
    }

    async fn open_once(options: &SqliteOptions) -> Result<Self, StoreError> {
        let in_memory = options.url.contains(":memory:") || options.url.contains("mode=memory");
        let connect = SqliteConnectOptions::from_str(&options.url).map_err(|error| {
            StoreError::UnsupportedUrl {
                url: options.url.clone(),
                reason: error.to_string(),
            }
        })?;
        if !in_memory {
            check_folder(&options.url, connect.get_filename())?;
        }
        let checking = options.migration == MigrationMode::Check;
        if checking && !in_memory && !connect.get_filename().exists() {
            return Err(StoreError::CannotOpen {
                url: options.url.clone(),
                reason: format!(
                    "there is no database file `{}` (checking changes nothing, so it creates \
                     none); run `aiki migrate` or start a worker first",
                    connect.get_filename().display()
                ),
            });
        }
        let connect = connect
            .create_if_missing(!checking)
            .busy_timeout(options.busy_timeout)
            .synchronous(match options.synchronous {
                SqliteSynchronous::Off => DriverSynchronous::Off,
                SqliteSynchronous::Normal => DriverSynchronous::Normal,
                SqliteSynchronous::Full => DriverSynchronous::Full,
                SqliteSynchronous::Extra => DriverSynchronous::Extra,
            });
        let connect = if in_memory {
            connect
        } else {
            connect.journal_mode(SqliteJournalMode::Wal)
        };
        // One writer connection, kept open for the store's life (an in-memory database lives
        // exactly as long as its connection).
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .acquire_timeout(Duration::from_secs(60))
            // A dead connection shows up as an error on use, which callers retry; a ping
            // before every statement would double the round trips.
            .test_before_acquire(false)
            .connect_with(connect.clone())
            .await
            .map_err(|error| driver::SQLITE.map_error(error))?;
        let reader = if in_memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(options.read_connections.max(1))
                .test_before_acquire(false)
                .connect_lazy_with(connect)
        };
        let dialect = SqliteDialect {
            lane: driver::Lane::new(writer.clone()),
            writer,
            reader,
            reads_on_writer: in_memory,
        };
        if options.migration != MigrationMode::Never {
            refuse_a_foreign_file(&dialect, &options.url).await?;
        }
        SqlStore::open(dialect, options.migration, options.schema_cap)
            .await
            .map(|store| store.with_payload_limit(options.payload_limit))
    }
}
