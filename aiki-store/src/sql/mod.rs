//! One implementation of [`Store`](crate::Store) for both SQL databases.
//!
//! [`SqlStore<D>`](SqlStore) holds every operation whose logic is the same on SQLite and
//! PostgreSQL, written once: its statements ([`statements`]), its parameter lists
//! ([`binds`]), its row decoding ([`decode`]), its error mapping ([`error`]) and its group
//! commit of entries ([`batch`]). A [`Dialect`] supplies what truly differs: the driver, the
//! rendering of the shared statement text, which error codes are transient, the statements
//! written in one database's own syntax, and the two operations whose control flow differs
//! (a transition's locking, an event's insert-and-wake). The public `SqliteStore` and
//! `PostgresStore` are thin wrappers that [`store_impl!`] turns into [`Store`]s.

pub(crate) mod batch;
pub(crate) mod binds;
pub(crate) mod decode;
pub(crate) mod dialect;
pub(crate) mod driver;
pub(crate) mod error;
mod fork;
mod listing;
mod ops;
pub(crate) mod statements;
mod workers;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{RunId, RunStatus, StoreError};

use batch::{Entries, EntryBatcher};
pub(crate) use dialect::{Dialect, On, Param, Row, Tx};
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

/// A store on one SQL database.
#[derive(Debug)]
pub(crate) struct SqlStore<D: Dialect> {
    pub(crate) dialect: D,
    pub(crate) sql: Arc<Statements>,
    statements: Arc<StatementCounter>,
    entries: EntryBatcher<Entries<D>>,
}

impl<D: Dialect> SqlStore<D> {
    /// A store over a connected dialect.
    pub(crate) fn new(dialect: D) -> Self {
        let statements = Arc::new(StatementCounter::default());
        let sql = Arc::new(Statements::new(&dialect));
        SqlStore {
            entries: EntryBatcher::new(Entries {
                dialect: dialect.clone(),
                sql: sql.clone(),
                statements: statements.clone(),
            }),
            dialect,
            sql,
            statements,
        }
    }

    /// The backend's name.
    pub(crate) fn backend(&self) -> &'static str {
        D::DRIVER.backend
    }

    /// How many statements (round trips) this store has sent, `BEGIN` and `COMMIT` included.
    pub(crate) fn statements(&self) -> u64 {
        self.statements.get()
    }

    /// Stops the entry writer once the writes already queued are done.
    pub(crate) fn close_writer(&self) {
        self.entries.close();
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

    /// Does with the schema what `mode` says (see [`MigrationMode`](crate::MigrationMode)).
    pub(crate) async fn prepare(&self, mode: crate::MigrationMode) -> Result<(), StoreError> {
        match mode {
            crate::MigrationMode::Apply => self.dialect.migrate().await,
            crate::MigrationMode::Check => self.check_schema().await,
            crate::MigrationMode::Never => Ok(()),
        }
    }

    /// Checks, changing nothing, that the database's schema is one this release reads.
    async fn check_schema(&self) -> Result<(), StoreError> {
        let exists = self
            .fetch_optional(On::Read, &self.sql.own.bookkeeping_exists, &[])
            .await?
            .map(|row| row.int(0))
            .transpose()?
            .flatten()
            .unwrap_or_default();
        let mut applied = crate::migration::Applied::default();
        if exists > 0 {
            let rows = self
                .fetch(On::Read, &self.sql.applied_migrations, &[])
                .await?;
            for row in rows {
                let version = row.int(0)?.unwrap_or_default();
                applied.versions.push((version, row.int(1)? == Some(1)));
            }
        }
        let known: Vec<i64> = D::migrator().iter().map(|m| m.version).collect();
        crate::migration::check(D::DRIVER.backend, &applied, &known, D::OLDEST_READABLE)
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

/// Implements [`Store`](crate::Store) for a public store type whose field `inner` is a
/// [`SqlStore`], by calling the operations of the one implementation.
macro_rules! store_impl {
    ($store:ty) => {
        impl $store {
            /// Applies pending migrations. Safe to run from several processes at once (they
            /// are serialized by the database's lock); a database migrated by newer code is
            /// [`StoreError::Migration`](crate::StoreError::Migration).
            pub async fn migrate(&self) -> Result<(), $crate::StoreError> {
                $crate::sql::Dialect::migrate(&self.inner.dialect).await
            }

            /// Checks, changing nothing, that the schema is one this release reads correctly:
            /// not newer than its own, not older than the oldest it reads; the error names
            /// both versions.
            pub async fn check_schema(&self) -> Result<(), $crate::StoreError> {
                self.inner.prepare($crate::MigrationMode::Check).await
            }

            /// How many statements (round trips) this store has sent, `BEGIN` and `COMMIT`
            /// included.
            pub fn statements(&self) -> u64 {
                self.inner.statements()
            }

            /// Closes the connections, waiting for statements in flight.
            pub async fn close(&self) {
                self.inner.close_writer();
                $crate::sql::Dialect::close(&self.inner.dialect).await;
            }
        }

        #[::async_trait::async_trait]
        impl $crate::Store for $store {
            fn backend(&self) -> &'static str {
                self.inner.backend()
            }

            async fn create_run(
                &self,
                run: $crate::NewRun,
            ) -> Result<$crate::CreateOutcome, $crate::StoreError> {
                self.inner.create_run(run).await
            }

            async fn get_run(
                &self,
                id: $crate::RunId,
            ) -> Result<$crate::RunRecord, $crate::StoreError> {
                self.inner.get_run(id).await
            }

            async fn load_history(
                &self,
                id: $crate::RunId,
            ) -> Result<$crate::History, $crate::StoreError> {
                self.inner.load_history(id).await
            }

            async fn transition(
                &self,
                id: $crate::RunId,
                expected: u64,
                transition: $crate::Transition,
            ) -> Result<$crate::RunRecord, $crate::StoreError> {
                self.inner.transition(id, expected, transition).await
            }

            async fn claim(
                &self,
                request: $crate::ClaimRequest,
            ) -> Result<Vec<$crate::RunRecord>, $crate::StoreError> {
                self.inner.claim(request).await
            }

            async fn refresh_claim(
                &self,
                id: $crate::RunId,
                owner: &str,
                expected: u64,
                now: $crate::Millis,
            ) -> Result<(), $crate::StoreError> {
                self.inner.refresh_claim(id, owner, expected, now).await
            }

            async fn put_entry(
                &self,
                expected: u64,
                entry: $crate::EntryRecord,
            ) -> Result<(), $crate::StoreError> {
                self.inner.put_entry(expected, entry).await
            }

            async fn start_child(
                &self,
                expected: u64,
                entry: $crate::EntryRecord,
                child: $crate::NewRun,
            ) -> Result<$crate::RunRecord, $crate::StoreError> {
                self.inner.start_child(expected, entry, child).await
            }

            async fn put_sleep(
                &self,
                expected: u64,
                sleep: $crate::SleepRecord,
            ) -> Result<(), $crate::StoreError> {
                self.inner.put_sleep(expected, sleep).await
            }

            async fn append_event(
                &self,
                event: $crate::NewEvent,
            ) -> Result<$crate::AppendOutcome, $crate::StoreError> {
                self.inner.append_event(event).await
            }

            async fn wake_due(&self, now: $crate::Millis) -> Result<u64, $crate::StoreError> {
                self.inner.wake_due(now).await
            }

            async fn release_stale_claims(
                &self,
                now: $crate::Millis,
                idle_timeout_ms: i64,
            ) -> Result<Vec<$crate::RunId>, $crate::StoreError> {
                self.inner.release_stale_claims(now, idle_timeout_ms).await
            }

            async fn stall_undelivered(
                &self,
                now: $crate::Millis,
                max_age_ms: i64,
            ) -> Result<u64, $crate::StoreError> {
                self.inner.stall_undelivered(now, max_age_ms).await
            }

            async fn run_counts(&self) -> Result<Vec<$crate::RunCounts>, $crate::StoreError> {
                self.inner.run_counts().await
            }

            async fn timeline(
                &self,
                id: $crate::RunId,
            ) -> Result<Vec<$crate::StatusChange>, $crate::StoreError> {
                self.inner.timeline(id).await
            }

            async fn record_worker(
                &self,
                worker: $crate::WorkerRecord,
                now: $crate::Millis,
            ) -> Result<$crate::WorkerRecord, $crate::StoreError> {
                self.inner.record_worker(worker, now).await
            }

            async fn list_workers(
                &self,
                now: $crate::Millis,
                within_ms: i64,
            ) -> Result<Vec<$crate::WorkerRecord>, $crate::StoreError> {
                self.inner.list_workers(now, within_ms).await
            }

            async fn record_event_slot(
                &self,
                expected: u64,
                slot: $crate::EventRecord,
            ) -> Result<$crate::EventRecord, $crate::StoreError> {
                self.inner.record_event_slot(expected, slot).await
            }

            async fn fork_run(
                &self,
                fork: $crate::NewFork,
            ) -> Result<$crate::CreateOutcome, $crate::StoreError> {
                self.inner.fork_run(fork).await
            }

            async fn publish_catalog(
                &self,
                entry: $crate::CatalogEntry,
                now: $crate::Millis,
            ) -> Result<$crate::CatalogEntry, $crate::StoreError> {
                self.inner.publish_catalog(entry, now).await
            }

            async fn catalog(&self) -> Result<Vec<$crate::CatalogEntry>, $crate::StoreError> {
                self.inner.catalog().await
            }

            async fn list_runs(
                &self,
                request: $crate::ListRuns,
            ) -> Result<$crate::RunPage, $crate::StoreError> {
                self.inner.list_runs(request).await
            }
        }
    };
}
pub(crate) use store_impl;
