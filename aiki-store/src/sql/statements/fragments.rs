//! The pieces the shared statements are built of: lists of statuses, the schema level a store
//! writes for, the JSON documents statements return, and the SET lists and conditions several
//! statements share.

use crate::RunStatus;

use super::super::dialect::Dialect;

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

/// The schema a store renders its statements for: its own release's, or an older one it still
/// reads (a pre-deploy check before the migration; a release capped to its predecessor's
/// schema in the rolling-deploy tests). Each flag names a migration's additions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Level {
    /// The operations migration (SQLite 10, PostgreSQL 11): change notes and timeline facts,
    /// pause requests, two-phase claim recovery, event senders, task inputs, worker builds.
    pub(crate) operations: bool,
    /// The contract migration (SQLite 11, PostgreSQL 12): the outbox.
    pub(crate) contract: bool,
    /// The leases migration (SQLite 12, PostgreSQL 14): the daemons' leader lease.
    pub(crate) leases: bool,
    /// The configuration migration (SQLite 16, PostgreSQL 17): the runtime configuration.
    pub(crate) config: bool,
    /// The API keys migration (SQLite 17, PostgreSQL 18): the keys an aiki server checks.
    pub(crate) keys: bool,
    /// The operation answers migration (SQLite 18, PostgreSQL 19): first answers of
    /// operations sent with an id (see [`crate::operation`]).
    pub(crate) answers: bool,
    /// The endpoints migration (SQLite 19, PostgreSQL 21): push endpoints and their secrets.
    pub(crate) endpoints: bool,
    /// The schedules migration (SQLite 20, PostgreSQL 22): schedules and their log.
    pub(crate) schedules: bool,
    /// The ended runs migration (SQLite 21, PostgreSQL 23): the index of ended runs
    /// (`aiki_runs_ended`) that retention reads.
    pub(crate) ended_runs: bool,
    /// The continuation migration (SQLite 22, PostgreSQL 25): continue-as-new's links.
    pub(crate) continuation: bool,
    /// The start hints migration (PostgreSQL 26; none on SQLite, which sends no hints): the
    /// store sends the ready hints of the runs it starts, after their commit.
    pub(crate) start_hints: bool,
    /// The answer digests migration (SQLite 24, PostgreSQL 28): each first answer keeps the
    /// digest of the request it answered, and a repeat with another is refused.
    pub(crate) answer_digests: bool,
}

impl Level {
    /// The schema of this release.
    pub(crate) const CURRENT: Level = Level {
        operations: true,
        contract: true,
        leases: true,
        config: true,
        keys: true,
        answers: true,
        endpoints: true,
        schedules: true,
        ended_runs: true,
        continuation: true,
        start_hints: true,
        answer_digests: true,
    };

    /// The schema at migration `version` of dialect `D`.
    pub(crate) fn at<D: Dialect>(version: i64) -> Level {
        Level {
            operations: version >= D::OPERATIONS,
            contract: version >= D::CONTRACT,
            leases: version >= D::LEASES,
            config: version >= D::CONFIG,
            keys: version >= D::KEYS,
            answers: version >= D::ANSWERS,
            endpoints: version >= D::ENDPOINTS,
            schedules: version >= D::SCHEDULES,
            ended_runs: version >= D::ENDED_RUNS,
            continuation: version >= D::CONTINUATION,
            start_hints: version >= D::START_HINTS,
            answer_digests: version >= D::ANSWER_DIGESTS,
        }
    }
}

/// The JSON document of a run row (see `decode::RunRow`), its columns prefixed by `alias`
/// (`"r."`, or `""`).
pub(crate) fn run_doc(alias: &str, level: Level) -> String {
    let a = alias;
    let operations = if level.operations {
        format!(
            ", 'pause_requested_at', {a}pause_requested_at, \
             'pause_requested_by', {a}pause_requested_by, 'stale_since', {a}stale_since"
        )
    } else {
        String::new()
    };
    let continuation = if level.continuation {
        format!(
            ", 'continued_as', {a}continued_as::text, 'continued_from', {a}continued_from::text"
        )
    } else {
        String::new()
    };
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
         'created_at', {a}created_at, 'updated_at', {a}updated_at{operations}{continuation})"
    )
}

/// The JSON document of a child run aliased `r`, as a history holds it: a run document
/// without the input (`null`).
pub(super) fn child_doc(level: Level) -> String {
    run_doc("r.", level).replace("'input', r.input,", "'input', 'null',")
}

/// The JSON document of an event row aliased `e`.
pub(super) fn event_doc(level: Level) -> String {
    let sent_by = if level.operations {
        ", 'sent_by', e.sent_by"
    } else {
        ""
    };
    format!(
        "json_build_object('run_id', e.run_id::text, 'name', e.name, \
         'idx', e.idx, 'data', e.data, 'timed_out', e.timed_out, \
         'reference_id', e.reference_id, 'received_at', e.received_at{sent_by})"
    )
}

/// The columns of an entry upsert after `INSERT INTO aiki_entries`.
pub(crate) fn entry_columns(level: Level) -> String {
    let input = if level.operations { ", input" } else { "" };
    format!(
        "(run_id, address, idx, kind, status, output, fingerprint, attempts, error_kind, \
         error_message, retry_at, updated_at{input})"
    )
}

/// What an entry upsert does when the key is taken; `table` names the target (`aiki_entries`,
/// or its alias). A later write without an input keeps the one its call recorded.
pub(crate) fn entry_conflict(level: Level, table: &str) -> String {
    let input = if level.operations {
        format!(", input = COALESCE(excluded.input, {table}.input)")
    } else {
        String::new()
    };
    format!(
        "ON CONFLICT (run_id, address, idx) DO UPDATE SET \
         kind = excluded.kind, status = excluded.status, output = excluded.output, \
         fingerprint = excluded.fingerprint, attempts = excluded.attempts, \
         error_kind = excluded.error_kind, error_message = excluded.error_message, \
         retry_at = excluded.retry_at, updated_at = excluded.updated_at{input}"
    )
}

/// Upserts an entry (the parameters of [`binds::upsert_entry`](super::binds::upsert_entry)) if
/// the run has the expected revision and, when `start` (an SQL status) is `'running'`, no
/// pause is requested.
pub(super) fn upsert_entry(level: Level, start: &str) -> String {
    format!(
        "INSERT INTO aiki_entries {columns} \
         SELECT $1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12{input} \
         FROM aiki_runs WHERE id = $1::uuid AND revision = $13 AND {allowed} \
         FOR SHARE {conflict}",
        columns = entry_columns(level),
        input = if level.operations { ", $14" } else { "" },
        allowed = starts_allowed(level, "", start),
        conflict = entry_conflict(level, "aiki_entries"),
    )
}

/// The condition on a run row (its columns prefixed by `alias`) under which an entry whose
/// status is `status` may be written: not a new attempt (`running`) while a pause is
/// requested.
pub(crate) fn starts_allowed(level: Level, alias: &str, status: &str) -> String {
    if level.operations {
        format!("({status} <> 'running' OR {alias}pause_requested_at IS NULL)")
    } else {
        "TRUE".to_owned()
    }
}

/// The statuses a run leaving `running` lands in as `paused` when a pause was requested of
/// it (see [`RunStatus::held_by_pause`]).
pub(crate) fn held_by_pause() -> String {
    status_list(RunStatus::held_by_pause)
}

/// The `SET` list of a claim's release (claim recovery's, an operator's), at `now`, recorded as
/// done by `actor`: back to `queued`, or to `paused` when a pause was requested.
pub(super) fn release_set(now: &str, actor: &str) -> String {
    format!(
        "status = CASE WHEN pause_requested_at IS NULL THEN 'queued' ELSE 'paused' END, \
         revision = revision + 1, due_at = NULL, \
         queued_at = CASE WHEN pause_requested_at IS NULL THEN {now} ELSE queued_at END, \
         updated_at = {now}, owner = NULL, heartbeat_at = NULL, stale_since = NULL, \
         change_actor = {actor}, change_cause = NULL, change_rev = revision + 1, \
         pause_requested_at = NULL, pause_requested_by = NULL"
    )
}

/// The condition that fences a sweep at `now` (a placeholder) by the lease whose name, holder
/// and token are the placeholders from `$first` on: the sweep does nothing unless that lease is
/// still held so and unexpired (by [`Dialect::claim_time`]). Nothing on a schema without
/// leases, whose sweeps are unfenced (and bind no lease).
pub(crate) fn fence<D: Dialect>(dialect: &D, level: Level, now: &str, first: u8) -> String {
    if !level.leases {
        return String::new();
    }
    let (name, holder, token) = (first, first + 1, first + 2);
    format!(
        " AND EXISTS (SELECT 1 FROM aiki_leases WHERE name = ${name} AND holder = ${holder} \
         AND token = ${token} AND expires_at > {now})",
        now = dialect.claim_time(now)
    )
}

/// Whether a `running` run's claim is confirmed stale at `now` (SQL) with the confirmation
/// window `window`: marked at least one window ago, not refreshed since, and the mark fresh
/// (at most two windows old). An older mark proves nothing: no sweep ran in between (the store
/// was unreachable, say), so executors may not have had their window to refresh; the next sweep
/// marks the claim anew instead.
///
/// `trusted` is the parameter saying since when the sweeper has led without a break (NULL:
/// not known, an operator's release): a mark made since then holds however old (see
/// `ClaimTiming::marks_trusted_since`).
pub(super) fn confirmed_stale(now: &str, window: &str, trusted: Option<&str>) -> String {
    format!(
        "(stale_since <= {now} - {window} AND {holds} \
         AND (heartbeat_at IS NULL OR heartbeat_at <= stale_since))",
        holds = mark_holds(now, window, trusted),
    )
}

/// Whether a claim's mark still holds at `now` (see [`confirmed_stale`]).
pub(super) fn mark_holds(now: &str, window: &str, trusted: Option<&str>) -> String {
    match trusted {
        Some(trusted) => format!(
            "(stale_since > {now} - 2 * {window} \
             OR ({trusted}::bigint IS NOT NULL AND stale_since >= {trusted}))"
        ),
        None => format!("stale_since > {now} - 2 * {window}"),
    }
}

/// The `SET` list of a transition's guarded update (see [`super::binds::transition`] for the
/// parameters): `w.sat` is whether the awaited thing is already there, `w.by_event` whether an
/// event is. Such a suspension lands in `queued` at once (in `scheduled`, due now, on the
/// previous release's schema), its cause noted. Completing, or cancelling, clears the error
/// of an earlier attempt. A due time without a wait set counts from the transition's time `$4`, and moves
/// onto the store's clock, whose time now `store_now` is (see `Transition::rebase`).
pub(crate) fn transition_set(level: Level, store_now: &str) -> String {
    let due = format!("CASE WHEN $18 IS NULL THEN $5 - $4 + {store_now} ELSE $5 END");
    if !level.operations {
        return format!(
            "status = CASE WHEN w.sat THEN 'scheduled' ELSE $3 END, \
             due_at = CASE WHEN w.sat THEN $4 ELSE {due} END, {common}, \
             queued_at = CASE WHEN $3 = 'queued' THEN $4 ELSE queued_at END, \
             wait_set = CASE WHEN w.sat THEN NULL ELSE $18 END",
            common = transition_common()
        );
    }
    // A run leaving `running` with a pause requested lands in `paused` (not a suspension, a
    // release or a retry), and whoever asked is its timeline's actor.
    let held = format!(
        "(aiki_runs.pause_requested_at IS NOT NULL AND aiki_runs.status = 'running' \
         AND $3 IN {moves})",
        moves = held_by_pause()
    );
    format!(
        "status = CASE WHEN {held} THEN 'paused' WHEN w.sat THEN 'queued' ELSE $3 END, \
         due_at = CASE WHEN {held} OR w.sat THEN NULL ELSE {due} END, {common}, \
         queued_at = CASE WHEN {held} THEN queued_at WHEN $3 = 'queued' OR w.sat THEN $4 \
           ELSE queued_at END, \
         wait_set = CASE WHEN {held} OR w.sat THEN NULL ELSE $18 END, \
         pause_requested_at = CASE WHEN $3 = 'running' THEN pause_requested_at ELSE NULL END, \
         pause_requested_by = CASE WHEN $3 = 'running' THEN pause_requested_by ELSE NULL END, \
         stale_since = CASE WHEN $3 = 'running' THEN stale_since ELSE NULL END, \
         change_actor = CASE WHEN {held} THEN COALESCE($22, aiki_runs.pause_requested_by) \
           ELSE $22 END, \
         change_cause = CASE WHEN {held} OR NOT w.sat THEN NULL WHEN w.by_event THEN 'event' \
           ELSE 'child' END, \
         change_rev = revision + 1",
        common = transition_common()
    )
}

/// The part of a transition's `SET` list every schema shares. A run that ends otherwise than
/// failed (completed, or cancelled without an error of its own) keeps no error of an earlier
/// attempt: a run cancelled after a failed attempt does not report that attempt's error.
fn transition_common() -> String {
    let ended_well = "($3 = 'completed' OR ($3 = 'cancelled' AND $9::text IS NULL))";
    format!(
        "revision = revision + 1, \
     updated_at = $4, \
     owner = CASE WHEN $3 = 'running' THEN owner ELSE NULL END, \
     heartbeat_at = CASE WHEN $3 = 'running' THEN heartbeat_at ELSE NULL END, \
     output = CASE WHEN $6 THEN $7 ELSE output END, \
     output_fingerprint = CASE WHEN $6 THEN $8 ELSE output_fingerprint END, \
     error_kind = CASE WHEN {ended_well} THEN NULL ELSE COALESCE($9, error_kind) END, \
     error_message = CASE WHEN {ended_well} THEN NULL \
       WHEN $9::text IS NULL THEN error_message ELSE $10 END, \
     error_address = CASE WHEN {ended_well} THEN NULL \
       WHEN $9::text IS NULL THEN error_address ELSE $20 END, \
     error_index = CASE WHEN {ended_well} THEN NULL \
       WHEN $9::text IS NULL THEN error_index ELSE $21 END, \
     attempts = COALESCE($11, attempts)"
    )
}

/// Inserts an event at the next index of its name's queue (see [`super::binds::event`]);
/// returns the index, or nothing for a reference id already seen.
pub(crate) fn insert_event(level: Level) -> String {
    let (column, value) = if level.operations {
        (", sent_by", ", $6")
    } else {
        ("", "")
    };
    format!(
        "INSERT INTO aiki_events (run_id, name, idx, data, timed_out, reference_id, \
         received_at{column}) \
         SELECT $1::uuid, $2, COALESCE(MAX(idx) + 1, 0), $3, false, $4, $5{value} \
         FROM aiki_events WHERE run_id = $1::uuid AND name = $2 \
         ON CONFLICT (run_id, name, reference_id) WHERE reference_id IS NOT NULL \
         DO NOTHING RETURNING idx"
    )
}

/// Wakes run `$1` to `queued` at `$5` for an event sent by `$6`, if `$7` (the caller has read
/// under the run's lock that it awaits an event). On the previous release's schema it lands
/// in `scheduled`, due at `$5`, for the next sweep to queue.
pub(crate) fn wake_for_event(level: Level) -> String {
    if !level.operations {
        return "UPDATE aiki_runs SET status = 'scheduled', revision = revision + 1, \
             due_at = $5, updated_at = $5, owner = NULL, heartbeat_at = NULL \
             WHERE id = $1::uuid AND $7"
            .to_owned();
    }
    "UPDATE aiki_runs SET status = 'queued', revision = revision + 1, due_at = NULL, \
     queued_at = $5, updated_at = $5, owner = NULL, heartbeat_at = NULL, change_actor = $6, \
     change_cause = 'event', change_rev = revision + 1 \
     WHERE id = $1::uuid AND $7"
        .to_owned()
}

/// The column a claim returns after each run document: the claim idle timeout stored in the
/// runtime configuration (`NULL` when none is, or on a schema without the configuration).
pub(crate) fn claim_idle_column(level: Level) -> String {
    if level.config {
        format!(
            "(SELECT value FROM aiki_config WHERE key = '{}')",
            crate::ConfigKey::ClaimIdleTimeout
        )
    } else {
        "NULL::bigint".to_owned()
    }
}

/// Renders a shared statement for SQLite (see the module docs).
#[cfg(any(feature = "sqlite", test))]
pub(crate) fn render_for_sqlite(sql: &str) -> String {
    super::super::dialect::strip_casts(sql)
        .replace("json_build_object(", "json_object(")
        .replace("json_build_array(", "json_array(")
        .replace("json_agg(", "json_group_array(")
        .replace("strpos(", "instr(")
        .replace(" FOR SHARE", "")
        .replace(" FOR UPDATE", "")
}

/// The insert of `rows` runs (each bound as [`crate::sql::binds::insert_run`], the parameters of
/// row `i` numbered from `i * RUN_PARAMS + 1`), skipping any whose namespace and reference id
/// are taken (by a stored run or an earlier row), returning the document `run` of each run
/// inserted; `quiet`: with `aiki.start_hints` set to `after_commit` for the transaction first
/// (PostgreSQL only), so that the trigger leaves the runs' ready hints to the store.
pub(crate) fn insert_runs(level: Level, run: &str, quiet: bool, rows: usize) -> String {
    let note_columns = if level.operations {
        ", change_actor, change_rev"
    } else {
        ""
    };
    let columns = format!(
        "id, namespace, workflow, version, input, input_hash, reference_id, pool, status, \
         revision, attempts, due_at, queued_at, parent_run_id, parent_address, traceparent, \
         forked_from, lineage_root, created_at, updated_at{note_columns}"
    );
    let values = |row: usize| {
        let p = |n: usize| format!("${}", row * RUN_PARAMS + n);
        let note_values = if level.operations {
            format!(", {}, 1", p(18))
        } else {
            String::new()
        };
        format!(
            "{}::uuid, {}, {}, {}, {}, {}, {}, {}, {}, 1, 1, {}, {}, {}::uuid, {}, {}, \
             {}::uuid, {}::uuid, {}, {}{note_values}",
            p(1),
            p(2),
            p(3),
            p(4),
            p(5),
            p(6),
            p(7),
            p(8),
            p(9),
            p(10),
            p(11),
            p(12),
            p(13),
            p(15),
            p(16),
            p(17),
            p(14),
            p(14),
        )
    };
    let rest = format!("ON CONFLICT (namespace, reference_id) DO NOTHING RETURNING {run}::text");
    if quiet {
        // Referenced, so that it is evaluated; materialized, so that it is evaluated once,
        // before the rows are inserted and their trigger fires.
        let selects: Vec<String> = (0..rows)
            .map(|row| format!("SELECT {} FROM quiet", values(row)))
            .collect();
        format!(
            "WITH quiet AS MATERIALIZED \
             (SELECT set_config('aiki.start_hints', 'after_commit', true)) \
             INSERT INTO aiki_runs ({columns}) {} {rest}",
            selects.join(" UNION ALL ")
        )
    } else {
        let rows: Vec<String> = (0..rows).map(|row| format!("({})", values(row))).collect();
        format!(
            "INSERT INTO aiki_runs ({columns}) VALUES {} {rest}",
            rows.join(", ")
        )
    }
}

/// The parameters of one run in [`insert_runs`].
pub(crate) const RUN_PARAMS: usize = 18;

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
            include_str!("../../../migrations/sqlite/0002_wake_parent_trigger.sql"),
            include_str!("../../../migrations/postgres/0002_wake_parent_trigger.sql"),
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
