//! One implementation of [`Store`](crate::Store) for both SQL databases.
//!
//! [`SqlStore<D>`](SqlStore) holds every operation whose logic is the same on SQLite and
//! PostgreSQL, written once: its statements ([`statements`]), its parameter lists
//! ([`binds`]), its row decoding ([`decode`]), its error mapping ([`error`]) and the writer
//! of its group commit of entries ([`batch`], behind [`crate::batch::EntryBatcher`]) and of
//! starts ([`starts`]). A [`Dialect`] supplies what truly differs: the driver, the
//! rendering of the shared statement text, which error codes are transient, the statements
//! written in one database's own syntax, and the two operations whose control flow differs
//! (a transition's locking, an event's insert-and-wake). `SqliteStore` and `PostgresStore` are
//! `SqlStore` over their dialect; [`roles`] implements the store contract for it once.

mod actions;
mod answers;
pub(crate) mod batch;
pub(crate) mod binds;
mod claims;
mod config;
mod continuation;
pub(crate) mod decode;
pub(crate) mod dialect;
pub(crate) mod driver;
mod endpoints;
pub(crate) mod error;
mod fork;
mod hints;
mod keys;
mod leases;
mod listing;
mod ops;
pub(crate) mod outbox;
mod purge;
mod roles;
mod schedules;
mod starts;
pub(crate) mod statements;
mod transitions;
mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::migration::{Accepted, AppliedMigration, Found, MigrationReport};
use crate::{MigrationMode, RunId, RunStatus, StoreError};

use dialect::params;

use crate::batch::EntryBatcher;
use batch::Entries;
pub(crate) use dialect::{Dialect, On, Param, Row, Tx};
pub(crate) use statements::Level;
use statements::Statements;

/// Counts the statements a store sends to its database.
#[derive(Debug, Default)]
pub(crate) struct StatementCounter(AtomicU64);

impl StatementCounter {
    /// Counts `n` statements (round trips).
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The total so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A store on one SQL database: [`SqliteStore`](crate::sqlite::SqliteStore) and
/// [`PostgresStore`](crate::postgres::PostgresStore) are its two kinds. Every operation of the
/// store contract is written once here; the database's dialect supplies what differs.
#[derive(Debug)]
pub struct SqlStore<D> {
    pub(crate) dialect: D,
    pub(crate) sql: Arc<Statements>,
    /// The schema the statements are rendered for.
    pub(crate) level: Level,
    /// The newest migration this store plays the release of (`None`: all of them).
    cap: Option<i64>,
    statements: Arc<StatementCounter>,
    entries: EntryBatcher<Entries<D>>,
    /// Group commit of the starts that need no transaction of their own.
    starts: starts::StartBatcher<D>,
    /// What opening did to the schema.
    report: MigrationReport,
    /// Whether the schema's trigger sends ready hints (see [`Dialect::ready_signals`]).
    ready_notify: bool,
    /// The largest payload it keeps.
    pub(crate) limit: crate::limit::PayloadLimit,
    /// Where the store, not the schema's trigger, sends the ready hints of the runs it starts
    /// (see `hints`).
    start_hints: Option<hints::StartHints>,
}

impl<D: Dialect> SqlStore<D> {
    /// A store over a connected dialect, its statements rendered for a schema at `level`.
    pub(crate) fn new(dialect: D, level: Level, cap: Option<i64>) -> Self {
        let statements = Arc::new(StatementCounter::default());
        let sql = Arc::new(Statements::new(&dialect, level));
        let start_hints = sql
            .insert_run_quiet
            .as_ref()
            .and(dialect.ready_channel())
            .map(hints::StartHints::new);
        SqlStore {
            starts: starts::StartBatcher::new(
                dialect.clone(),
                level,
                start_hints.is_some(),
                statements.clone(),
                &sql.select_by_reference,
            ),
            entries: EntryBatcher::new(Entries {
                dialect: dialect.clone(),
                sql: sql.clone(),
                statements: statements.clone(),
            }),
            dialect,
            sql,
            level,
            cap,
            statements,
            report: MigrationReport::default(),
            ready_notify: false,
            limit: crate::limit::PayloadLimit::default(),
            start_hints,
        }
    }

    /// Keeps payloads of up to `bytes` of JSON text, instead of
    /// [`DEFAULT_PAYLOAD_LIMIT`](crate::limit::DEFAULT_PAYLOAD_LIMIT) (see [`crate::limit`]).
    pub fn with_payload_limit(mut self, bytes: usize) -> Self {
        self.limit = crate::limit::PayloadLimit::new(bytes);
        self
    }

    /// Opens a store over a connected dialect: does with the schema what `mode` says, as a
    /// release whose newest migration is the dialect's newest at or below `cap` (all of them
    /// without one), and renders the statements for the schema it accepted.
    pub(crate) async fn open(
        dialect: D,
        mode: MigrationMode,
        cap: Option<i64>,
    ) -> Result<Self, StoreError> {
        let store = SqlStore::new(dialect, Level::CURRENT, cap);
        let (accepted, report) = store.prepare(mode).await?;
        let level = Level::at::<D>(accepted.render_at);
        let mut store = if level == store.level {
            store
        } else {
            SqlStore::new(store.dialect.clone(), level, cap)
        };
        store.report = report;
        store.ready_notify = accepted.render_at >= D::READY_NOTIFY;
        Ok(store)
    }

    /// The process's feed of ready hints, when the schema sends them.
    pub(crate) fn ready_signals(&self) -> Option<crate::ReadySignals> {
        if self.ready_notify {
            self.dialect.ready_signals()
        } else {
            None
        }
    }

    /// The backend's name.
    pub(crate) fn backend(&self) -> &'static str {
        D::DRIVER.backend
    }

    /// Runs a statement, counting it; the rows it changed.
    pub(crate) async fn execute(
        &self,
        on: On<'_, Tx<D>>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<u64, StoreError> {
        self.statements.add(1);
        self.dialect.execute(on, sql, params).await
    }

    /// Runs a statement, counting it; the rows it returned.
    pub(crate) async fn fetch(
        &self,
        on: On<'_, Tx<D>>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, StoreError> {
        self.statements.add(1);
        self.dialect.fetch(on, sql, params).await
    }

    /// The query plan of `sql` with `params`: the text in column `column` of each row that
    /// `explain` (the database's `EXPLAIN` keyword) followed by the statement returns, one line
    /// each. The statement itself does not run.
    pub(crate) async fn explain(
        &self,
        on: On<'_, Tx<D>>,
        explain: &str,
        sql: &str,
        params: &[Param<'_>],
        column: usize,
    ) -> Result<String, StoreError> {
        let rows = self.fetch(on, &format!("{explain} {sql}"), params).await?;
        let mut lines = Vec::with_capacity(rows.len());
        for row in &rows {
            lines.push(row.text(column)?.unwrap_or_default());
        }
        Ok(lines.join("\n"))
    }

    /// Runs a statement that returns at most one row.
    pub(crate) async fn fetch_optional(
        &self,
        on: On<'_, Tx<D>>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<Row>, StoreError> {
        Ok(self.fetch(on, sql, params).await?.into_iter().next())
    }

    /// The first column of a statement's first row, as text (`None` without a row).
    pub(crate) async fn fetch_text(
        &self,
        on: On<'_, Tx<D>>,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Option<String>, StoreError> {
        match self.fetch_optional(on, sql, params).await? {
            Some(mut row) => row.take_text(0),
            None => Ok(None),
        }
    }

    /// Opens a write transaction, counting its `BEGIN`.
    pub(crate) async fn begin(&self) -> Result<Tx<D>, StoreError> {
        self.statements.add(1);
        self.dialect.begin().await
    }

    /// Commits, counting its `COMMIT`.
    pub(crate) async fn commit(&self, tx: Tx<D>) -> Result<(), StoreError> {
        self.statements.add(1);
        D::commit(tx).await
    }

    /// The error for a failed revision check: reads the actual revision (failure path only).
    pub(crate) async fn check_failed(
        &self,
        on: On<'_, Tx<D>>,
        id: RunId,
        expected: u64,
    ) -> StoreError {
        match self
            .fetch_optional(on, &self.sql.revision, &[id.into()])
            .await
        {
            Ok(row) => match row.map(|row| row.int(0)).transpose() {
                Ok(actual) => decode::check_failed(id, expected, actual.flatten()),
                Err(error) => error,
            },
            Err(error) => error,
        }
    }

    /// Does with the schema what `mode` says (see [`MigrationMode`]), as a release whose
    /// newest migration is the newest at or below the store's cap. The statements stay
    /// rendered for the schema the store opened on: a store that migrates a schema further
    /// uses its new columns once reopened.
    pub(crate) async fn prepare(
        &self,
        mode: MigrationMode,
    ) -> Result<(Accepted, MigrationReport), StoreError> {
        let cap = self.cap;
        let migrations: Vec<&sqlx::migrate::Migration> = D::migrator()
            .iter()
            .filter(|migration| cap.is_none_or(|cap| migration.version <= cap))
            .collect();
        let known: Vec<i64> = migrations.iter().map(|m| m.version).collect();
        let release = known.iter().copied().max().unwrap_or_default();
        let found = if mode == MigrationMode::Never {
            Found::default()
        } else {
            self.read_schema().await?
        };
        let accepted =
            crate::migration::accept(D::DRIVER.backend, &found, &known, D::OLDEST_READABLE, mode)?;
        let mut report = MigrationReport {
            found: found.at(),
            applied: Vec::new(),
            version: found.at().unwrap_or_default().max(accepted.render_at),
            release,
        };
        if accepted.migrate {
            let migrator = sqlx::migrate::Migrator {
                migrations: std::borrow::Cow::Owned(
                    migrations.iter().map(|m| (*m).clone()).collect(),
                ),
                // A newer release may migrate between the read above and this run.
                ignore_missing: true,
                locking: true,
                no_tx: false,
            };
            self.dialect.migrate(&migrator).await?;
            report.applied = migrations
                .iter()
                .filter(|m| !found.versions.iter().any(|(v, _)| *v == m.version))
                .map(|m| AppliedMigration {
                    version: m.version,
                    description: m.description.to_string(),
                })
                .collect();
            report.version = report.version.max(release);
        }
        Ok((accepted, report))
    }

    /// The schema the database holds: its applied migrations and compatibility record.
    async fn read_schema(&self) -> Result<Found, StoreError> {
        let mut found = Found::default();
        if self.table_exists("_sqlx_migrations").await? {
            let rows = self
                .fetch(On::Read, &self.sql.applied_migrations, &[])
                .await?;
            for row in rows {
                let version = row.int(0)?.unwrap_or_default();
                found.versions.push((version, row.int(1)? == Some(1)));
            }
        }
        if self.table_exists("aiki_compat").await? {
            found.readable_from = self
                .fetch_optional(On::Read, &self.sql.readable_from, &[])
                .await?
                .map(|row| row.int(0))
                .transpose()?
                .flatten();
        }
        Ok(found)
    }

    /// Whether the table `name` exists where the store looks for its tables.
    async fn table_exists(&self, name: &str) -> Result<bool, StoreError> {
        let count = self
            .fetch_optional(On::Read, &self.sql.own.table_exists, &params![name])
            .await?
            .map(|row| row.int(0))
            .transpose()?
            .flatten()
            .unwrap_or_default();
        Ok(count > 0)
    }

    /// Why a guarded transition matched no row: the run is unknown, its revision moved on, or
    /// the table forbids the move from its status.
    pub(crate) async fn explain_refusal(
        &self,
        id: RunId,
        expected: u64,
        to: RunStatus,
    ) -> StoreError {
        let current = match self
            .fetch_optional(On::Write, &self.sql.status_and_revision, &[id.into()])
            .await
        {
            Ok(current) => current,
            Err(error) => return error,
        };
        let Some(current) = current else {
            return StoreError::run_not_found(id);
        };
        let explained = || -> Result<StoreError, StoreError> {
            let actual = current.int(1)?.unwrap_or_default();
            if actual != decode::revision(expected) {
                return Ok(decode::check_failed(id, expected, Some(actual)));
            }
            let from = current.text(0)?.unwrap_or_default();
            Ok(StoreError::InvalidTransition {
                run_id: id,
                from: from.parse().map_err(|error| StoreError::Corrupt {
                    message: format!("{error}"),
                })?,
                to,
            })
        };
        explained().unwrap_or_else(|error| error)
    }
}

/// Builder setters of an options struct: each `name: Type` becomes `name(value)`, which sets
/// the field of that name.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $name: $ty) -> Self {
            self.$name = $name;
            self
        }
    )*};
}
pub(crate) use setters;

impl<D: Dialect> SqlStore<D> {
    /// Applies pending migrations. Safe to run from several processes at once (they are
    /// serialized by the database's lock). A database migrated by a newer release is left as it
    /// is when its compatibility record admits this release, and is
    /// [`StoreError::Schema`](crate::StoreError::Schema) otherwise.
    ///
    /// This store keeps the statements of the schema it opened on: a store opened without
    /// migrating (`migrate(false)`) uses the columns the migration adds only once reopened.
    pub async fn migrate(&self) -> Result<MigrationReport, StoreError> {
        Ok(self.prepare(MigrationMode::Apply).await?.1)
    }

    /// Checks, changing nothing, that the schema is one this release reads correctly: a newer
    /// one that admits this release, its own, or an older one down to the oldest it reads; the
    /// error names both versions.
    pub async fn check_schema(&self) -> Result<(), StoreError> {
        self.prepare(MigrationMode::Check).await?;
        Ok(())
    }

    /// What connecting did to the schema: the version found, the migrations applied, the
    /// version now.
    pub fn migration_report(&self) -> &MigrationReport {
        &self.report
    }

    /// How many statements (round trips) this store has sent, `BEGIN` and `COMMIT` included.
    pub fn statements(&self) -> u64 {
        self.statements.get()
    }

    /// Closes the connections, waiting for statements in flight.
    pub async fn close(&self) {
        self.entries.close();
        self.starts.close();
        self.dialect.close().await;
    }
}
