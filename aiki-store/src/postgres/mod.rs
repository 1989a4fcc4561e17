//! The scale-out backend: PostgreSQL, many workers on many machines sharing one database.
//!
//! Claims use `FOR UPDATE SKIP LOCKED`, so concurrent claimers never wait on each other and
//! never take the same run. Writes that check a revision without incrementing it lock the run
//! row `FOR SHARE` in the same statement: the check then sees the latest committed revision
//! (not the statement's snapshot), so a write by an executor whose claim was released is
//! refused even if the release committed while the write was in flight. Operations whose
//! outcome depends on other rows (an event or a child that may have arrived, a parent that may
//! be waiting) first lock the run row, then decide in a fresh statement, so a wake-up that
//! races a suspension is never lost.
//!
//! JSON is stored as `TEXT`: the runtime never queries inside it, and `TEXT` keeps it byte for
//! byte (JSONB reorders keys, drops duplicate keys and refuses `\u0000`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres};

use crate::sql::dialect::DialectStatements;
use crate::sql::driver::{self, Driver};
use crate::sql::statements::Level;
use crate::sql::{Dialect, SqlStore, Tx, setters};
use crate::{MigrationMode, StoreError};

mod install;
mod listen;
mod statements;
mod url;

/// The embedded migrations of the PostgreSQL schema.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The session advisory lock one migrator holds while it migrates (any schema of the database).
const MIGRATION_LOCK: i64 = 7_411_803_270_455_829_812;

/// The schema of Aiki's tables unless told otherwise.
pub const DEFAULT_SCHEMA: &str = "aiki";

/// How to open a [`PostgresStore`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// `postgres://user:password@host:port/database`.
    pub url: String,
    /// Connections in the pool (default 10).
    pub max_connections: u32,
    /// How long a call waits for a free connection before failing as
    /// [`StoreError::Unavailable`] (default 30 s).
    pub acquire_timeout: Duration,
    /// The schema that holds Aiki's tables and its own migration bookkeeping, apart from the
    /// host application's (default `aiki`; a URL may name it with `aiki_schema=NAME`).
    pub schema: String,
    /// What connecting does with the schema (default [`MigrationMode::Apply`]).
    pub migration: MigrationMode,
    /// Whose clock claims are taken, refreshed and judged stale by (default
    /// [`ClaimClock::Database`]; a URL may say `aiki_claim_clock=caller`).
    pub claim_clock: ClaimClock,
    /// Plays an earlier release: the store knows only the migrations up to this version and
    /// renders its statements for that schema. For the rolling-deploy tests, which run the
    /// previous release and this one side by side on one database.
    #[doc(hidden)]
    pub schema_cap: Option<i64>,
    /// Where to `LISTEN` for ready hints (see
    /// [`ExecutorStore::ready_signals`](crate::ExecutorStore::ready_signals)), when not `url`:
    /// a direct connection to the database for deployments whose `url` goes through a
    /// transaction-pooling proxy (PgBouncer in `transaction` mode), which cannot hold a
    /// `LISTEN`. A URL may name it with `aiki_listen_url=URL`, percent-encoded.
    pub listen_url: Option<String>,
    /// The largest payload the store keeps, in bytes of JSON text (default
    /// [`DEFAULT_PAYLOAD_LIMIT`](crate::limit::DEFAULT_PAYLOAD_LIMIT); see [`crate::limit`]).
    pub payload_limit: usize,
}

/// Whose clock times a claim: when it was taken, when it was last refreshed, and whether it
/// has gone stale.
///
/// With [`Database`](ClaimClock::Database) (the default on PostgreSQL), the server's `now()`
/// stamps every claim and heartbeat and is what recovery compares them with, so a worker
/// machine whose clock is off by minutes neither releases the runs of live workers nor keeps
/// a dead worker's runs for longer. Every other time the runtime stores (wake-ups, retries,
/// when something happened) still comes from the worker's own clock, and so does the rare
/// `running` row without a heartbeat, which recovery judges by its last change.
/// [`Caller`](ClaimClock::Caller) uses the `now` each call passes instead, so a test's
/// manual clock decides staleness too. All processes on one database should use the same
/// setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimClock {
    /// The database server's clock.
    #[default]
    Database,
    /// The `now` the caller of each store operation passes (its worker's clock).
    Caller,
}

impl PostgresOptions {
    /// The defaults for a URL.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresOptions {
            url: url.into(),
            max_connections: 10,
            acquire_timeout: Duration::from_secs(30),
            schema: DEFAULT_SCHEMA.to_owned(),
            migration: MigrationMode::Apply,
            claim_clock: ClaimClock::Database,
            schema_cap: None,
            listen_url: None,
            payload_limit: crate::limit::DEFAULT_PAYLOAD_LIMIT,
        }
    }

    /// Sets the pool size.
    pub fn max_connections(mut self, connections: u32) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    setters! {
        /// Sets how long a call waits for a free connection.
        acquire_timeout: Duration,
        /// Sets what connecting does with the schema.
        migration: MigrationMode,
        /// Sets whose clock times claims.
        claim_clock: ClaimClock,
        /// Sets the largest payload the store keeps, in bytes of JSON text.
        payload_limit: usize,
    }

    /// Plays the release whose newest migration is `version` (see
    /// [`schema_cap`](PostgresOptions::schema_cap)).
    #[doc(hidden)]
    pub fn as_release_at(mut self, version: i64) -> Self {
        self.schema_cap = Some(version);
        self
    }

    /// Sets the schema that holds Aiki's tables.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets where to `LISTEN` for ready hints (see
    /// [`listen_url`](PostgresOptions::listen_url)).
    pub fn listen_url(mut self, url: impl Into<String>) -> Self {
        self.listen_url = Some(url.into());
        self
    }

    /// Whether to apply pending migrations when connecting (`false`: [`MigrationMode::Never`]).
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migration = migrate.into();
        self
    }
}

/// The PostgreSQL backend: the SQL store over PostgreSQL's dialect.
pub type PostgresStore = SqlStore<PgDialect>;

/// PostgreSQL's driver: one pool, whose connections see Aiki's schema first.
#[derive(Clone, Debug)]
pub struct PgDialect {
    pool: PgPool,
    /// Where Aiki's tables live.
    schema: String,
    /// Whose clock times claims.
    claim_clock: ClaimClock,
    /// Where the connection's own search path put them before they had a schema of their own
    /// (an install of v0.1.0), if that is elsewhere.
    legacy_schema: Option<String>,
    /// Where ready hints are listened for.
    listen: PgConnectOptions,
}

impl Dialect for PgDialect {
    type Db = Postgres;

    const DRIVER: Driver<Postgres> = driver::POSTGRES;

    fn statements(&self, level: Level) -> DialectStatements {
        statements::statements(self, level)
    }

    async fn begin(&self) -> Result<Tx<Self>, StoreError> {
        driver::POSTGRES.begin(&self.pool, None).await
    }

    driver::dialect_methods!(self => (&self.pool, &self.pool));

    fn claim_time(&self, now: &str) -> String {
        match self.claim_clock {
            // `now` stays in the statement (ignored) so that it binds the same parameters.
            ClaimClock::Database => {
                format!("COALESCE((EXTRACT(EPOCH FROM now()) * 1000)::bigint, {now})")
            }
            ClaimClock::Caller => now.to_owned(),
        }
    }

    /// Creates Aiki's schema if missing and moves an earlier release's install into it, in one
    /// transaction under an advisory lock; then the migrator (which holds its own advisory
    /// lock) brings the schema up to date.
    async fn migrate(&self, migrator: &sqlx::migrate::Migrator) -> Result<(), StoreError> {
        let map = |error| driver::POSTGRES.map_error(error);
        let mut connection = self.pool.acquire().await.map_err(map)?;
        {
            use sqlx::Acquire;
            let mut tx = connection.begin().await.map_err(map)?;
            sqlx::query("SELECT pg_advisory_xact_lock(7411803270455829811)")
                .execute(&mut *tx)
                .await
                .map_err(map)?;
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                    .bind(&self.schema)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(map)?;
            if !exists {
                sqlx::query(&format!("CREATE SCHEMA \"{}\"", self.schema))
                    .execute(&mut *tx)
                    .await
                    .map_err(map)?;
            }
            if let Some(legacy) = &self.legacy_schema {
                install::move_install(&mut tx, legacy, &self.schema, &MIGRATOR).await?;
            }
            tx.commit().await.map_err(map)?;
        }
        // One migrator at a time, under a lock taken by polling rather than by sqlx's blocking
        // `pg_advisory_lock`: an index built concurrently waits for every transaction older than
        // it in the database, a session blocked on the lock among them, while the session
        // building it holds the lock (PostgreSQL reports a deadlock). A poll is a short
        // statement, so a waiting migrator holds no snapshot.
        while !sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
            .bind(MIGRATION_LOCK)
            .fetch_one(&mut *connection)
            .await
            .map_err(map)?
        {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let unlocked = sqlx::migrate::Migrator {
            migrations: migrator.migrations.clone(),
            ignore_missing: migrator.ignore_missing,
            locking: false,
            no_tx: migrator.no_tx,
        };
        // `run_direct` rather than `run`: `run`'s `Acquire` bound makes the future not `Send`
        // (sqlx's own workaround, see `Migrator::run_direct`).
        let migrated = unlocked
            .run_direct(&mut *connection)
            .await
            .map_err(|error| driver::POSTGRES.map_migrate_error(error));
        let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(MIGRATION_LOCK)
            .execute(&mut *connection)
            .await;
        if unlocked.is_err() {
            // The session may still hold the lock: close it rather than pool it.
            connection.detach();
        }
        migrated
    }

    fn migrator() -> &'static sqlx::migrate::Migrator {
        &MIGRATOR
    }

    // Run documents read the `wait_set` column of migration 0006, and the wake-ups need its
    // triggers; the timeline, the workers and the catalog are the tables of migrations 0007 to
    // 0009; run documents read the failed call's columns of 0010.
    const OLDEST_READABLE: i64 = 10;

    const OPERATIONS: i64 = 11;

    const CONTRACT: i64 = 12;

    const LEASES: i64 = 14;

    const CONFIG: i64 = 17;
    const KEYS: i64 = 18;
    const ANSWERS: i64 = 19;
    const ANSWER_DIGESTS: i64 = 28;
    const ENDPOINTS: i64 = 21;
    const SCHEDULES: i64 = 22;
    const ENDED_RUNS: i64 = 23;
    const CONTINUATION: i64 = 25;
    const READY_NOTIFY: i64 = 20;
    const START_HINTS: i64 = 26;
    // A batch through a server is a transaction of four round trips; one at a time, starts
    // ran slower than the single-start transactions they replaced, which ran side by side.
    const START_FLIGHTS: usize = 4;

    fn ready_signals(&self) -> Option<crate::ReadySignals> {
        Some(listen::signals(&self.listen, listen::channel(&self.schema)))
    }

    fn ready_channel(&self) -> Option<String> {
        Some(listen::channel(&self.schema))
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

impl PostgresStore {
    /// The query plan of `request`'s claim, as `EXPLAIN` prints it; nothing is claimed (for
    /// tests that check a claim stays indexed).
    #[doc(hidden)]
    pub async fn claim_plan(&self, request: &crate::ClaimRequest) -> Result<String, StoreError> {
        self.explain_claim(request, "EXPLAIN", 0).await
    }

    /// The statements that read a later batch of the change stream: its first page, and its
    /// later pages (for tests that check how PostgreSQL plans them; see
    /// [`ReadStore::changes_since`](crate::ReadStore::changes_since)).
    #[doc(hidden)]
    pub fn change_page_statements(&self) -> Option<(String, String)> {
        match &self.sql.own.outbox {
            Some(crate::sql::outbox::OutboxStatements::Snapshots {
                page, page_after, ..
            }) => Some((page.clone(), page_after.clone())),
            _ => None,
        }
    }

    /// Connects with default options and applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(PostgresOptions::new(url)).await
    }

    /// Connects with the given options.
    pub async fn connect_with(options: PostgresOptions) -> Result<Self, StoreError> {
        let unsupported = |reason: String| StoreError::UnsupportedUrl {
            url: crate::error::redact(&options.url),
            reason,
        };
        let (url, named) = url::take_aiki_parameters(&options.url).map_err(unsupported)?;
        let schema = named.schema.unwrap_or_else(|| options.schema.clone());
        let claim_clock = named.claim_clock.unwrap_or(options.claim_clock);
        if !install::is_plain_identifier(&schema) {
            return Err(unsupported(format!(
                "`{schema}` is not a plain schema name (letters, digits and `_`, not starting \
                 with a digit)"
            )));
        }
        let theirs =
            PgConnectOptions::from_str(&url).map_err(|error| unsupported(error.to_string()))?;
        let ours = theirs.clone().options([("search_path", schema.as_str())]);
        let listen = match named.listen_url.or(options.listen_url.clone()) {
            Some(listen_url) => PgConnectOptions::from_str(&listen_url).map_err(|error| {
                unsupported(format!(
                    "the listen URL `{}`: {error}",
                    crate::error::redact(&listen_url)
                ))
            })?,
            None => theirs.clone(),
        };
        // One direct connection first: a pool retries a refused connection until its acquire
        // timeout, but a server that does not answer should be reported at once. It also tells
        // where an install of v0.1.0 (tables in the connection's own schema) would be.
        let mut probe = PgConnection::connect_with(&theirs)
            .await
            .map_err(|error| driver::POSTGRES.map_error(error))?;
        let current: Option<String> = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(&mut probe)
            .await
            .map_err(|error| driver::POSTGRES.map_error(error))?;
        let _ = probe.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            // A dead connection shows up as an error on use, which callers retry; a ping
            // before every statement would double the round trips.
            .test_before_acquire(false)
            .connect_lazy_with(ours);
        let dialect = PgDialect {
            pool,
            legacy_schema: current.filter(|current| *current != schema),
            schema,
            claim_clock,
            listen,
        };
        SqlStore::open(dialect, options.migration, options.schema_cap)
            .await
            .map(|store| store.with_payload_limit(options.payload_limit))
    }
}
