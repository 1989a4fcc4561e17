//! How to open a [`SqliteStore`](super::SqliteStore): the file, its durability and lock
//! settings, the read pool, the schema's migration and the payload limit.

use std::time::Duration;

use crate::MigrationMode;
use crate::sql::setters;

/// SQLite's `synchronous` setting: how hard a commit waits for the disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SqliteSynchronous {
    /// No syncs: fastest, a power loss may corrupt the database.
    Off,
    /// The default with WAL: durable across process crashes; a power loss may lose the last
    /// commits but never corrupts the database.
    #[default]
    Normal,
    /// Sync on every commit: durable across power loss.
    Full,
    /// As `Full`, plus a sync of the directory.
    Extra,
}

/// How to open a [`SqliteStore`](super::SqliteStore).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// `sqlite://path/to/file.db` (created if missing), `sqlite:file.db` or `sqlite::memory:`.
    pub url: String,
    /// The `synchronous` pragma (default [`SqliteSynchronous::Normal`]).
    pub synchronous: SqliteSynchronous,
    /// How long a statement waits for another process's lock on the file (default 5 s).
    pub busy_timeout: Duration,
    /// Connections in the read pool (default 4; unused for an in-memory database).
    pub read_connections: u32,
    /// What connecting does with the schema (default [`MigrationMode::Apply`]).
    pub migration: MigrationMode,
    /// Plays an earlier release: the store knows only the migrations up to this version and
    /// renders its statements for that schema. For the rolling-deploy tests, which run the
    /// previous release and this one side by side on one database.
    #[doc(hidden)]
    pub schema_cap: Option<i64>,
    /// The largest payload the store keeps, in bytes of JSON text (default
    /// [`DEFAULT_PAYLOAD_LIMIT`](crate::limit::DEFAULT_PAYLOAD_LIMIT); see [`crate::limit`]).
    pub payload_limit: usize,
}

impl SqliteOptions {
    /// The defaults for a URL.
    pub fn new(url: impl Into<String>) -> Self {
        SqliteOptions {
            url: url.into(),
            synchronous: SqliteSynchronous::Normal,
            busy_timeout: Duration::from_secs(5),
            read_connections: 4,
            migration: MigrationMode::Apply,
            schema_cap: None,
            payload_limit: crate::limit::DEFAULT_PAYLOAD_LIMIT,
        }
    }

    setters! {
        /// Sets the `synchronous` pragma.
        synchronous: SqliteSynchronous,
        /// Sets the busy timeout.
        busy_timeout: Duration,
        /// Sets what connecting does with the schema.
        migration: MigrationMode,
        /// Sets the largest payload the store keeps, in bytes of JSON text.
        payload_limit: usize,
    }

    /// Whether to apply pending migrations when connecting (`false`: [`MigrationMode::Never`]).
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migration = migrate.into();
        self
    }

    /// Plays the release whose newest migration is `version` (see
    /// [`schema_cap`](SqliteOptions::schema_cap)).
    #[doc(hidden)]
    pub fn as_release_at(mut self, version: i64) -> Self {
        self.schema_cap = Some(version);
        self
    }

    /// Sets the size of the read pool.
    pub fn read_connections(mut self, connections: u32) -> Self {
        self.read_connections = connections.max(1);
        self
    }
}
