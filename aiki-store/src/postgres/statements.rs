//! PostgreSQL's own statements: the claim with `FOR UPDATE SKIP LOCKED` (and recording its
//! answer in the same statement), the transition that records its answer in its own statement,
//! the entry upsert locking its runs `FOR SHARE`, and the rest of [`DialectStatements`].

use crate::RunStatus;
use crate::sql::Dialect;
use crate::sql::dialect::DialectStatements;
use crate::sql::statements::{
    Level, claim_idle_column, entry_columns, entry_conflict, insert_event, run_doc, starts_allowed,
    status_list, transition_set, wake_for_event,
};

use super::PgDialect;

/// The statements of `dialect` for a schema at `level`.
pub(super) fn statements(dialect: &PgDialect, level: Level) -> DialectStatements {
    let run = run_doc("r.", level);
    let set = transition_set(level, &dialect.claim_time("$4"));
    let terminal = status_list(RunStatus::is_terminal);
    let unsuccessful = status_list(RunStatus::is_unsuccessful);
    // A claim's move, by owner `$1` at `$2` (by the claim clock), and what it returns.
    let claim = format!(
        "UPDATE aiki_runs r SET status = 'running', owner = $1, heartbeat_at = {now}, \
         revision = r.revision + 1, due_at = NULL, updated_at = {now}",
        now = dialect.claim_time("$2"),
    );
    let claimed = format!(
        "RETURNING {run}::text AS doc, {} AS idle",
        claim_idle_column(level)
    );
    // A claim that records what it claimed, if anything, as the answer of the operation
    // whose key and time are `$key` and the parameter after it (and the request's digest,
    // the parameter after the time, on a schema that keeps them).
    let answered = |claim: &str, key: u8| {
        let (column, digest) = if level.answer_digests {
            (", digest".to_owned(), format!(", ${}", key + 2))
        } else {
            (String::new(), String::new())
        };
        format!(
            "WITH claimed AS ({claim}), answered AS (INSERT INTO aiki_operation_answers \
             (id, answer, recorded_at{column}) SELECT ${key}, \
             json_agg(json_build_array(doc, idle))::text, ${time}{digest} FROM claimed \
             HAVING count(*) > 0) SELECT doc, idle FROM claimed",
            time = key + 1,
        )
    };
    let picked = "SELECT id FROM aiki_runs WHERE status = 'queued' AND pool = $3 \
                  AND namespace = ANY($4::text[]) AND NOT (id = ANY($6::uuid[])) \
                  ORDER BY queued_at, id LIMIT $5 FOR UPDATE SKIP LOCKED";
    let claim_picked =
        format!("{claim} FROM picked WHERE r.id = picked.id AND r.status = 'queued' {claimed}");
    let claim_named = format!(
        "{claim} WHERE r.id = $3::uuid AND r.status = 'queued' \
         AND r.namespace = ANY($4::text[]) {claimed}"
    );
    // A transition's guarded update; `answered` records its answer in the same statement.
    let transition = |answered: &str| {
        let answered = answered.replace("{run}", &run);
        format!(
            "WITH v AS (SELECT \
               $12 AND EXISTS (SELECT 1 FROM unnest($13::text[], $14::bigint[]) \
                 AS wanted(name, idx) \
                 JOIN aiki_events ev ON ev.run_id = $1::uuid AND ev.name = wanted.name \
                 AND ev.idx = wanted.idx) AS ev, \
               $12 AND ((NOT $19 AND EXISTS (SELECT 1 FROM aiki_runs c \
                 WHERE c.id = ANY($15::uuid[]) AND c.status IN {terminal})) \
               OR ($19 AND (EXISTS (SELECT 1 FROM aiki_runs c \
                 WHERE c.id = ANY($15::uuid[]) AND c.status IN {unsuccessful}) \
                 OR NOT EXISTS (SELECT 1 FROM aiki_runs c \
                 WHERE c.id = ANY($15::uuid[]) AND c.status NOT IN {terminal})))) AS ch), \
             w AS (SELECT v.ev OR v.ch AS sat, v.ev AS by_event FROM v), \
             updated AS (UPDATE aiki_runs SET \
               {set} \
               FROM w WHERE id = $1::uuid AND revision = $2 AND status = ANY($16::text[]) \
               RETURNING aiki_runs.*), \
             sleeps AS (UPDATE aiki_sleeps s SET cancelled = true FROM updated u \
               WHERE $17 AND s.run_id = u.id AND NOT s.cancelled AND s.wake_at > $4) \
             {answered}SELECT {run}::text FROM updated r",
        )
    };
    DialectStatements {
        claim: format!("WITH picked AS ({picked}) {claim_picked}"),
        claims_answered: level.answers.then(|| {
            (
                format!(
                    "WITH picked AS ({picked}), {}",
                    answered(&claim_picked, 7)
                        .strip_prefix("WITH ")
                        .expect("BUG: a WITH statement")
                ),
                answered(&claim_named, 5),
            )
        }),
        claim_run: claim_named.clone(),
        transition: transition(""),
        transition_answered: level.answers.then(|| {
            let (column, digest) = if level.answer_digests {
                (", digest", ", $25")
            } else {
                ("", "")
            };
            transition(&format!(
                ", answered AS (INSERT INTO aiki_operation_answers (id, answer, \
                 recorded_at{column}) SELECT $23, {{run}}::text, $24{digest} FROM updated r) ",
            ))
        }),
        // The runs are locked `FOR SHARE` (in id order, so two batches never wait on each
        // other crosswise), as the single-row upsert locks its run: each check sees the
        // latest committed revision, so a release committed while the batch was in flight
        // fences its writes.
        upsert_entries: format!(
            "WITH j AS MATERIALIZED (SELECT * FROM json_to_recordset($1::json) \
               AS x(run_id uuid, address text, idx bigint, kind text, status text, \
               output text, fingerprint text, attempts bigint, error_kind text, \
               error_message text, retry_at bigint, updated_at bigint, expected bigint, \
               input text)), \
             locked AS MATERIALIZED (SELECT r.id, r.revision{pause} FROM aiki_runs r \
               WHERE r.id IN (SELECT run_id FROM j) ORDER BY r.id FOR SHARE OF r) \
             INSERT INTO aiki_entries AS e {columns} \
             SELECT j.run_id, j.address, j.idx, j.kind, j.status, j.output, j.fingerprint, \
             j.attempts, j.error_kind, j.error_message, \
             j.retry_at - j.updated_at + {now}, {now}{input} \
             FROM j JOIN locked ON locked.id = j.run_id AND locked.revision = j.expected \
             AND {allowed} \
             {conflict} RETURNING e.run_id::text, e.address, e.idx",
            pause = if level.operations {
                ", r.pause_requested_at"
            } else {
                ""
            },
            columns = entry_columns(level),
            now = dialect.claim_time("j.updated_at"),
            input = if level.operations { ", j.input" } else { "" },
            allowed = starts_allowed(level, "locked.", "j.status"),
            conflict = entry_conflict(level, "e"),
        ),
        revisions_of: format!(
            "SELECT id::text, revision, {paused} FROM aiki_runs \
             WHERE id = ANY($1::uuid[])",
            paused = if level.operations {
                "(CASE WHEN pause_requested_at IS NOT NULL THEN 1 ELSE 0 END)::bigint"
            } else {
                "0::bigint"
            }
        ),
        lock_first: Some((
            "SELECT 1 FROM aiki_runs WHERE id = ANY($1::uuid[]) FOR SHARE".to_owned(),
            "SELECT 1 FROM aiki_runs WHERE id = $1::uuid FOR UPDATE".to_owned(),
        )),
        // The transition's own statement cancels them (`$17`).
        cancel_sleeps: None,
        insert_event_wakes: true,
        outbox: level
            .contract
            .then(crate::sql::outbox::OutboxStatements::snapshots),
        table_exists: "SELECT COUNT(*) FROM pg_tables \
             WHERE schemaname = current_schema() AND tablename = $1"
            .to_owned(),
        insert_event: format!(
            "WITH inserted AS ({insert}), \
             woken AS ({wake} AND EXISTS (SELECT 1 FROM inserted)) \
             SELECT idx FROM inserted",
            insert = insert_event(level),
            wake = wake_for_event(level),
        ),
    }
}
