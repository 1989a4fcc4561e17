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
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{Connection, Postgres, Row, Transaction};

use crate::batch::{self, EntryBatcher, EntryWriter, Pending};
use crate::sql::{self, StatementCounter, map_error};
use crate::{
    AppendOutcome, ClaimRequest, CreateOutcome, EntryRecord, EventRecord, History, Millis,
    NewEvent, NewRun, RunId, RunRecord, RunStatus, SleepRecord, Store, StoreError, Transition,
};

/// The embedded migrations of the PostgreSQL schema.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The JSON document of a run row aliased `r` (see `sql::RunRow`).
macro_rules! run_json {
    () => {
        "json_build_object('id', r.id::text, 'workflow', r.workflow, 'version', r.version, \
         'input', r.input, 'input_hash', r.input_hash, 'reference_id', r.reference_id, \
         'pool', r.pool, 'status', r.status, 'revision', r.revision, 'attempts', r.attempts, \
         'owner', r.owner, 'heartbeat_at', r.heartbeat_at, 'due_at', r.due_at, \
         'queued_at', r.queued_at, 'output', r.output, \
         'output_fingerprint', r.output_fingerprint, 'error_kind', r.error_kind, \
         'error_message', r.error_message, 'parent_run_id', r.parent_run_id::text, \
         'parent_address', r.parent_address, 'created_at', r.created_at, \
         'updated_at', r.updated_at)"
    };
}

/// The JSON document of an event row aliased `e`.
macro_rules! event_json {
    () => {
        "json_build_object('run_id', e.run_id::text, 'name', e.name, 'idx', e.idx, \
         'data', e.data, 'timed_out', e.timed_out, 'reference_id', e.reference_id, \
         'received_at', e.received_at)"
    };
}

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
    /// Apply pending migrations when connecting (default `true`).
    pub migrate: bool,
}

impl PostgresOptions {
    /// The defaults for a URL.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresOptions {
            url: url.into(),
            max_connections: 10,
            acquire_timeout: Duration::from_secs(30),
            migrate: true,
        }
    }

    /// Sets the pool size.
    pub fn max_connections(mut self, connections: u32) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// Sets how long a call waits for a free connection.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }

    /// Whether to apply pending migrations when connecting.
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }
}

/// The PostgreSQL backend.
#[derive(Debug)]
pub struct PostgresStore {
    pool: PgPool,
    statements: Arc<StatementCounter>,
    entries: EntryBatcher<Entries>,
}

/// The group-commit writer of `put_entry`: a batch of entries in one statement.
#[derive(Clone, Debug)]
struct Entries {
    pool: PgPool,
    statements: Arc<StatementCounter>,
}

/// Upserts a batch (a JSON array of `batch::Row`), each row only if its run's revision is the
/// one it expects; returns the keys written. The runs are locked `FOR SHARE` (in id order, so
/// two batches never wait on each other crosswise), as the single-row upsert locks its run:
/// each check sees the latest committed revision, so a release committed while the batch was
/// in flight fences its writes.
const UPSERT_ENTRIES: &str = "WITH j AS MATERIALIZED (SELECT * FROM json_to_recordset($1::json) \
       AS x(run_id uuid, address text, idx bigint, kind text, status text, output text, \
       fingerprint text, attempts bigint, error_kind text, error_message text, \
       retry_at bigint, updated_at bigint, expected bigint)), \
     locked AS MATERIALIZED (SELECT r.id, r.revision FROM aiki_runs r \
       WHERE r.id IN (SELECT run_id FROM j) ORDER BY r.id FOR SHARE OF r) \
     INSERT INTO aiki_entries AS e (run_id, address, idx, kind, status, output, fingerprint, \
     attempts, error_kind, error_message, retry_at, updated_at) \
     SELECT j.run_id, j.address, j.idx, j.kind, j.status, j.output, j.fingerprint, j.attempts, \
     j.error_kind, j.error_message, j.retry_at, j.updated_at \
     FROM j JOIN locked ON locked.id = j.run_id AND locked.revision = j.expected \
     ON CONFLICT (run_id, address, idx) DO UPDATE SET kind = excluded.kind, \
     status = excluded.status, output = excluded.output, fingerprint = excluded.fingerprint, \
     attempts = excluded.attempts, error_kind = excluded.error_kind, \
     error_message = excluded.error_message, retry_at = excluded.retry_at, \
     updated_at = excluded.updated_at \
     RETURNING e.run_id::text, e.address, e.idx";

impl EntryWriter for Entries {
    async fn write(&self, batch: &[Pending]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        self.statements.add(1);
        let written: Vec<(String, String, i64)> = sqlx::query_as(UPSERT_ENTRIES)
            .bind(batch::rows_json(batch))
            .fetch_all(&self.pool)
            .await
            .map_err(map_error)?;
        let (refused, ids) = batch::refused(batch, &written);
        let Some(ids) = ids else {
            return Ok(batch::outcomes(batch, &refused, &[]));
        };
        // The failure path only: the actual revisions of the refused writes' runs.
        self.statements.add(1);
        let revisions = sqlx::query_as::<_, (String, i64)>(
            "SELECT id::text, revision FROM aiki_runs \
             WHERE id IN (SELECT value::uuid FROM json_array_elements_text($1::json))",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(map_error);
        Ok(match revisions {
            Ok(revisions) => batch::outcomes(batch, &refused, &revisions),
            Err(error) => batch::refused_with(batch, &refused, error),
        })
    }
}

impl PostgresStore {
    /// Connects with default options and applies pending migrations.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(PostgresOptions::new(url)).await
    }

    /// Connects with the given options.
    pub async fn connect_with(options: PostgresOptions) -> Result<Self, StoreError> {
        let connect = PgConnectOptions::from_str(&options.url).map_err(|error| {
            StoreError::UnsupportedUrl {
                url: options.url.clone(),
                reason: error.to_string(),
            }
        })?;
        // One direct connection first: a pool retries a refused connection until its acquire
        // timeout, but a server that does not answer should be reported at once.
        let probe = PgConnection::connect_with(&connect)
            .await
            .map_err(map_error)?;
        let _ = probe.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            // A dead connection shows up as an error on use, which callers retry; a ping
            // before every statement would double the round trips.
            .test_before_acquire(false)
            .connect_lazy_with(connect);
        let statements = Arc::new(StatementCounter::default());
        let store = PostgresStore {
            pool: pool.clone(),
            statements: statements.clone(),
            entries: EntryBatcher::new(Entries { pool, statements }),
        };
        if options.migrate {
            store.migrate().await?;
        }
        Ok(store)
    }

    /// Applies pending migrations. Safe to run from many processes at once: the migrator holds
    /// a PostgreSQL advisory lock while it works. A database migrated by newer code is
    /// [`StoreError::Migration`].
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut connection = self.pool.acquire().await.map_err(map_error)?;
        // `run_direct` rather than `run`: `run`'s `Acquire` bound makes the future not `Send`
        // (sqlx's own workaround, see `Migrator::run_direct`).
        MIGRATOR
            .run_direct(&mut *connection)
            .await
            .map_err(sql::map_migrate_error)
    }

    /// How many statements (round trips) this store has sent, `BEGIN` and `COMMIT` included.
    pub fn statements(&self) -> u64 {
        self.statements.get()
    }

    /// Closes the pool, waiting for statements in flight.
    pub async fn close(&self) {
        self.entries.close();
        self.pool.close().await;
    }

    fn count(&self, n: u64) {
        self.statements.add(n);
    }

    async fn begin(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.count(1);
        self.pool.begin().await.map_err(map_error)
    }

    async fn commit(&self, tx: Transaction<'static, Postgres>) -> Result<(), StoreError> {
        self.count(1);
        tx.commit().await.map_err(map_error)
    }

    /// The error for a failed revision check: reads the actual revision (failure path only).
    async fn check_failed<'c>(
        &self,
        executor: impl sqlx::PgExecutor<'c>,
        id: RunId,
        expected: u64,
    ) -> StoreError {
        self.count(1);
        let actual =
            sqlx::query_scalar::<_, i64>("SELECT revision FROM aiki_runs WHERE id = $1::uuid")
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
    "INSERT INTO aiki_runs AS r (id, namespace, workflow, version, input, input_hash, \
     reference_id, pool, status, revision, attempts, due_at, queued_at, parent_run_id, \
     parent_address, created_at, updated_at) \
     VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, 1, 1, $10, $11, $12::uuid, $13, $14, $14) \
     ON CONFLICT (namespace, reference_id) DO NOTHING RETURNING ",
    run_json!(),
    "::text"
);

const SELECT_BY_REFERENCE: &str = concat!(
    "SELECT ",
    run_json!(),
    "::text FROM aiki_runs r WHERE r.namespace = $1 AND r.reference_id = $2"
);

const UPSERT_ENTRY: &str = "INSERT INTO aiki_entries (run_id, address, idx, kind, status, \
     output, fingerprint, attempts, error_kind, error_message, retry_at, updated_at) \
     SELECT $1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 \
     FROM aiki_runs WHERE id = $1::uuid AND revision = $13 FOR SHARE \
     ON CONFLICT (run_id, address, idx) DO UPDATE SET kind = excluded.kind, \
     status = excluded.status, output = excluded.output, fingerprint = excluded.fingerprint, \
     attempts = excluded.attempts, error_kind = excluded.error_kind, \
     error_message = excluded.error_message, retry_at = excluded.retry_at, \
     updated_at = excluded.updated_at";

async fn insert_run<'c>(
    executor: impl sqlx::PgExecutor<'c>,
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
    executor: impl sqlx::PgExecutor<'c>,
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
    executor: impl sqlx::PgExecutor<'c>,
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
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        self.count(1);
        if let Some(created) = insert_run(&self.pool, &run).await? {
            return Ok(CreateOutcome::Created(created));
        }
        self.count(1);
        Ok(CreateOutcome::Existing(
            select_by_reference(&self.pool, &run).await?,
        ))
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.count(1);
        let doc: Option<String> = sqlx::query_scalar(concat!(
            "SELECT ",
            run_json!(),
            "::text FROM aiki_runs r WHERE r.id = $1::uuid"
        ))
        .bind(id.to_string())
        .fetch_optional(&self.pool)
        .await
        .map_err(map_error)?;
        sql::run_from_json(&doc.ok_or_else(|| StoreError::run_not_found(id))?)
    }

    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        // One statement: one snapshot, one round trip.
        self.count(1);
        let row = sqlx::query(concat!(
            "SELECT (SELECT ",
            run_json!(),
            "::text FROM aiki_runs r WHERE r.id = $1::uuid), \
             (SELECT json_agg(json_build_object('run_id', run_id::text, 'address', address, \
             'idx', idx, 'kind', kind, 'status', status, 'output', output, \
             'fingerprint', fingerprint, 'attempts', attempts, 'error_kind', error_kind, \
             'error_message', error_message, 'retry_at', retry_at, \
             'updated_at', updated_at))::text FROM aiki_entries WHERE run_id = $1::uuid), \
             (SELECT json_agg(json_build_object('run_id', run_id::text, 'name', name, \
             'idx', idx, 'duration_ms', duration_ms, 'wake_at', wake_at, \
             'cancelled', cancelled))::text FROM aiki_sleeps WHERE run_id = $1::uuid), \
             (SELECT json_agg(",
            event_json!(),
            ")::text FROM aiki_events e WHERE e.run_id = $1::uuid), \
             (SELECT json_agg(",
            run_json!(),
            ")::text FROM aiki_runs r WHERE r.parent_run_id = $1::uuid)"
        ))
        .bind(id.to_string())
        .fetch_one(&self.pool)
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
            "WITH w AS (SELECT ($12 AND (\
               EXISTS (SELECT 1 FROM unnest($13::text[], $14::bigint[]) AS wanted(name, idx) \
                 JOIN aiki_events ev ON ev.run_id = $1::uuid AND ev.name = wanted.name \
                 AND ev.idx = wanted.idx) \
               OR EXISTS (SELECT 1 FROM aiki_runs c WHERE c.id = ANY($15::uuid[]) \
                 AND c.status IN ('completed', 'failed', 'cancelled')))) AS sat), \
             updated AS (UPDATE aiki_runs SET \
               status = CASE WHEN w.sat THEN 'scheduled' ELSE $3 END, \
               due_at = CASE WHEN w.sat THEN $4 ELSE $5 END, \
               revision = revision + 1, \
               updated_at = $4, \
               owner = CASE WHEN $3 = 'running' THEN owner ELSE NULL END, \
               heartbeat_at = CASE WHEN $3 = 'running' THEN heartbeat_at ELSE NULL END, \
               queued_at = CASE WHEN $3 = 'queued' THEN $4 ELSE queued_at END, \
               output = CASE WHEN $6 THEN $7 ELSE output END, \
               output_fingerprint = CASE WHEN $6 THEN $8 ELSE output_fingerprint END, \
               error_kind = COALESCE($9, error_kind), \
               error_message = CASE WHEN $9::text IS NULL THEN error_message ELSE $10 END, \
               attempts = COALESCE($11, attempts) \
               FROM w WHERE id = $1::uuid AND revision = $2 AND status = ANY($16::text[]) \
               RETURNING aiki_runs.*), \
             sleeps AS (UPDATE aiki_sleeps s SET cancelled = true FROM updated u \
               WHERE $17 AND s.run_id = u.id AND NOT s.cancelled AND s.wake_at > $4) \
             SELECT ",
            run_json!(),
            "::text FROM updated r"
        );
        let to = transition.to;
        let wait = transition.wait.clone().unwrap_or_default();
        let (names, indexes): (Vec<String>, Vec<i64>) = wait
            .events
            .iter()
            .map(|(name, index)| (name.clone(), i64::from(*index)))
            .unzip();
        let children: Vec<String> = wait.children.iter().map(RunId::to_string).collect();
        let sources: Vec<String> = sql::sources_of(to).into_iter().map(str::to_owned).collect();
        // When the outcome depends on other rows (a waited-for event or child, sleeps), lock
        // first so the update's snapshot is taken after every racing write to those rows
        // committed. A terminal transition wakes a waiting parent through the
        // `aiki_runs_wake_parent` trigger, whose own statement sees the parent's latest state.
        let depends_on_others = (to.is_suspended() && !(names.is_empty() && children.is_empty()))
            || transition.cancel_sleeps;
        let mut tx = None;
        if depends_on_others {
            let mut open = self.begin().await?;
            if to.is_suspended() && !children.is_empty() {
                self.count(1);
                sqlx::query("SELECT 1 FROM aiki_runs WHERE id = ANY($1::uuid[]) FOR SHARE")
                    .bind(&children)
                    .execute(&mut *open)
                    .await
                    .map_err(map_error)?;
            }
            self.count(1);
            sqlx::query("SELECT 1 FROM aiki_runs WHERE id = $1::uuid FOR UPDATE")
                .bind(id.to_string())
                .execute(&mut *open)
                .await
                .map_err(map_error)?;
            tx = Some(open);
        }
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
            .bind(&names)
            .bind(&indexes)
            .bind(&children)
            .bind(&sources)
            .bind(transition.cancel_sleeps);
        self.count(1);
        let doc = match &mut tx {
            Some(tx) => query.fetch_optional(&mut **tx).await,
            None => query.fetch_optional(&self.pool).await,
        }
        .map_err(map_error)?;
        let Some(doc) = doc else {
            self.count(1);
            let current = sqlx::query("SELECT status, revision FROM aiki_runs WHERE id = $1::uuid")
                .bind(id.to_string());
            let current = match &mut tx {
                Some(tx) => current.fetch_optional(&mut **tx).await,
                None => current.fetch_optional(&self.pool).await,
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
        if let Some(tx) = tx {
            self.commit(tx).await?;
        }
        sql::run_from_json(&doc)
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Vec<RunRecord>, StoreError> {
        if request.limit == 0 || request.namespaces.is_empty() {
            return Ok(Vec::new());
        }
        let namespaces: Vec<String> = request.namespaces.iter().map(|n| n.to_string()).collect();
        self.count(1);
        let docs: Vec<String> = sqlx::query_scalar(concat!(
            "WITH picked AS (SELECT id FROM aiki_runs WHERE status = 'queued' AND pool = $3 \
             AND namespace = ANY($4::text[]) ORDER BY queued_at, id LIMIT $5 \
             FOR UPDATE SKIP LOCKED) \
             UPDATE aiki_runs r SET status = 'running', owner = $1, heartbeat_at = $2, \
             revision = r.revision + 1, due_at = NULL, updated_at = $2 \
             FROM picked WHERE r.id = picked.id AND r.status = 'queued' RETURNING ",
            run_json!(),
            "::text"
        ))
        .bind(&request.owner)
        .bind(request.now)
        .bind(&request.pool)
        .bind(&namespaces)
        .bind(i64::from(request.limit))
        .fetch_all(&self.pool)
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
            "UPDATE aiki_runs SET heartbeat_at = $4 \
             WHERE id = $1::uuid AND revision = $2 AND owner = $3",
        )
        .bind(id.to_string())
        .bind(sql::revision(expected))
        .bind(owner)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        if result.rows_affected() == 0 {
            return Err(self.check_failed(&self.pool, id, expected).await);
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
             SELECT $1::uuid, $2, $3, $4, $5, $6 \
             FROM aiki_runs WHERE id = $1::uuid AND revision = $7 FOR SHARE \
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
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        if result.rows_affected() == 0 {
            return Err(self.check_failed(&self.pool, sleep.run_id, expected).await);
        }
        Ok(())
    }

    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        let mut tx = self.begin().await?;
        // Locking the run serializes index assignment per run, and makes the wake-up below see
        // the run's latest status.
        self.count(1);
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM aiki_runs WHERE id = $1::uuid FOR UPDATE")
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
            "WITH inserted AS (INSERT INTO aiki_events (run_id, name, idx, data, timed_out, \
             reference_id, received_at) \
             SELECT $1::uuid, $2, COALESCE(MAX(idx) + 1, 0), $3, false, $4, $5 FROM aiki_events \
             WHERE run_id = $1::uuid AND name = $2 \
             ON CONFLICT (run_id, name, reference_id) WHERE reference_id IS NOT NULL \
             DO NOTHING RETURNING idx), \
             woken AS (UPDATE aiki_runs SET status = 'scheduled', revision = revision + 1, \
             due_at = $5, updated_at = $5, owner = NULL, heartbeat_at = NULL \
             WHERE id = $1::uuid AND status = 'awaiting_event' \
             AND EXISTS (SELECT 1 FROM inserted)) \
             SELECT idx FROM inserted",
        )
        .bind(event.run_id.to_string())
        .bind(&event.name)
        .bind(sql::json_text(&event.data))
        .bind(&event.reference_id)
        .bind(event.now)
        .fetch_optional(&mut *tx)
        .await
        .map_err(map_error)?;
        self.commit(tx).await?;
        let Some(index) = index else {
            return Ok(AppendOutcome::Duplicate);
        };
        Ok(AppendOutcome::Appended {
            index: u32::try_from(index).map_err(|_| StoreError::Corrupt {
                message: format!("event index {index} is out of range"),
            })?,
            woke: status == RunStatus::AwaitingEvent,
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
             SELECT $1::uuid, $2, $3, NULL, true, NULL, $4 \
             FROM aiki_runs WHERE id = $1::uuid AND revision = $5 FOR SHARE \
             ON CONFLICT (run_id, name, idx) DO NOTHING",
        )
        .bind(id.to_string())
        .bind(name)
        .bind(i64::from(index))
        .bind(now)
        .bind(sql::revision(expected))
        .execute(&self.pool)
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
            "SELECT (SELECT revision FROM aiki_runs WHERE id = $1::uuid), (SELECT ",
            event_json!(),
            "::text FROM aiki_events e WHERE e.run_id = $1::uuid AND e.name = $2 \
             AND e.idx = $3)"
        ))
        .bind(id.to_string())
        .bind(name)
        .bind(i64::from(index))
        .fetch_one(&self.pool)
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
             queued_at = $1, updated_at = $1, owner = NULL, heartbeat_at = NULL \
             WHERE status IN ('scheduled', 'sleeping', 'awaiting_event', 'awaiting_retry', \
             'awaiting_child_workflow') AND due_at <= $1",
        )
        .bind(now)
        .execute(&self.pool)
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
             queued_at = $1, updated_at = $1, owner = NULL, heartbeat_at = NULL \
             WHERE status = 'running' AND (heartbeat_at < $2 \
             OR (heartbeat_at IS NULL AND updated_at < $2)) RETURNING id::text",
        )
        .bind(now)
        .bind(now.saturating_sub(idle_timeout_ms))
        .fetch_all(&self.pool)
        .await
        .map_err(map_error)?;
        sql::parse_ids(&ids)
    }

    async fn stall_undelivered(&self, now: Millis, max_age_ms: i64) -> Result<u64, StoreError> {
        self.count(1);
        let result = sqlx::query(
            "UPDATE aiki_runs SET status = 'stalled', revision = revision + 1, due_at = NULL, \
             updated_at = $1, owner = NULL, heartbeat_at = NULL \
             WHERE status = 'queued' AND COALESCE(queued_at, created_at) < $2",
        )
        .bind(now)
        .bind(now.saturating_sub(max_age_ms))
        .execute(&self.pool)
        .await
        .map_err(map_error)?;
        Ok(result.rows_affected())
    }

    async fn next_due(&self) -> Result<Option<Millis>, StoreError> {
        self.count(1);
        sqlx::query_scalar::<_, Option<i64>>(
            "SELECT MIN(due_at) FROM aiki_runs WHERE status IN ('scheduled', 'sleeping', \
             'awaiting_event', 'awaiting_retry', 'awaiting_child_workflow')",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(map_error)
    }
}
