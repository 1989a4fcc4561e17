//! The statements both databases share, written once.
//!
//! They are written in PostgreSQL's syntax, restricted to what SQLite also accepts once its
//! dialect has rendered them: `$N` placeholders (SQLite reads `$N` as the N-th parameter),
//! `::type` casts (dropped for SQLite), `json_build_object` / `json_build_array` / `json_agg`
//! (SQLite's `json_object` / `json_array` / `json_group_array`) and `FOR SHARE` / `FOR UPDATE`
//! row locks (dropped: SQLite has one writer, whose statement or `BEGIN IMMEDIATE` transaction
//! already sees the latest revision). Lists of statuses are generated from [`RunStatus`], never written as literals.
//! [`Statements::new`] renders them once per store.

mod fragments;

pub(crate) use fragments::*;

use crate::RunStatus;

use super::dialect::{Dialect, DialectStatements};

/// The shared statements, rendered for one dialect, and the dialect's own.
pub(crate) struct Statements {
    /// The statements the dialect writes itself.
    pub(crate) own: DialectStatements,
    /// Inserts a run (see [`super::binds::insert_run`]) unless its namespace and reference id
    /// are taken; returns its document.
    pub(crate) insert_run: String,
    /// `insert_run` that leaves the run's ready hint to the store, sent after its commit (see
    /// `sql::hints`), on a schema whose trigger then stays quiet (PostgreSQL from migration
    /// 26): it sets `aiki.start_hints` for its transaction.
    pub(crate) insert_run_quiet: Option<String>,
    /// The document of the run with `$1` namespace and `$2` reference id.
    pub(crate) select_by_reference: String,
    /// The document of run `$1`.
    pub(crate) get_run: String,
    /// Five documents: run `$1`, its entries, sleeps, events and child runs. Each entry is an
    /// array of its columns, in the order `EntryCells` (`sql::decode`) reads them: a history
    /// holds thousands, and building and reading objects with named fields cost twice as much
    /// (on PostgreSQL, 5.5 against 2.6 ms for 1,000 entries).
    pub(crate) load_history: String,
    /// The revision of run `$1`.
    pub(crate) revision: String,
    /// The address, attempts and retry time of run `$1`'s entries awaiting a retry.
    pub(crate) retry_times: String,
    /// The status and revision of run `$1`.
    pub(crate) status_and_revision: String,
    /// Locks run `$1` for the rest of the transaction; returns its status and wait set.
    pub(crate) lock_status: String,
    /// Upserts one entry (see [`super::binds::upsert_entry`]) if run `$1` has revision `$13`
    /// (and, for a new attempt, no pause requested).
    pub(crate) upsert_entry: String,
    /// Upserts a child start's entry as [`upsert_entry`](Statements::upsert_entry) does a new
    /// attempt's: not while a pause is requested.
    pub(crate) upsert_child_entry: String,
    /// Sets entry `$2`#`$3` of run `$1` to run again: `awaiting_retry`, no attempt made, due
    /// at `$4`, written at `$5` (inside a transition's transaction).
    pub(crate) rerun_entry: String,
    /// Deletes event record `$2`#`$3` of run `$1` (inside a transition's transaction).
    pub(crate) forget_event: String,
    /// Refreshes the claim of run `$1` at revision `$2` held by `$3`: heartbeat `$4` (or the
    /// database's clock, see [`Dialect::claim_time`]); returns 1 when a pause is requested.
    pub(crate) refresh_claim: String,
    /// Upserts a sleep if run `$1` has revision `$7`, its wake time `$5` counted from `$8` when
    /// that is set (see `ExecutorStore::put_sleep`); returns the stored wake time.
    pub(crate) put_sleep: String,
    /// Records slot `$3` of event queue `$2` of run `$1` (data `$4`, timed out `$5`, reference
    /// id `$6`, at `$7`, sent by `$9` on this release's schema), if the run has revision `$8`
    /// and the slot is free.
    pub(crate) insert_slot: String,
    /// Run `$1`'s revision and the document of its event `$2` at index `$3`.
    pub(crate) event_slot: String,
    /// Moves every run with a due timer to `queued` at `$1`, under lease `$2`..`$4` (see
    /// [`fence`]).
    pub(crate) wake_due: String,
    /// Wakes run `$1` for an event, at `$5` (see [`wake_for_event`]).
    pub(crate) wake_for_event: String,
    /// Releases `running` runs at `$1` whose heartbeat is more than `$2` ms old (by
    /// [`Dialect::claim_time`]) and whose stale mark is at least `$3` ms old with no refresh
    /// since (on an older schema: without the mark), under lease `$4`..`$6`; returns their ids.
    pub(crate) release_stale: String,
    /// Marks stale, at `$1`, the claims unrefreshed for more than `$3` ms and not marked since
    /// their last refresh, under lease `$4`..`$6` (`None` on an older schema).
    pub(crate) mark_stale: Option<String>,
    /// Records a pause request on run `$1` if `running` (requested by `$2` at `$3`); returns
    /// its document (`None` on an older schema).
    pub(crate) request_pause: Option<String>,
    /// Releases the claim on run `$1` at revision `$2`, at `$3`, by `$5`, if its stale mark is
    /// at least `$4` ms old with no refresh since (any claim when `$4` is `NULL`); returns its
    /// document (`None` on an older schema).
    pub(crate) release_claim: Option<String>,
    /// Stalls runs queued since before `$2`, at `$1`, under lease `$3`..`$5`.
    pub(crate) stall: String,
    /// Takes or renews lease `$1` for holder `$2` until `$4 + $3` (by
    /// [`Dialect::claim_time`]); returns `(holder, token, expires_at)` when it did (`None` on
    /// an older schema).
    pub(crate) acquire_lease: Option<String>,
    /// `(holder, token, expires_at)` of lease `$1`.
    pub(crate) lease: Option<String>,
    /// Lets lease `$1` of holder `$2` with token `$3` expire at `$4`, if it is still held so.
    pub(crate) release_lease: Option<String>,
    /// `(key, value)` of every stored configuration key.
    pub(crate) config: Option<String>,
    /// Sets configuration key `$1` to `$2` at `$3`.
    pub(crate) set_config: Option<String>,
    /// `(version, 1 if it succeeded)` of every applied migration, in version order.
    pub(crate) applied_migrations: String,
    /// The compatibility record: the oldest schema version whose release reads this one.
    pub(crate) readable_from: String,
    /// Rows `(workflow, version, status, count, NULL)` per workflow version and status, and
    /// `(workflow, version, NULL, NULL, oldest queued time)` per version with queued runs.
    pub(crate) run_counts: String,
    /// `(revision, from, to, reason, actor, at, cause, retry, error kind)` of run `$1`'s status
    /// changes, in order (the last three `NULL` in rows written before the timeline kept facts).
    pub(crate) timeline: String,
    /// Upserts worker `$1` (host `$2`, pid `$3`, namespaces `$4` as a JSON array, pool `$5`,
    /// started `$6`, fingerprints `$8` as a JSON object, stopped `$9`, refresh `$10` and idle
    /// timeout `$11` in ms) seen at `$7` (or the database's clock); returns the time written.
    pub(crate) record_worker: String,
    /// The workers seen within `$2` ms before `$1` (or the database's clock).
    pub(crate) list_workers: String,
    /// Deletes the workers not seen within `$2` ms before `$1` (or the database's clock), under
    /// lease `$3`..`$5`.
    pub(crate) prune_workers: String,
    /// The answers of operations, on a schema that keeps them.
    pub(crate) answers: Option<super::answers::AnswerStatements>,
    /// Upserts the catalog entry of workflow `$1` version `$2` (fingerprint `$3`, the entry as
    /// JSON `$4`, published by `$5` at `$6` or the database's clock); returns the time.
    pub(crate) publish_catalog: String,
    /// Every catalog entry: its JSON, publisher and time, by workflow and version (one per
    /// build on this release's schema).
    pub(crate) catalog: String,
    /// Inserts the entry of one build unless it has one (`$1` workflow, `$2` version, `$3`
    /// fingerprint, `$4` the entry, `$5` publisher, `$6` time): one row if it was new; `None` on
    /// an older schema.
    pub(crate) publish_build: Option<String>,
    /// The stored entry of one build (`$1` workflow, `$2` version, `$3` fingerprint), as
    /// [`catalog`](Statements::catalog) reads it; `None` on an older schema.
    pub(crate) catalog_build: Option<String>,
    /// Records one task a build's runs called (`$1` workflow, `$2` version, `$3` fingerprint,
    /// `$4` name, `$5` declaration) unless known; `None` on a schema before the contract.
    pub(crate) add_catalog_task: Option<String>,
    /// Every called task: workflow, version, fingerprint, declaration; `None` on a schema before
    /// the contract.
    pub(crate) catalog_tasks: Option<String>,
}

impl std::fmt::Debug for Statements {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Pages of SQL would drown a store's debug output.
        f.debug_struct("Statements").finish_non_exhaustive()
    }
}

impl Statements {
    /// The shared statements in `D`'s syntax.
    pub(crate) fn new<D: Dialect>(dialect: &D, level: Level) -> Self {
        let run = run_doc("", level);
        let event_doc = event_doc(level);
        let timers = status_list(RunStatus::wakes_on_timer);
        let render = |sql: String| (D::DRIVER.render)(&sql);
        Statements {
            own: dialect.statements(level),
            insert_run: render(insert_runs(level, &run, false, 1)),
            insert_run_quiet: (level.start_hints && D::START_HINTS < i64::MAX)
                .then(|| render(insert_runs(level, &run, true, 1))),
            select_by_reference: render(format!(
                "SELECT {run}::text FROM aiki_runs WHERE namespace = $1 AND reference_id = $2"
            )),
            get_run: render(format!(
                "SELECT {run}::text FROM aiki_runs WHERE id = $1::uuid"
            )),
            load_history: render(format!(
                "SELECT (SELECT {run}::text FROM aiki_runs WHERE id = $1::uuid), \
                 (SELECT json_agg(json_build_array(address, idx, kind, status, output, \
                 fingerprint, attempts, error_kind, error_message, retry_at, updated_at\
                 {entry_input}))::text FROM aiki_entries WHERE run_id = $1::uuid), \
                 (SELECT json_agg(json_build_object('run_id', run_id::text, 'name', name, \
                 'idx', idx, 'duration_ms', duration_ms, 'wake_at', wake_at, \
                 'cancelled', cancelled))::text FROM aiki_sleeps WHERE run_id = $1::uuid), \
                 (SELECT json_agg({event_doc})::text FROM aiki_events e \
                 WHERE e.run_id = $1::uuid), \
                 (SELECT json_agg({child})::text FROM aiki_runs r \
                 WHERE r.id IN (SELECT trim(c.output, '\"')::uuid FROM aiki_entries c \
                 WHERE c.run_id = $1::uuid AND c.kind = 'child'))",
                child = child_doc(level),
                entry_input = if level.operations { ", input" } else { "" },
            )),
            revision: render("SELECT revision FROM aiki_runs WHERE id = $1::uuid".to_owned()),
            retry_times: render(
                "SELECT address, attempts, retry_at FROM aiki_entries \
                 WHERE run_id = $1::uuid AND status = 'awaiting_retry' AND retry_at IS NOT NULL"
                    .to_owned(),
            ),
            status_and_revision: render(
                "SELECT status, revision FROM aiki_runs WHERE id = $1::uuid".to_owned(),
            ),
            lock_status: render(
                "SELECT status, wait_set FROM aiki_runs WHERE id = $1::uuid FOR UPDATE".to_owned(),
            ),
            upsert_entry: render(upsert_entry(level, "$5")),
            upsert_child_entry: render(upsert_entry(level, "'running'")),
            rerun_entry: render(
                "UPDATE aiki_entries SET status = 'awaiting_retry', attempts = 0, \
                 retry_at = $4, updated_at = $5 \
                 WHERE run_id = $1::uuid AND address = $2 AND idx = $3"
                    .to_owned(),
            ),
            forget_event: render(
                "DELETE FROM aiki_events WHERE run_id = $1::uuid AND name = $2 AND idx = $3"
                    .to_owned(),
            ),
            refresh_claim: render(if level.operations {
                format!(
                    "UPDATE aiki_runs SET heartbeat_at = {now}, stale_since = NULL \
                     WHERE id = $1::uuid AND revision = $2 AND owner = $3 \
                     RETURNING (CASE WHEN pause_requested_at IS NULL THEN 0 ELSE 1 END)::bigint",
                    now = dialect.claim_time("$4")
                )
            } else {
                format!(
                    "UPDATE aiki_runs SET heartbeat_at = {now} \
                     WHERE id = $1::uuid AND revision = $2 AND owner = $3 RETURNING 0::bigint",
                    now = dialect.claim_time("$4")
                )
            }),
            // A wake time counted from `$8` moves onto the store's clock (the caller's, unless
            // the store reads the database's).
            put_sleep: render(format!(
                "INSERT INTO aiki_sleeps (run_id, name, idx, duration_ms, wake_at, cancelled) \
                 SELECT $1::uuid, $2, $3, $4, \
                 CASE WHEN $8 IS NULL THEN $5 ELSE $5 - $8 + {now} END, $6 \
                 FROM aiki_runs WHERE id = $1::uuid AND revision = $7 FOR SHARE \
                 ON CONFLICT (run_id, name, idx) DO UPDATE SET \
                 duration_ms = excluded.duration_ms, wake_at = excluded.wake_at, \
                 cancelled = excluded.cancelled RETURNING wake_at",
                now = dialect.claim_time("$8")
            )),
            insert_slot: render(format!(
                "INSERT INTO aiki_events (run_id, name, idx, data, timed_out, reference_id, \
                 received_at{sent_by}) \
                 SELECT $1::uuid, $2, $3, $4, $5, $6, $7{sender} \
                 FROM aiki_runs WHERE id = $1::uuid AND revision = $8 FOR SHARE \
                 ON CONFLICT (run_id, name, idx) DO NOTHING",
                sent_by = if level.operations { ", sent_by" } else { "" },
                sender = if level.operations { ", $9" } else { "" },
            )),
            event_slot: render(format!(
                "SELECT (SELECT revision FROM aiki_runs WHERE id = $1::uuid), \
                 (SELECT {event_doc}::text FROM aiki_events e \
                 WHERE e.run_id = $1::uuid AND e.name = $2 AND e.idx = $3)"
            )),
            wake_due: render(format!(
                "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, \
                 due_at = NULL, queued_at = $1, updated_at = $1, owner = NULL, \
                 heartbeat_at = NULL WHERE {due} AND id IN (SELECT id FROM aiki_runs \
                 WHERE {due} ORDER BY due_at LIMIT $2){fence}",
                due = format!("status IN {timers} AND due_at <= $1"),
                fence = fence(dialect, level, "$1", 3),
            )),
            wake_for_event: render(wake_for_event(level)),
            release_stale: render(if level.operations {
                let stale = format!(
                    "status = 'running' AND (heartbeat_at < {now} - $2 \
                     OR (heartbeat_at IS NULL AND updated_at < $1 - $2)) AND {confirmed}",
                    now = dialect.claim_time("$1"),
                    confirmed = confirmed_stale(&dialect.claim_time("$1"), "$3", Some("$5")),
                );
                format!(
                    "UPDATE aiki_runs SET {release} WHERE {stale} AND id IN (SELECT id \
                     FROM aiki_runs WHERE {stale} ORDER BY heartbeat_at LIMIT $4){fence} \
                     RETURNING id::text",
                    release = release_set("$1", "pause_requested_by"),
                    fence = fence(dialect, level, "$1", 6),
                )
            } else {
                // The schema of the previous release: one phase.
                let stale = format!(
                    "status = 'running' AND (heartbeat_at < {now} - $2 \
                     OR (heartbeat_at IS NULL AND updated_at < $1 - $2))",
                    now = dialect.claim_time("$1")
                );
                format!(
                    "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, \
                     due_at = NULL, queued_at = $1, updated_at = $1, owner = NULL, \
                     heartbeat_at = NULL WHERE {stale} AND id IN (SELECT id FROM aiki_runs \
                     WHERE {stale} ORDER BY heartbeat_at LIMIT $4) RETURNING id::text"
                )
            }),
            // A claim unrefreshed for longer than the window `$3` is marked, unless its mark is
            // still current: set since its last refresh, and holding (see `confirmed_stale`;
            // `$5` since when the sweeper has led without a break).
            mark_stale: level.operations.then(|| {
                let unmarked = format!(
                    "status = 'running' AND (heartbeat_at < {now} - $3 \
                     OR (heartbeat_at IS NULL AND updated_at < $1 - $3)) \
                     AND (stale_since IS NULL OR heartbeat_at > stale_since \
                       OR NOT {holds})",
                    now = dialect.claim_time("$1"),
                    holds = mark_holds(&dialect.claim_time("$1"), "$3", Some("$5")),
                );
                render(format!(
                    "UPDATE aiki_runs SET stale_since = {now} WHERE {unmarked} AND id IN \
                     (SELECT id FROM aiki_runs WHERE {unmarked} ORDER BY heartbeat_at \
                     LIMIT $4){fence}",
                    now = dialect.claim_time("$1"),
                    fence = fence(dialect, level, "$1", 6),
                ))
            }),
            release_claim: level.operations.then(|| {
                render(format!(
                    "UPDATE aiki_runs SET {release} \
                     WHERE id = $1::uuid AND revision = $2 AND status = 'running' \
                     AND ($4::bigint IS NULL OR {confirmed}) \
                     RETURNING {run}::text",
                    release = release_set("$3", "$5"),
                    confirmed = confirmed_stale(&dialect.claim_time("$3"), "$4", None),
                ))
            }),
            request_pause: level.operations.then(|| {
                render(format!(
                    "UPDATE aiki_runs SET pause_requested_at = COALESCE(pause_requested_at, $3), \
                     pause_requested_by = CASE WHEN pause_requested_at IS NULL THEN $2 \
                       ELSE pause_requested_by END \
                     WHERE id = $1::uuid AND status = 'running' RETURNING {run}::text"
                ))
            }),
            applied_migrations: render(
                "SELECT version, (CASE WHEN success THEN 1 ELSE 0 END)::bigint \
                 FROM _sqlx_migrations ORDER BY version"
                    .to_owned(),
            ),
            readable_from: "SELECT readable_from FROM aiki_compat WHERE id = 1".to_owned(),
            record_worker: render(if level.operations {
                format!(
                    "INSERT INTO aiki_workers (id, host, pid, namespaces, pool, started_at, \
                     last_seen_at, fingerprints, stopped_at, claim_refresh_ms, \
                     claim_idle_timeout_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, {now}, $8, $9, $10, $11) \
                     ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, \
                     namespaces = excluded.namespaces, pool = excluded.pool, \
                     started_at = excluded.started_at, last_seen_at = excluded.last_seen_at, \
                     fingerprints = excluded.fingerprints, stopped_at = excluded.stopped_at, \
                     claim_refresh_ms = excluded.claim_refresh_ms, \
                     claim_idle_timeout_ms = excluded.claim_idle_timeout_ms \
                     RETURNING last_seen_at",
                    now = dialect.claim_time("$7")
                )
            } else {
                format!(
                    "INSERT INTO aiki_workers (id, host, pid, namespaces, pool, started_at, \
                     last_seen_at) VALUES ($1, $2, $3, $4, $5, $6, {now}) \
                     ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, \
                     namespaces = excluded.namespaces, pool = excluded.pool, \
                     started_at = excluded.started_at, last_seen_at = excluded.last_seen_at \
                     RETURNING last_seen_at",
                    now = dialect.claim_time("$7")
                )
            }),
            list_workers: render(format!(
                "SELECT id, host, pid, namespaces, pool, started_at, last_seen_at, {more} \
                 FROM aiki_workers WHERE last_seen_at >= {now} - $2 ORDER BY id",
                now = dialect.claim_time("$1"),
                more = if level.operations {
                    "fingerprints, stopped_at, claim_refresh_ms, claim_idle_timeout_ms"
                } else {
                    "NULL::text, NULL::bigint, NULL::bigint, NULL::bigint"
                }
            )),
            answers: super::answers::AnswerStatements::new(dialect, level),
            prune_workers: render(format!(
                "DELETE FROM aiki_workers WHERE last_seen_at < {now} - $2{fence}",
                now = dialect.claim_time("$1"),
                fence = fence(dialect, level, "$1", 3),
            )),
            publish_catalog: render(format!(
                "INSERT INTO aiki_catalog (workflow, version, fingerprint, entry, published_by, \
                 published_at) VALUES ($1, $2, $3, $4, $5, {now}) \
                 ON CONFLICT (workflow, version) DO UPDATE SET \
                 fingerprint = excluded.fingerprint, entry = excluded.entry, \
                 published_by = excluded.published_by, published_at = excluded.published_at \
                 RETURNING published_at",
                now = dialect.claim_time("$6")
            )),
            publish_build: level.operations.then(|| {
                render(format!(
                    "INSERT INTO aiki_catalog_builds (workflow, version, fingerprint, entry, \
                     published_by, published_at) VALUES ($1, $2, $3, $4, $5, {now}) \
                     ON CONFLICT (workflow, version, fingerprint) DO NOTHING",
                    now = dialect.claim_time("$6")
                ))
            }),
            catalog_build: level.operations.then(|| {
                render(
                    "SELECT entry, published_by, published_at FROM aiki_catalog_builds \
                     WHERE workflow = $1 AND version = $2 AND fingerprint = $3"
                        .to_owned(),
                )
            }),
            add_catalog_task: level.contract.then(|| {
                render(
                    "INSERT INTO aiki_catalog_tasks (workflow, version, fingerprint, name, \
                     declaration) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (workflow, version, fingerprint, name) DO NOTHING"
                        .to_owned(),
                )
            }),
            catalog_tasks: level.contract.then(|| {
                render(
                    "SELECT workflow, version, fingerprint, declaration FROM aiki_catalog_tasks \
                     ORDER BY workflow, version, fingerprint, name"
                        .to_owned(),
                )
            }),
            catalog: render(if level.operations {
                "SELECT entry, published_by, published_at FROM aiki_catalog_builds \
                 ORDER BY workflow, version, published_at, fingerprint"
                    .to_owned()
            } else {
                "SELECT entry, published_by, published_at FROM aiki_catalog \
                 ORDER BY workflow, version"
                    .to_owned()
            }),
            timeline: render(format!(
                "SELECT revision, from_status, to_status, reason, actor, at, {facts} \
                 FROM aiki_timeline WHERE run_id = $1::uuid ORDER BY revision",
                facts = if level.operations {
                    "cause, (CASE WHEN retry THEN 1 WHEN NOT retry THEN 0 END)::bigint, \
                     error_kind"
                } else {
                    "NULL::text, NULL::bigint, NULL::text"
                }
            )),
            run_counts: render(
                "SELECT workflow, version, status, COUNT(*)::bigint, NULL::bigint \
                 FROM aiki_runs GROUP BY workflow, version, status \
                 UNION ALL SELECT workflow, version, NULL::text, NULL::bigint, \
                 MIN(COALESCE(queued_at, created_at))::bigint FROM aiki_runs \
                 WHERE status = 'queued' GROUP BY workflow, version"
                    .to_owned(),
            ),
            stall: render(format!(
                "UPDATE aiki_runs SET status = 'stalled', revision = revision + 1, \
                 due_at = NULL, updated_at = $1, owner = NULL, heartbeat_at = NULL \
                 WHERE {old} AND id IN (SELECT id FROM aiki_runs WHERE {old} \
                 ORDER BY COALESCE(queued_at, created_at) LIMIT $3){fence}",
                old = "status = 'queued' AND COALESCE(queued_at, created_at) < $2",
                fence = fence(dialect, level, "$1", 4),
            )),
            acquire_lease: level.leases.then(|| {
                render(format!(
                    "INSERT INTO aiki_leases (name, holder, token, expires_at) \
                     VALUES ($1, $2, 1, {now} + $3) \
                     ON CONFLICT (name) DO UPDATE SET \
                     token = CASE WHEN aiki_leases.holder = excluded.holder \
                       AND aiki_leases.expires_at > {now} \
                       THEN aiki_leases.token ELSE aiki_leases.token + 1 END, \
                     holder = excluded.holder, expires_at = excluded.expires_at \
                     WHERE aiki_leases.holder = excluded.holder \
                       OR aiki_leases.expires_at <= {now} \
                     RETURNING holder, token, expires_at",
                    now = dialect.claim_time("$4"),
                ))
            }),
            lease: level.leases.then(|| {
                render(
                    "SELECT holder, token, expires_at FROM aiki_leases WHERE name = $1".to_owned(),
                )
            }),
            release_lease: level.leases.then(|| {
                render(format!(
                    "UPDATE aiki_leases SET expires_at = {now} \
                     WHERE name = $1 AND holder = $2 AND token = $3 AND expires_at > {now}",
                    now = dialect.claim_time("$4"),
                ))
            }),
            config: level
                .config
                .then(|| render("SELECT key, value FROM aiki_config".to_owned())),
            set_config: level.config.then(|| {
                render(
                    "INSERT INTO aiki_config (key, value, updated_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value, \
                     updated_at = excluded.updated_at"
                        .to_owned(),
                )
            }),
        }
    }
}
