//! The bulk seeder of `--scale`: finished runs written by SQL, far faster than running them.
//!
//! `runs` completed runs of another workflow (`bench-seeded@1`), each a realistic row: an
//! order's input and output as JSON, an input hash, a reference id, created over the 30 days
//! before now and ended 2 h ago at the latest (so that every one may be purged); each with its
//! three timeline rows (`queued`, `running`, `completed`, numbered in the change stream as the
//! store numbers them) and `entries` completed task entries. One transaction: on PostgreSQL
//! `INSERT … SELECT` over `generate_series`, then `VACUUM ANALYZE` (the server's autovacuum
//! would have done it on a store that grew by itself); on SQLite a recursive CTE, then a WAL
//! checkpoint (the seeding's WAL is not the workload's to write back) and no `ANALYZE`, which
//! the store never runs. Every index and trigger stays in place: the insert trigger's own
//! timeline row finds the seeded one there and is dropped (`ON CONFLICT DO NOTHING`, `OR
//! IGNORE`), as it is for every run the store inserts again.

use std::str::FromStr as _;
use std::time::Instant;

use aiki::{RunId, RunStatus};
use serde_json::{Value, json};

/// How far back the seeded runs go.
const SPAN_MS: i64 = 30 * 24 * 3_600_000;
/// The youngest a seeded run ends: older than the purge's minimum age of an hour.
const YOUNGEST_MS: i64 = 2 * 3_600_000;
/// The seeded runs' output fingerprint and their entries'.
const FINGERPRINT: &str = "5eed0f1a9e2b4c6d8e0f1a2b3c4d5e6f";

/// The id of the `i`-th seeded run (from 1).
pub(crate) fn run_id(i: i64) -> String {
    format!("{i:08x}-5eed-4000-8000-{i:012x}")
}

/// A raw connection to a store's database.
pub(crate) enum Raw {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

/// The parts of the SQL that differ between the dialects.
struct Dialect {
    /// What goes before `INSERT` (SQLite's row sources are common table expressions).
    with: &'static str,
    /// The rows: `i` from 1 to `@N@`, and the seeded run's creation time `c`.
    from: &'static str,
    id: &'static str,
    hex64: &'static str,
    hex10: &'static str,
    /// Three revisions, `r` 1 to 3.
    revisions: &'static str,
    /// Entry numbers, `k` from 0.
    entries: &'static str,
    /// The timeline columns past the common ones, and their values.
    timeline_extra: &'static str,
    timeline_values: &'static str,
    retry_false: &'static str,
}

const POSTGRES: Dialect = Dialect {
    with: "",
    from: "(SELECT i, @START@ + i * @STEP@ / @N@ AS c FROM generate_series(1::bigint, @N@) \
           AS i) AS s",
    id: "(lpad(to_hex(i), 8, '0') || '-5eed-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid",
    hex64: "lpad(to_hex(@X@), 64, '0')",
    hex10: "lpad(to_hex(@X@), 10, '0')",
    revisions: "generate_series(1, 3) AS r",
    entries: "generate_series(0, @E@ - 1) AS k",
    timeline_extra: "",
    timeline_values: "",
    retry_false: "false",
};

const SQLITE: Dialect = Dialect {
    with: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < @N@), \
           s AS (SELECT i, @START@ + i * @STEP@ / @N@ AS c FROM n), \
           rv(r) AS (SELECT 1 UNION ALL SELECT r + 1 FROM rv WHERE r < 3), \
           m(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM m WHERE k + 1 < @E@) ",
    from: "s",
    id: "printf('%08x-5eed-4000-8000-%012x', i, i)",
    hex64: "printf('%064x', @X@)",
    hex10: "printf('%010x', @X@)",
    revisions: "rv",
    entries: "m",
    timeline_extra: ", seq",
    timeline_values: ", @BASE@ + (i - 1) * 3 + r",
    retry_false: "0",
};

/// The three statements (timeline, runs, entries), for `runs` runs of `entries` entries each
/// ended by `now`; `base` is SQLite's change-stream number before them.
fn statements(d: &Dialect, runs: i64, entries: i64, now: i64, base: i64) -> Vec<String> {
    let ended = "c + 50 + i % 5000";
    let timeline = format!(
        "{with}INSERT INTO aiki_timeline (run_id, revision, from_status, to_status, reason, actor, \
         at, cause, retry, error_kind{extra}) SELECT {id}, r, CASE r WHEN 2 THEN 'queued' WHEN 3 \
         THEN 'running' END, CASE r WHEN 1 THEN 'queued' WHEN 2 THEN 'running' ELSE 'completed' \
         END, '', CASE WHEN r > 1 THEN 'bench-seed-worker' END, CASE r WHEN 1 THEN c WHEN 2 THEN \
         c + 20 ELSE {ended} END, NULL, {retry}, NULL{values} FROM {from} CROSS JOIN {revisions}",
        with = d.with,
        extra = d.timeline_extra,
        id = d.id,
        retry = d.retry_false,
        values = d.timeline_values,
        from = d.from,
        revisions = d.revisions,
    );
    let runs_sql = format!(
        "{with}INSERT INTO aiki_runs (id, namespace, workflow, version, input, input_hash, \
         reference_id, pool, status, revision, attempts, queued_at, output, output_fingerprint, \
         created_at, updated_at) SELECT {id}, 'bench-seeded@1', 'bench-seeded', '1', \
         '{{\"order_id\":' || i || ',\"customer\":\"customer-' || (i % 9973) || \
         '\",\"items\":' || (1 + i % 7) || ',\"currency\":\"EUR\"}}', {hash}, 'order-' || i, \
         'default', 'completed', 3, 1, c, '{{\"order_id\":' || i || \
         ',\"status\":\"shipped\",\"total_cents\":' || (i * 7919 % 100000) || \
         ',\"tracking\":\"TRK' || {tracking} || '\"}}', '{FINGERPRINT}', c, {ended} FROM {from}",
        with = d.with,
        id = d.id,
        hash = d.hex64.replace("@X@", "i"),
        tracking = d.hex10.replace("@X@", "i"),
        from = d.from,
    );
    let mut out = vec![timeline, runs_sql];
    if entries > 0 {
        out.push(format!(
            "{with}INSERT INTO aiki_entries (run_id, address, idx, kind, status, output, \
             fingerprint, attempts, updated_at, input) SELECT {id}, 'bench-seeded-step:' || \
             {address}, 0, 'task', 'completed', '{{\"v\":' || (i + k) || \
             ',\"note\":\"ok\"}}', '{FINGERPRINT}', 1, c + 20 + k * 3, '{{\"order_id\":' || i \
             || ',\"step\":' || k || '}}' FROM {from} CROSS JOIN {entries}",
            with = d.with,
            id = d.id,
            address = d.hex64.replace("@X@", "i * 16 + k"),
            from = d.from,
            entries = d.entries,
        ));
    }
    let start = now - SPAN_MS;
    out.into_iter()
        .map(|sql| {
            sql.replace("@START@", &start.to_string())
                .replace("@STEP@", &(SPAN_MS - YOUNGEST_MS).to_string())
                .replace("@N@", &runs.to_string())
                .replace("@E@", &entries.max(1).to_string())
                .replace("@BASE@", &base.to_string())
        })
        .collect()
}

impl Raw {
    pub(crate) async fn open(url: &str) -> anyhow::Result<Raw> {
        use sqlx::Connection;
        if url.starts_with("sqlite:") {
            Ok(Raw::Sqlite(sqlx::SqliteConnection::connect(url).await?))
        } else {
            // Aiki's own URL parameter is not the driver's.
            let url = url.split("&aiki_schema=").next().unwrap_or(url);
            Ok(Raw::Postgres(sqlx::PgConnection::connect(url).await?))
        }
    }

    /// Seeds the store (already migrated) with `runs` finished runs of `entries` entries each.
    async fn seed(&mut self, runs: i64, entries: i64, now: i64) -> anyhow::Result<()> {
        use sqlx::Connection;
        match self {
            Raw::Postgres(c) => {
                let mut tx = c.begin().await?;
                for sql in statements(&POSTGRES, runs, entries, now, 0) {
                    sqlx::query(&sql).execute(&mut *tx).await?;
                }
                tx.commit().await?;
                sqlx::raw_sql("VACUUM ANALYZE aiki_runs, aiki_timeline, aiki_entries")
                    .execute(&mut *c)
                    .await?;
            }
            Raw::Sqlite(c) => {
                let mut tx = c.begin().await?;
                let base: i64 = sqlx::query_scalar("SELECT last FROM aiki_outbox_seq WHERE id = 1")
                    .fetch_one(&mut *tx)
                    .await?;
                let mut sql = statements(&SQLITE, runs, entries, now, base).into_iter();
                if let Some(timeline) = sql.next() {
                    sqlx::query(&timeline).execute(&mut *tx).await?;
                }
                // The numbers the seeded timeline took (the runs' insert trigger takes its own).
                sqlx::query("UPDATE aiki_outbox_seq SET last = last + $1 WHERE id = 1")
                    .bind(3 * runs)
                    .execute(&mut *tx)
                    .await?;
                for statement in sql {
                    sqlx::query(&statement).execute(&mut *tx).await?;
                }
                tx.commit().await?;
                sqlx::raw_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(&mut *c)
                    .await?;
            }
        }
        Ok(())
    }

    /// Runs `statements` in one transaction; returns the rows each touched.
    pub(crate) async fn transaction(&mut self, statements: &[String]) -> anyhow::Result<Vec<u64>> {
        use sqlx::Connection;
        let mut touched = Vec::new();
        macro_rules! run {
            ($c:expr) => {{
                let mut tx = $c.begin().await?;
                for sql in statements {
                    touched.push(sqlx::query(sql).execute(&mut *tx).await?.rows_affected());
                }
                tx.commit().await?;
            }};
        }
        match self {
            Raw::Sqlite(c) => run!(c),
            Raw::Postgres(c) => run!(c),
        }
        Ok(touched)
    }

    /// One number (`NULL` as `None`).
    pub(crate) async fn scalar(&mut self, sql: &str) -> anyhow::Result<Option<i64>> {
        Ok(match self {
            Raw::Sqlite(c) => sqlx::query_scalar(sql).fetch_one(&mut *c).await?,
            Raw::Postgres(c) => sqlx::query_scalar(sql).fetch_one(&mut *c).await?,
        })
    }

    /// The store's size in bytes (SQLite: its pages; PostgreSQL: its schema's tables with
    /// their indexes).
    pub(crate) async fn size(&mut self) -> anyhow::Result<Option<i64>> {
        match self {
            Raw::Sqlite(_) => {
                self.scalar(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
                )
                .await
            }
            Raw::Postgres(_) => {
                self.scalar(
                    "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class AS c \
                     JOIN pg_namespace AS n ON n.oid = c.relnamespace \
                     WHERE n.nspname = current_schema() AND c.relkind = 'r'",
                )
                .await
            }
        }
    }

    pub(crate) async fn close(self) {
        use sqlx::Connection;
        let _ = match self {
            Raw::Sqlite(c) => c.close().await,
            Raw::Postgres(c) => c.close().await,
        };
    }
}

/// Seeds the fresh store behind `url` (migrating it first) with `runs` finished runs of
/// `entries` entries each, and checks that the store reads one back whole.
pub(crate) async fn seed(url: &str, runs: i64, entries: i64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let mut raw = Raw::open(url).await?;
    let clock = Instant::now();
    raw.seed(runs, entries, super::now_ms()).await?;
    let seconds = clock.elapsed().as_secs_f64();
    let bytes = raw.size().await?;
    raw.close().await;
    for i in [1, runs] {
        let id = RunId::from_str(&run_id(i))?;
        let history = store.load_history(id).await?;
        anyhow::ensure!(
            history.run.status == RunStatus::Completed
                && history.entries.len() == entries as usize
                && history.run.output.is_some(),
            "seeded run {id} reads back as {:?} with {} entries",
            history.run.status,
            history.entries.len()
        );
        let timeline = store.timeline(id).await?;
        anyhow::ensure!(
            timeline.len() == 3,
            "seeded run {id} has {} timeline rows",
            timeline.len()
        );
    }
    Ok(json!({
        "runs": runs,
        "entries_per_run": entries,
        "seconds": seconds,
        "runs_per_s": runs as f64 / seconds,
        "store_bytes": bytes,
    }))
}
