//! The embedded default: SQLite in WAL mode with one writer connection.
//!
//! Every write goes through one connection (SQLite has one writer anyway; queueing in
//! process is cheaper than `SQLITE_BUSY` retries), reads go through a separate pool so they
//! never wait behind writes. Multi-statement writes run in `BEGIN IMMEDIATE` transactions,
//! so other processes sharing the file are serialized by SQLite's lock, never by a snapshot
//! error. Statements are prepared once per connection and cached (`persistent`).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous as DriverSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};

use crate::batch::{self, EntryBatcher, EntryWriter, Pending};
use crate::sql::{self, StatementCounter, map_error};
use crate::{
    AppendOutcome, ClaimRequest, CreateOutcome, EntryRecord, EventRecord, History, Millis,
    NewEvent, NewRun, RunId, RunRecord, RunStatus, SleepRecord, Store, StoreError, Transition,
};

/// The embedded migrations of the SQLite schema.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// The JSON document of a run row (see `sql::RunRow`).
macro_rules! run_json {
    () => {
        "json_object('id', id, 'workflow', workflow, 'version', version, 'input', input, \
         'input_hash', input_hash, 'reference_id', reference_id, 'pool', pool, 'status', status, \
         'revision', revision, 'attempts', attempts, 'owner', owner, 'heartbeat_at', heartbeat_at, \
         'due_at', due_at, 'queued_at', queued_at, 'output', output, \
         'output_fingerprint', output_fingerprint, 'error_kind', error_kind, \
         'error_message', error_message, 'parent_run_id', parent_run_id, \
         'parent_address', parent_address, 'created_at', created_at, 'updated_at', updated_at)"
    };
}

/// The JSON document of an event row.
macro_rules! event_json {
    () => {
        "json_object('run_id', run_id, 'name', name, 'idx', idx, 'data', data, \
         'timed_out', timed_out, 'reference_id', reference_id, 'received_at', received_at)"
    };
}

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

/// How to open a [`SqliteStore`].
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
    /// Apply pending migrations when connecting (default `true`).
    pub migrate: bool,
}

impl SqliteOptions {
    /// The defaults for a URL.
    pub fn new(url: impl Into<String>) -> Self {
        SqliteOptions {
            url: url.into(),
            synchronous: SqliteSynchronous::Normal,
            busy_timeout: Duration::from_secs(5),
            read_connections: 4,
            migrate: true,
        }
    }

    /// Sets the `synchronous` pragma.
    pub fn synchronous(mut self, synchronous: SqliteSynchronous) -> Self {
        self.synchronous = synchronous;
        self
    }

    /// Sets the busy timeout.
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// Sets the size of the read pool.
    pub fn read_connections(mut self, connections: u32) -> Self {
        self.read_connections = connections.max(1);
        self
    }

    /// Whether to apply pending migrations when connecting.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }
}

/// The SQLite backend.
#[derive(Debug)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    statements: Arc<StatementCounter>,
    entries: EntryBatcher<Entries>,
}

/// The group-commit writer of `put_entry`: a batch of entries in one statement on the writer
/// connection.
#[derive(Clone, Debug)]
struct Entries {
    writer: SqlitePool,
    statements: Arc<StatementCounter>,
}

/// Upserts a batch (a JSON array of `batch::Row`), each row only if its run's revision is the
/// one it expects; returns the keys written.
const UPSERT_ENTRIES: &str = "INSERT INTO aiki_entries (run_id, address, idx, kind, status, \
     output, fingerprint, attempts, error_kind, error_message, retry_at, updated_at) \
     SELECT j.run_id, j.address, j.idx, j.kind, j.status, j.output, j.fingerprint, j.attempts, \
     j.error_kind, j.error_message, j.retry_at, j.updated_at \
     FROM (SELECT json_extract(value, '$.run_id') AS run_id, \
       json_extract(value, '$.address') AS address, json_extract(value, '$.idx') AS idx, \
       json_extract(value, '$.kind') AS kind, json_extract(value, '$.status') AS status, \
       json_extract(value, '$.output') AS output, \
       json_extract(value, '$.fingerprint') AS fingerprint, \
       json_extract(value, '$.attempts') AS attempts, \
       json_extract(value, '$.error_kind') AS error_kind, \
       json_extract(value, '$.error_message') AS error_message, \
       json_extract(value, '$.retry_at') AS retry_at, \
       json_extract(value, '$.updated_at') AS updated_at, \
       json_extract(value, '$.expected') AS expected \
       FROM json_each(?1)) AS j \
     WHERE (SELECT revision FROM aiki_runs WHERE id = j.run_id) = j.expected \
     ON CONFLICT (run_id, address, idx) DO UPDATE SET kind = excluded.kind, \
     status = excluded.status, output = excluded.output, fingerprint = excluded.fingerprint, \
     attempts = excluded.attempts, error_kind = excluded.error_kind, \
     error_message = excluded.error_message, retry_at = excluded.retry_at, \
     updated_at = excluded.updated_at \
     RETURNING run_id, address, idx";

impl EntryWriter for Entries {
    async fn write(&self, batch: &[Pending]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        self.statements.add(1);
        let written: Vec<(String, String, i64)> = sqlx::query_as(UPSERT_ENTRIES)
            .bind(batch::rows_json(batch))
            .fetch_all(&self.writer)
            .await
            .map_err(map_error)?;
        let (refused, ids) = batch::refused(batch, &written);
        let Some(ids) = ids else {
            return Ok(batch::outcomes(batch, &refused, &[]));
        };
        // The failure path only: the actual revisions of the refused writes' runs.
        self.statements.add(1);
        let revisions = sqlx::query_as::<_, (String, i64)>(
            "SELECT id, revision FROM aiki_runs WHERE id IN (SELECT value FROM json_each(?1))",
        )
        .bind(ids)
        .fetch_all(&self.writer)
        .await
        .map_err(map_error);
        Ok(match revisions {
            Ok(revisions) => batch::outcomes(batch, &refused, &revisions),
            Err(error) => batch::refused_with(batch, &refused, error),
        })
    }
}

impl SqliteStore {
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
            match Self::open(&options).await {
                Err(error) if error.is_transient() && started.elapsed() < options.busy_timeout => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                result => return result,
            }
        }
    }

    async fn open(options: &SqliteOptions) -> Result<Self, StoreError> {
        let in_memory = options.url.contains(":memory:") || options.url.contains("mode=memory");
        let connect = SqliteConnectOptions::from_str(&options.url).map_err(|error| {
            StoreError::UnsupportedUrl {
                url: options.url.clone(),
                reason: error.to_string(),
            }
        })?;
        let connect = connect
            .create_if_missing(true)
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
            .map_err(map_error)?;
        let statements = Arc::new(StatementCounter::default());
        let mut store = SqliteStore {
            writer: writer.clone(),
            reader: writer.clone(),
            statements: statements.clone(),
            entries: EntryBatcher::new(Entries { writer, statements }),
        };
        if options.migrate {
            store.migrate().await?;
        }
        if !in_memory {
            store.reader = SqlitePoolOptions::new()
                .max_connections(options.read_connections.max(1))
                .test_before_acquire(false)
                .connect_lazy_with(connect);
        }
        Ok(store)
    }

    /// Applies pending migrations. Safe to run from several processes at once: the migration
    /// runs inside one `BEGIN IMMEDIATE` transaction, so the second process waits and then
    /// finds nothing to do. A database migrated by newer code is [`StoreError::Migration`].
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_error)?;
        // `run_direct` rather than `run`: `run`'s `Acquire` bound makes the future not `Send`
        // (sqlx's own workaround, see `Migrator::run_direct`).
        MIGRATOR
            .run_direct(&mut *tx)
            .await
            .map_err(sql::map_migrate_error)?;
        tx.commit().await.map_err(map_error)
    }

    /// How many statements this store has sent to SQLite (each `BEGIN` and `COMMIT` counts).
    pub fn statements(&self) -> u64 {
        self.statements.get()
    }

    /// Closes the connections, waiting for statements in flight.
    pub async fn close(&self) {
        self.entries.close();
        self.reader.close().await;
        self.writer.close().await;
    }

    fn count(&self, n: u64) {
        self.statements.add(n);
    }

    async fn begin(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.count(1);
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_error)
    }

    async fn commit(&self, tx: Transaction<'static, Sqlite>) -> Result<(), StoreError> {
        self.count(1);
        tx.commit().await.map_err(map_error)
    }

    /// The error for a failed revision check: reads the actual revision (failure path only).
    async fn check_failed<'c>(
        &self,
        executor: impl sqlx::SqliteExecutor<'c>,
        id: RunId,
        expected: u64,
    ) -> StoreError {
        self.count(1);
        let actual = sqlx::query_scalar::<_, i64>("SELECT revision FROM aiki_runs WHERE id = ?1")
            .bind(id.to_string())
            .fetch_optional(executor)
            .await;
        match actual {
            Ok(actual) => sql::check_failed(id, expected, actual),
            Err(error) => map_error(error),
        }
    }
}

const INSERT_RUN: &str = concat!(
    "INSERT INTO aiki_runs (id, namespace, workflow, version, input, input_hash, reference_id, \
     pool, status, revision, attempts, due_at, queued_at, parent_run_id, parent_address, \
     created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1, 1, ?10, ?11, ?12, ?13, ?14, ?14) \
     ON CONFLICT (namespace, reference_id) DO NOTHING RETURNING ",
    run_json!()
);

const SELECT_BY_REFERENCE: &str = concat!(
    "SELECT ",
    run_json!(),
    " FROM aiki_runs WHERE namespace = ?1 AND reference_id = ?2"
);

const UPSERT_ENTRY: &str = "INSERT INTO aiki_entries (run_id, address, idx, kind, status, output, \
     fingerprint, attempts, error_kind, error_message, retry_at, updated_at) \
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12 \
     WHERE EXISTS (SELECT 1 FROM aiki_runs WHERE id = ?1 AND revision = ?13) \
     ON CONFLICT (run_id, address, idx) DO UPDATE SET kind = excluded.kind, \
     status = excluded.status, output = excluded.output, fingerprint = excluded.fingerprint, \
     attempts = excluded.attempts, error_kind = excluded.error_kind, \
     error_message = excluded.error_message, retry_at = excluded.retry_at, \
     updated_at = excluded.updated_at";

/// Inserts a run unless its namespace and reference id name one already; the stored run and
/// whether it is new.
async fn insert_run<'c>(
    executor: impl sqlx::SqliteExecutor<'c>,
    run: &NewRun,
) -> Result<Option<RunRecord>, StoreError> {
    let doc: Option<String> = sqlx::query_scalar(INSERT_RUN)
        .bind(run.id.to_string())
        .bind(run.namespace.to_string())
        .bind(&run.namespace.workflow)
        .bind(&run.namespace.version)
        .bind(sql::json_text(&run.input))
        .bind(&run.input_hash)
        .bind(&run.reference_id)
        .bind(&run.pool)
        .bind(run.status.as_str())
        .bind(run.due_at)
        .bind((run.status == RunStatus::Queued).then_some(run.now))
        .bind(run.parent.as_ref().map(|parent| parent.run_id.to_string()))
        .bind(run.parent.as_ref().map(|parent| parent.address.as_str()))
        .bind(run.now)
        .fetch_optional(executor)
        .await
        .map_err(map_error)?;
    doc.map(|doc| sql::run_from_json(&doc)).transpose()
}

async fn select_by_reference<'c>(
    executor: impl sqlx::SqliteExecutor<'c>,
    run: &NewRun,
) -> Result<RunRecord, StoreError> {
    let doc: String = sqlx::query_scalar(SELECT_BY_REFERENCE)
        .bind(run.namespace.to_string())
        .bind(&run.reference_id)
        .fetch_one(executor)
        .await
        .map_err(map_error)?;
    sql::run_from_json(&doc)
}

async fn upsert_entry<'c>(
    executor: impl sqlx::SqliteExecutor<'c>,
    expected: u64,
    entry: &EntryRecord,
) -> Result<bool, StoreError> {
    let result = sqlx::query(UPSERT_ENTRY)
        .bind(entry.run_id.to_string())
        .bind(&entry.address)
        .bind(i64::from(entry.index))
        .bind(entry.kind.as_str())
        .bind(entry.status.as_str())
        .bind(entry.output.as_ref().map(sql::json_text))
        .bind(&entry.fingerprint)
        .bind(i64::from(entry.attempts))
        .bind(entry.error.as_ref().map(|error| error.kind.as_str()))
        .bind(entry.error.as_ref().map(|error| error.message.as_str()))
        .bind(entry.retry_at)
        .bind(entry.updated_at)
        .bind(sql::revision(expected))
        .execute(executor)
        .await
        .map_err(map_error)?;
    Ok(result.rows_affected() == 1)
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        self.count(1);
        if let Some(created) = insert_run(&self.writer, &run).await? {
            return Ok(CreateOutcome::Created(created));
        }
        self.count(1);
        Ok(CreateOutcome::Existing(
            select_by_reference(&self.writer, &run).await?,
        ))
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.count(1);
        let doc: Option<String> = sqlx::query_scalar(concat!(
            "SELECT ",
            run_json!(),
            " FROM aiki_runs WHERE id = ?1"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.reader)
        .await
        .map_err(map_error)?;
        sql::run_from_json(&doc.ok_or_else(|| StoreError::run_not_found(id))?)
    }

    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        self.count(1);
        let row = sqlx::query(concat!(
            "SELECT (SELECT ",
            run_json!(),
            " FROM aiki_runs WHERE id = ?1), \
             (SELECT json_group_array(json_object('run_id', run_id, 'address', address, \
             'idx', idx, 'kind', kind, 'status', status, 'output', output, \
             'fingerprint', fingerprint, 'attempts', attempts, 'error_kind', error_kind, \
             'error_message', error_message, 'retry_at', retry_at, 'updated_at', updated_at)) \
             FROM aiki_entries WHERE run_id = ?1), \
             (SELECT json_group_array(json_object('run_id', run_id, 'name', name, 'idx', idx, \
             'duration_ms', duration_ms, 'wake_at', wake_at, 'cancelled', cancelled)) \
             FROM aiki_sleeps WHERE run_id = ?1), \
             (SELECT json_group_array(",
            event_json!(),
            ") FROM aiki_events WHERE run_id = ?1), \
             (SELECT json_group_array(",
            run_json!(),
            ") FROM aiki_runs WHERE parent_run_id = ?1)"
        ))
        .bind(id.to_string())
        .fetch_one(&self.reader)
        .await
        .map_err(map_error)?;
        sql::history_from_json(
            id,
            row.try_get(0).map_err(map_error)?,
            row.try_get(1).map_err(map_error)?,
            row.try_get(2).map_err(map_error)?,
            row.try_get(3).map_err(map_error)?,
            row.try_get(4).map_err(map_error)?,
        )
    }

    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        const UPDATE: &str = concat!(
            "UPDATE aiki_runs SET \
             status = CASE WHEN w.sat THEN 'scheduled' ELSE ?3 END, \
             due_at = CASE WHEN w.sat THEN ?4 ELSE ?5 END, \
             revision = revision + 1, \
             updated_at = ?4, \
             owner = CASE WHEN ?3 = 'running' THEN owner ELSE NULL END, \
             heartbeat_at = CASE WHEN ?3 = 'running' THEN heartbeat_at ELSE NULL END, \
             queued_at = CASE WHEN ?3 = 'queued' THEN ?4 ELSE queued_at END, \
             output = CASE WHEN ?6 THEN ?7 ELSE output END, \
             output_fingerprint = CASE WHEN ?6 THEN ?8 ELSE output_fingerprint END, \
             error_kind = COALESCE(?9, error_kind), \
             error_message = CASE WHEN ?9 IS NULL THEN error_message ELSE ?10 END, \
             attempts = COALESCE(?11, attempts) \
             FROM (SELECT (?12 AND (\
               EXISTS (SELECT 1 FROM json_each(?13) AS wanted JOIN aiki_events AS e \
                 ON e.run_id = ?1 AND e.name = json_extract(wanted.value, '$[0]') \
                 AND e.idx = json_extract(wanted.value, '$[1]')) \
               OR EXISTS (SELECT 1 FROM aiki_runs AS c \
                 WHERE c.id IN (SELECT value FROM json_each(?14)) \
                 AND c.status IN ('completed', 'failed', 'cancelled')))) AS sat) AS w \
             WHERE aiki_runs.id = ?1 AND aiki_runs.revision = ?2 \
             AND aiki_runs.status IN (SELECT value FROM json_each(?15)) \
             RETURNING ",
            run_json!()
        );
        let to = transition.to;
        let wait = transition.wait.clone().unwrap_or_default();
        let events = serde_json::to_string(&wait.events).expect("BUG: event names serialize");
        let children: Vec<String> = wait.children.iter().map(RunId::to_string).collect();
        let children = serde_json::to_string(&children).expect("BUG: run ids serialize");
        let sources = serde_json::to_string(&sql::sources_of(to)).expect("BUG: statuses serialize");
        // A terminal transition wakes a waiting parent through the `aiki_runs_wake_parent`
        // trigger, inside the same statement; only cancelling sleeps needs a transaction.
        let needs_transaction = transition.cancel_sleeps;
        let mut tx = if needs_transaction {
            Some(self.begin().await?)
        } else {
            None
        };
        let query = sqlx::query_scalar::<_, String>(UPDATE)
            .bind(id.to_string())
            .bind(sql::revision(expected))
            .bind(to.as_str())
            .bind(transition.now)
            .bind(transition.due_at)
            .bind(transition.output.is_some())
            .bind(transition.output.as_ref().map(sql::json_text))
            .bind(&transition.output_fingerprint)
            .bind(transition.error.as_ref().map(|error| error.kind.as_str()))
            .bind(
                transition
                    .error
                    .as_ref()
                    .map(|error| error.message.as_str()),
            )
            .bind(transition.attempts.map(i64::from))
            .bind(to.is_suspended())
            .bind(events)
            .bind(children)
            .bind(sources);
        self.count(1);
        let doc = match &mut tx {
            Some(tx) => query.fetch_optional(&mut **tx).await,
            None => query.fetch_optional(&self.writer).await,
        }
        .map_err(map_error)?;
        let Some(doc) = doc else {
            self.count(1);
            let current = sqlx::query("SELECT status, revision FROM aiki_runs WHERE id = ?1")
                .bind(id.to_string());
            let current = match &mut tx {
                Some(tx) => current.fetch_optional(&mut **tx).await,
                None => current.fetch_optional(&self.writer).await,
            }
            .map_err(map_error)?;
            let Some(current) = current else {
                return Err(StoreError::run_not_found(id));
            };
            let actual: i64 = current.try_get(1).map_err(map_error)?;
            if actual != sql::revision(expected) {
                return Err(sql::check_failed(id, expected, Some(actual)));
            }
            let from: String = current.try_get(0).map_err(map_error)?;
            return Err(StoreError::InvalidTransition {
                run_id: id,
                from: from.parse().map_err(|error| StoreError::Corrupt {
                    message: format!("{error}"),
                })?,
                to,
            });
        };
        let run = sql::run_from_json(&doc)?;
        if let Some(mut tx) = tx {
            if transition.cancel_sleeps {
                self.count(1);
                sqlx::query(
                    "UPDATE aiki_sleeps SET cancelled = 1 \
                     WHERE run_id = ?1 AND cancelled = 0 AND wake_at > ?2",
                )
                .bind(id.to_string())
                .bind(transition.now)
                .execute(&mut *tx)
                .await
                .map_err(map_error)?;
            }
            self.commit(tx).await?;
        }
        Ok(run)
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Vec<RunRecord>, StoreError> {
        if request.limit == 0 || request.namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let namespaces: Vec<String> = request.namespaces.iter().map(|n| n.to_string()).collect();
        self.count(1);
        let docs: Vec<String> = sqlx::query_scalar(concat!(
            "UPDATE aiki_runs SET status = 'running', owner = ?1, heartbeat_at = ?2, \
             revision = revision + 1, due_at = NULL, updated_at = ?2 \
             WHERE id IN (SELECT id FROM aiki_runs WHERE status = 'queued' AND pool = ?3 \
             AND namespace IN (SELECT value FROM json_each(?4)) \
             ORDER BY queued_at, id LIMIT ?5) RETURNING ",
            run_json!()
        ))
        .bind(&request.owner)
        .bind(request.now)
        .bind(&request.pool)
        .bind(serde_json::to_string(&namespaces).expect("BUG: namespaces serialize"))
        .bind(i64::from(request.limit))
        .fetch_all(&self.writer)
        .await
        .map_err(map_error)?;
        let mut runs = docs
            .iter()
            .map(|doc| sql::run_from_json(doc))
            .collect::<Result<Vec<_>, _>>()?;
        sql::sort_claimed(&mut runs);
        Ok(runs)
    }

    async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<(), StoreError> {
        self.count(1);
        let result = sqlx::query(
            "UPDATE aiki_runs SET heartbeat_at = ?4 \
             WHERE id = ?1 AND revision = ?2 AND owner = ?3",
        )
        .bind(id.to_string())
        .bind(sql::revision(expected))
        .bind(owner)
        .bind(now)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        if result.rows_affected() == 0 {
            return Err(self.check_failed(&self.writer, id, expected).await);
        }
        Ok(())
    }

    async fn put_entry(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError> {
        // Group commit: concurrent calls share one statement (see `batch`).
        self.entries.put(expected, entry).await
    }

    async fn start_child(
        &self,
        expected: u64,
        mut entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        let mut tx = self.begin().await?;
        entry.output = Some(serde_json::Value::String(child.id.to_string()));
        self.count(1);
        if !upsert_entry(&mut *tx, expected, &entry).await? {
            return Err(self.check_failed(&mut *tx, entry.run_id, expected).await);
        }
        self.count(1);
        let run = match insert_run(&mut *tx, &child).await? {
            Some(created) => created,
            None => {
                self.count(2);
                let existing = select_by_reference(&mut *tx, &child).await?;
                entry.output = Some(serde_json::Value::String(existing.id.to_string()));
                upsert_entry(&mut *tx, expected, &entry).await?;
                existing
            }
        };
        self.commit(tx).await?;
        Ok(run)
    }

    async fn put_sleep(&self, expected: u64, sleep: SleepRecord) -> Result<(), StoreError> {
        self.count(1);
        let result = sqlx::query(
            "INSERT INTO aiki_sleeps (run_id, name, idx, duration_ms, wake_at, cancelled) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6 \
             WHERE EXISTS (SELECT 1 FROM aiki_runs WHERE id = ?1 AND revision = ?7) \
             ON CONFLICT (run_id, name, idx) DO UPDATE SET duration_ms = excluded.duration_ms, \
             wake_at = excluded.wake_at, cancelled = excluded.cancelled",
        )
        .bind(sleep.run_id.to_string())
        .bind(&sleep.name)
        .bind(i64::from(sleep.index))
        .bind(sleep.duration_ms)
        .bind(sleep.wake_at)
        .bind(sleep.cancelled)
        .bind(sql::revision(expected))
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        if result.rows_affected() == 0 {
            return Err(self
                .check_failed(&self.writer, sleep.run_id, expected)
                .await);
        }
        Ok(())
    }

    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        let mut tx = self.begin().await?;
        self.count(1);
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM aiki_runs WHERE id = ?1")
                .bind(event.run_id.to_string())
                .fetch_optional(&mut *tx)
                .await
                .map_err(map_error)?;
        let status: RunStatus = status
            .ok_or_else(|| StoreError::run_not_found(event.run_id))?
            .parse()
            .map_err(|error| StoreError::Corrupt {
                message: format!("{error}"),
            })?;
        if status.is_terminal() {
            return Err(StoreError::InvalidTransition {
                run_id: event.run_id,
                from: status,
                to: RunStatus::Scheduled,
            });
        }
        self.count(1);
        let index: Option<i64> = sqlx::query_scalar(
            "INSERT INTO aiki_events (run_id, name, idx, data, timed_out, reference_id, \
             received_at) \
             SELECT ?1, ?2, COALESCE(MAX(idx) + 1, 0), ?3, 0, ?4, ?5 FROM aiki_events \
             WHERE run_id = ?1 AND name = ?2 \
             ON CONFLICT (run_id, name, reference_id) WHERE reference_id IS NOT NULL \
             DO NOTHING RETURNING idx",
        )
        .bind(event.run_id.to_string())
        .bind(&event.name)
        .bind(sql::json_text(&event.data))
        .bind(&event.reference_id)
        .bind(event.now)
        .fetch_optional(&mut *tx)
        .await
        .map_err(map_error)?;
        let Some(index) = index else {
            self.commit(tx).await?;
            return Ok(AppendOutcome::Duplicate);
        };
        let woke = status == RunStatus::AwaitingEvent;
        if woke {
            self.count(1);
            sqlx::query(
                "UPDATE aiki_runs SET status = 'scheduled', revision = revision + 1, \
                 due_at = ?2, updated_at = ?2, owner = NULL, heartbeat_at = NULL WHERE id = ?1",
            )
            .bind(event.run_id.to_string())
            .bind(event.now)
            .execute(&mut *tx)
            .await
            .map_err(map_error)?;
        }
        self.commit(tx).await?;
        Ok(AppendOutcome::Appended {
            index: u32::try_from(index).map_err(|_| StoreError::Corrupt {
                message: format!("event index {index} is out of range"),
            })?,
            woke,
        })
    }

    async fn record_event_timeout(
        &self,
        id: RunId,
        expected: u64,
        name: &str,
        index: u32,
        now: Millis,
    ) -> Result<EventRecord, StoreError> {
        self.count(1);
        let inserted = sqlx::query(
            "INSERT INTO aiki_events (run_id, name, idx, data, timed_out, reference_id, \
             received_at) \
             SELECT ?1, ?2, ?3, NULL, 1, NULL, ?4 \
             WHERE EXISTS (SELECT 1 FROM aiki_runs WHERE id = ?1 AND revision = ?5) \
             ON CONFLICT (run_id, name, idx) DO NOTHING",
        )
        .bind(id.to_string())
        .bind(name)
        .bind(i64::from(index))
        .bind(now)
        .bind(sql::revision(expected))
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        if inserted.rows_affected() == 1 {
            return Ok(EventRecord {
                run_id: id,
                name: name.to_owned(),
                index,
                data: None,
                timed_out: true,
                reference_id: None,
                received_at: now,
            });
        }
        self.count(1);
        let row = sqlx::query(concat!(
            "SELECT (SELECT revision FROM aiki_runs WHERE id = ?1), (SELECT ",
            event_json!(),
            " FROM aiki_events WHERE run_id = ?1 AND name = ?2 AND idx = ?3)"
        ))
        .bind(id.to_string())
        .bind(name)
        .bind(i64::from(index))
        .fetch_one(&self.writer)
        .await
        .map_err(map_error)?;
        let actual: Option<i64> = row.try_get(0).map_err(map_error)?;
        let slot: Option<String> = row.try_get(1).map_err(map_error)?;
        sql::timeout_outcome(id, expected, actual, slot)
    }

    async fn wake_due(&self, now: Millis) -> Result<u64, StoreError> {
        self.count(1);
        let result = sqlx::query(
            "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, due_at = NULL, \
             queued_at = ?1, updated_at = ?1, owner = NULL, heartbeat_at = NULL \
             WHERE status IN ('scheduled', 'sleeping', 'awaiting_event', 'awaiting_retry', \
             'awaiting_child_workflow') AND due_at <= ?1",
        )
        .bind(now)
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected())
    }

    async fn release_stale_claims(
        &self,
        now: Millis,
        idle_timeout_ms: i64,
    ) -> Result<Vec<RunId>, StoreError> {
        self.count(1);
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, due_at = NULL, \
             queued_at = ?1, updated_at = ?1, owner = NULL, heartbeat_at = NULL \
             WHERE status = 'running' AND (heartbeat_at < ?2 \
             OR (heartbeat_at IS NULL AND updated_at < ?2)) RETURNING id",
        )
        .bind(now)
        .bind(now.saturating_sub(idle_timeout_ms))
        .fetch_all(&self.writer)
        .await
        .map_err(map_error)?;
        sql::parse_ids(&ids)
    }

    async fn stall_undelivered(&self, now: Millis, max_age_ms: i64) -> Result<u64, StoreError> {
        self.count(1);
        let result = sqlx::query(
            "UPDATE aiki_runs SET status = 'stalled', revision = revision + 1, due_at = NULL, \
             updated_at = ?1, owner = NULL, heartbeat_at = NULL \
             WHERE status = 'queued' AND COALESCE(queued_at, created_at) < ?2",
        )
        .bind(now)
        .bind(now.saturating_sub(max_age_ms))
        .execute(&self.writer)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected())
    }

    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        self.count(1);
        sqlx::query_scalar::<_, Option<i64>>(concat!(
            "SELECT MIN(due_at) FROM aiki_runs WHERE status IN ",
            "('scheduled', 'sleeping', 'awaiting_event', 'awaiting_retry', \
             'awaiting_child_workflow')"
        ))
        .fetch_one(&self.reader)
        .await
        .map_err(map_error)
    }
}
