//! The statements both databases share, written once.
//!
//! They are written in PostgreSQL's syntax, restricted to what SQLite also accepts once its
//! dialect has rendered them: `$N` placeholders (SQLite reads `$N` as the N-th parameter),
//! `::type` casts (dropped for SQLite), `json_build_object` / `json_agg` (SQLite's
//! `json_object` / `json_group_array`) and `FOR SHARE` / `FOR UPDATE` row locks (dropped: SQLite
//! has one writer, whose statement or `BEGIN IMMEDIATE` transaction already sees the latest
//! revision). Lists of statuses are generated from [`RunStatus`], never written as literals.
//! [`Statements::new`] renders them once per store.

use crate::RunStatus;

use super::dialect::{Dialect, DialectStatements};

/// A SQL list of the statuses `keep` selects: `('completed', 'failed', 'cancelled')`.
pub(crate) fn status_list(keep: impl Fn(RunStatus) -> bool) -> String {
    let quoted: Vec<String> = RunStatus::ALL
        .into_iter()
        .filter(|status| keep(*status))
        .map(|status| format!("'{}'", status.as_str()))
        .collect();
    format!("({})", quoted.join(", "))
}

/// Every status a run may move to `to` from, by the transition table.
pub(crate) fn sources_of(to: RunStatus) -> Vec<String> {
    RunStatus::ALL
        .into_iter()
        .filter(|from| from.can_move_to(to))
        .map(|from| from.as_str().to_owned())
        .collect()
}

/// The JSON document of a run row (see `decode::RunRow`), its columns prefixed by `alias`
/// (`"r."`, or `""`).
pub(crate) fn run_doc(alias: &str) -> String {
    let a = alias;
    format!(
        "json_build_object('id', {a}id::text, 'workflow', {a}workflow, \
         'version', {a}version, 'input', {a}input, 'input_hash', {a}input_hash, \
         'reference_id', {a}reference_id, 'pool', {a}pool, 'status', {a}status, \
         'revision', {a}revision, 'attempts', {a}attempts, 'owner', {a}owner, \
         'heartbeat_at', {a}heartbeat_at, 'due_at', {a}due_at, 'queued_at', {a}queued_at, \
         'output', {a}output, 'output_fingerprint', {a}output_fingerprint, \
         'error_kind', {a}error_kind, 'error_message', {a}error_message, \
         'error_address', {a}error_address, 'error_index', {a}error_index, \
         'parent_run_id', {a}parent_run_id::text, 'parent_address', {a}parent_address, \
         'traceparent', {a}traceparent, 'wait_set', {a}wait_set, \
         'forked_from', {a}forked_from::text, 'lineage_root', {a}lineage_root::text, \
         'created_at', {a}created_at, 'updated_at', {a}updated_at)"
    )
}

/// The JSON document of a child run aliased `r`, as a history holds it: a run document
/// without the input (`null`).
fn child_doc() -> String {
    run_doc("r.").replace("'input', r.input,", "'input', 'null',")
}

/// The JSON document of an event row aliased `e`.
const EVENT_DOC: &str = "json_build_object('run_id', e.run_id::text, 'name', e.name, \
     'idx', e.idx, 'data', e.data, 'timed_out', e.timed_out, 'reference_id', e.reference_id, \
     'received_at', e.received_at)";

/// The columns of an entry upsert after `INSERT INTO aiki_entries`, and its conflict clause.
pub(crate) const ENTRY_COLUMNS: &str = "(run_id, address, idx, kind, status, output, fingerprint, \
     attempts, error_kind, error_message, retry_at, updated_at)";

/// What an entry upsert does when the key is taken.
pub(crate) const ENTRY_CONFLICT: &str = "ON CONFLICT (run_id, address, idx) DO UPDATE SET \
     kind = excluded.kind, status = excluded.status, output = excluded.output, \
     fingerprint = excluded.fingerprint, attempts = excluded.attempts, \
     error_kind = excluded.error_kind, error_message = excluded.error_message, \
     retry_at = excluded.retry_at, updated_at = excluded.updated_at";

/// The `SET` list of a transition's guarded update (see [`super::binds::transition`] for the
/// parameters): `w.sat` is whether the awaited thing is already there, which lands a
/// suspension in `scheduled`, due now.
pub(crate) const TRANSITION_SET: &str = "status = CASE WHEN w.sat THEN 'scheduled' ELSE $3 END, \
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
     error_address = CASE WHEN $9::text IS NULL THEN error_address ELSE $20 END, \
     error_index = CASE WHEN $9::text IS NULL THEN error_index ELSE $21 END, \
     attempts = COALESCE($11, attempts), \
     wait_set = CASE WHEN w.sat THEN NULL ELSE $18 END";

/// Inserts an event at the next index of its name's queue (see [`super::binds::event`]);
/// returns the index, or nothing for a reference id already seen.
pub(crate) const INSERT_EVENT: &str = "INSERT INTO aiki_events (run_id, name, idx, data, \
     timed_out, reference_id, received_at) \
     SELECT $1::uuid, $2, COALESCE(MAX(idx) + 1, 0), $3, false, $4, $5 \
     FROM aiki_events WHERE run_id = $1::uuid AND name = $2 \
     ON CONFLICT (run_id, name, reference_id) WHERE reference_id IS NOT NULL \
     DO NOTHING RETURNING idx";

/// Wakes run `$1` to `scheduled`, due at `$5`, if it awaits an event.
pub(crate) const WAKE_FOR_EVENT: &str = "UPDATE aiki_runs SET status = 'scheduled', \
     revision = revision + 1, due_at = $5, updated_at = $5, owner = NULL, heartbeat_at = NULL \
     WHERE id = $1::uuid AND status = 'awaiting_event'";

/// The shared statements, rendered for one dialect, and the dialect's own.
#[derive(Debug)]
pub(crate) struct Statements {
    /// The statements the dialect writes itself.
    pub(crate) own: DialectStatements,
    /// Inserts a run (see [`super::binds::insert_run`]) unless its namespace and reference id
    /// are taken; returns its document.
    pub(crate) insert_run: String,
    /// The document of the run with `$1` namespace and `$2` reference id.
    pub(crate) select_by_reference: String,
    /// The document of run `$1`.
    pub(crate) get_run: String,
    /// Five documents: run `$1`, its entries, sleeps, events and child runs.
    pub(crate) load_history: String,
    /// The revision of run `$1`.
    pub(crate) revision: String,
    /// The status and revision of run `$1`.
    pub(crate) status_and_revision: String,
    /// Locks run `$1` for the rest of the transaction; returns its status.
    pub(crate) lock_status: String,
    /// Upserts one entry (see [`super::binds::upsert_entry`]) if run `$1` has revision `$13`.
    pub(crate) upsert_entry: String,
    /// Sets entry `$2`#`$3` of run `$1` to run again: `awaiting_retry`, no attempt made, due
    /// at `$4`, written at `$5` (inside a transition's transaction).
    pub(crate) rerun_entry: String,
    /// Refreshes the claim of run `$1` at revision `$2` held by `$3`: heartbeat `$4` (or the
    /// database's clock, see [`Dialect::claim_time`]).
    pub(crate) refresh_claim: String,
    /// Upserts a sleep if run `$1` has revision `$7`.
    pub(crate) put_sleep: String,
    /// Records slot `$3` of event queue `$2` of run `$1` (data `$4`, timed out `$5`, reference
    /// id `$6`, at `$7`), if the run has revision `$8` and the slot is free.
    pub(crate) insert_slot: String,
    /// Run `$1`'s revision and the document of its event `$2` at index `$3`.
    pub(crate) event_slot: String,
    /// Moves every run with a due timer to `queued` at `$1`.
    pub(crate) wake_due: String,
    /// Wakes run `$1` for an event, at `$5` (see [`WAKE_FOR_EVENT`]).
    pub(crate) wake_for_event: String,
    /// Releases `running` runs at `$1` whose heartbeat is more than `$2` ms old (by
    /// [`Dialect::claim_time`]); returns their ids.
    pub(crate) release_stale: String,
    /// Stalls runs queued since before `$2`, at `$1`.
    pub(crate) stall: String,
    /// `(version, 1 if it succeeded)` of every applied migration, in version order.
    pub(crate) applied_migrations: String,
    /// Rows `(workflow, version, status, count, NULL)` per workflow version and status, and
    /// `(workflow, version, NULL, NULL, oldest queued time)` per version with queued runs.
    pub(crate) run_counts: String,
    /// `(revision, from, to, reason, actor, at)` of run `$1`'s status changes, in order.
    pub(crate) timeline: String,
    /// Upserts worker `$1` (host `$2`, pid `$3`, namespaces `$4` as a JSON array, pool `$5`,
    /// started `$6`) seen at `$7` (or the database's clock); returns the time written.
    pub(crate) record_worker: String,
    /// The workers seen within `$2` ms before `$1` (or the database's clock).
    pub(crate) list_workers: String,
    /// Upserts the catalog entry of workflow `$1` version `$2` (fingerprint `$3`, the entry as
    /// JSON `$4`, published by `$5` at `$6` or the database's clock); returns the time.
    pub(crate) publish_catalog: String,
    /// Every catalog entry: its JSON, publisher and time, by workflow and version.
    pub(crate) catalog: String,
}

impl Statements {
    /// The shared statements in `D`'s syntax.
    pub(crate) fn new<D: Dialect>(dialect: &D) -> Self {
        let run = run_doc("");
        let timers = status_list(RunStatus::wakes_on_timer);
        let render = |sql: String| (D::DRIVER.render)(&sql);
        Statements {
            own: dialect.statements(),
            insert_run: render(format!(
                "INSERT INTO aiki_runs (id, namespace, workflow, version, input, input_hash, \
                 reference_id, pool, status, revision, attempts, due_at, queued_at, \
                 parent_run_id, parent_address, traceparent, forked_from, lineage_root, \
                 created_at, updated_at) \
                 VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, 1, 1, $10, $11, $12::uuid, \
                 $13, $15, $16::uuid, $17::uuid, $14, $14) \
                 ON CONFLICT (namespace, reference_id) DO NOTHING RETURNING {run}::text"
            )),
            select_by_reference: render(format!(
                "SELECT {run}::text FROM aiki_runs WHERE namespace = $1 AND reference_id = $2"
            )),
            get_run: render(format!(
                "SELECT {run}::text FROM aiki_runs WHERE id = $1::uuid"
            )),
            load_history: render(format!(
                "SELECT (SELECT {run}::text FROM aiki_runs WHERE id = $1::uuid), \
                 (SELECT json_agg(json_build_object('run_id', run_id::text, \
                 'address', address, 'idx', idx, 'kind', kind, 'status', status, \
                 'output', output, 'fingerprint', fingerprint, 'attempts', attempts, \
                 'error_kind', error_kind, 'error_message', error_message, \
                 'retry_at', retry_at, 'updated_at', updated_at))::text \
                 FROM aiki_entries WHERE run_id = $1::uuid), \
                 (SELECT json_agg(json_build_object('run_id', run_id::text, 'name', name, \
                 'idx', idx, 'duration_ms', duration_ms, 'wake_at', wake_at, \
                 'cancelled', cancelled))::text FROM aiki_sleeps WHERE run_id = $1::uuid), \
                 (SELECT json_agg({EVENT_DOC})::text FROM aiki_events e \
                 WHERE e.run_id = $1::uuid), \
                 (SELECT json_agg({child})::text FROM aiki_runs r \
                 WHERE r.id IN (SELECT trim(c.output, '\"')::uuid FROM aiki_entries c \
                 WHERE c.run_id = $1::uuid AND c.kind = 'child'))",
                child = child_doc()
            )),
            revision: render("SELECT revision FROM aiki_runs WHERE id = $1::uuid".to_owned()),
            status_and_revision: render(
                "SELECT status, revision FROM aiki_runs WHERE id = $1::uuid".to_owned(),
            ),
            lock_status: render(
                "SELECT status FROM aiki_runs WHERE id = $1::uuid FOR UPDATE".to_owned(),
            ),
            upsert_entry: render(format!(
                "INSERT INTO aiki_entries {ENTRY_COLUMNS} \
                 SELECT $1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 \
                 FROM aiki_runs WHERE id = $1::uuid AND revision = $13 FOR SHARE \
                 {ENTRY_CONFLICT}"
            )),
            rerun_entry: render(
                "UPDATE aiki_entries SET status = 'awaiting_retry', attempts = 0, \
                 retry_at = $4, updated_at = $5 \
                 WHERE run_id = $1::uuid AND address = $2 AND idx = $3"
                    .to_owned(),
            ),
            refresh_claim: render(format!(
                "UPDATE aiki_runs SET heartbeat_at = {} \
                 WHERE id = $1::uuid AND revision = $2 AND owner = $3",
                dialect.claim_time("$4")
            )),
            put_sleep: render(
                "INSERT INTO aiki_sleeps (run_id, name, idx, duration_ms, wake_at, cancelled) \
                 SELECT $1::uuid, $2, $3, $4, $5, $6 \
                 FROM aiki_runs WHERE id = $1::uuid AND revision = $7 FOR SHARE \
                 ON CONFLICT (run_id, name, idx) DO UPDATE SET \
                 duration_ms = excluded.duration_ms, wake_at = excluded.wake_at, \
                 cancelled = excluded.cancelled"
                    .to_owned(),
            ),
            insert_slot: render(
                "INSERT INTO aiki_events (run_id, name, idx, data, timed_out, reference_id, \
                 received_at) \
                 SELECT $1::uuid, $2, $3, $4, $5, $6, $7 \
                 FROM aiki_runs WHERE id = $1::uuid AND revision = $8 FOR SHARE \
                 ON CONFLICT (run_id, name, idx) DO NOTHING"
                    .to_owned(),
            ),
            event_slot: render(format!(
                "SELECT (SELECT revision FROM aiki_runs WHERE id = $1::uuid), \
                 (SELECT {EVENT_DOC}::text FROM aiki_events e \
                 WHERE e.run_id = $1::uuid AND e.name = $2 AND e.idx = $3)"
            )),
            wake_due: render(format!(
                "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, \
                 due_at = NULL, queued_at = $1, updated_at = $1, owner = NULL, \
                 heartbeat_at = NULL WHERE status IN {timers} AND due_at <= $1"
            )),
            wake_for_event: render(WAKE_FOR_EVENT.to_owned()),
            release_stale: render(format!(
                "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, \
                 due_at = NULL, queued_at = $1, updated_at = $1, owner = NULL, \
                 heartbeat_at = NULL WHERE status = 'running' AND (heartbeat_at < {} - $2 \
                 OR (heartbeat_at IS NULL AND updated_at < $1 - $2)) RETURNING id::text",
                dialect.claim_time("$1")
            )),
            applied_migrations: render(
                "SELECT version, (CASE WHEN success THEN 1 ELSE 0 END)::bigint \
                 FROM _sqlx_migrations ORDER BY version"
                    .to_owned(),
            ),
            record_worker: render(format!(
                "INSERT INTO aiki_workers (id, host, pid, namespaces, pool, started_at, \
                 last_seen_at) VALUES ($1, $2, $3, $4, $5, $6, {now}) \
                 ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, \
                 namespaces = excluded.namespaces, pool = excluded.pool, \
                 started_at = excluded.started_at, last_seen_at = excluded.last_seen_at \
                 RETURNING last_seen_at",
                now = dialect.claim_time("$7")
            )),
            list_workers: render(format!(
                "SELECT id, host, pid, namespaces, pool, started_at, last_seen_at \
                 FROM aiki_workers WHERE last_seen_at >= {now} - $2 ORDER BY id",
                now = dialect.claim_time("$1")
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
            catalog: render(
                "SELECT entry, published_by, published_at FROM aiki_catalog \
                 ORDER BY workflow, version"
                    .to_owned(),
            ),
            timeline: render(
                "SELECT revision, from_status, to_status, reason, actor, at FROM aiki_timeline \
                 WHERE run_id = $1::uuid ORDER BY revision"
                    .to_owned(),
            ),
            run_counts: render(
                "SELECT workflow, version, status, COUNT(*)::bigint, NULL::bigint \
                 FROM aiki_runs GROUP BY workflow, version, status \
                 UNION ALL SELECT workflow, version, NULL::text, NULL::bigint, \
                 MIN(COALESCE(queued_at, created_at))::bigint FROM aiki_runs \
                 WHERE status = 'queued' GROUP BY workflow, version"
                    .to_owned(),
            ),
            stall: render(
                "UPDATE aiki_runs SET status = 'stalled', revision = revision + 1, \
                 due_at = NULL, updated_at = $1, owner = NULL, heartbeat_at = NULL \
                 WHERE status = 'queued' AND COALESCE(queued_at, created_at) < $2"
                    .to_owned(),
            ),
        }
    }
}

/// Renders a shared statement for SQLite (see the module docs).
#[cfg(any(feature = "sqlite", test))]
pub(crate) fn render_for_sqlite(sql: &str) -> String {
    super::dialect::strip_casts(sql)
        .replace("json_build_object(", "json_object(")
        .replace("json_agg(", "json_group_array(")
        .replace(" FOR SHARE", "")
        .replace(" FOR UPDATE", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lists_follow_the_status_table() {
        assert_eq!(
            status_list(RunStatus::is_terminal),
            "('completed', 'failed', 'cancelled')"
        );
        assert_eq!(
            status_list(RunStatus::wakes_on_timer),
            "('scheduled', 'sleeping', 'awaiting_event', 'awaiting_retry', \
             'awaiting_child_workflow')"
        );
    }

    /// The wake-parent triggers of migration 0002 name the terminal statuses as literals
    /// (applied migrations are immutable): they must be exactly the statuses `is_terminal`
    /// selects, or a status added later would end a child without waking its parent.
    #[test]
    fn the_trigger_names_exactly_the_terminal_statuses() {
        let terminal = status_list(RunStatus::is_terminal);
        for trigger in [
            include_str!("../../migrations/sqlite/0002_wake_parent_trigger.sql"),
            include_str!("../../migrations/postgres/0002_wake_parent_trigger.sql"),
        ] {
            assert!(
                trigger.contains(&format!("NEW.status IN {terminal}")),
                "{trigger}"
            );
            assert!(
                trigger.contains(&format!("OLD.status NOT IN {terminal}")),
                "{trigger}"
            );
        }
    }

    #[test]
    fn sqlite_rendering_keeps_placeholders_and_drops_what_sqlite_lacks() {
        let rendered = render_for_sqlite(
            "SELECT json_agg(json_build_object('id', id::text))::text FROM aiki_runs \
             WHERE id = $1::uuid FOR SHARE",
        );
        assert_eq!(
            rendered,
            "SELECT json_group_array(json_object('id', id)) FROM aiki_runs WHERE id = $1"
        );
    }
}
