//! `--list`: listing a page of 50 runs out of 100,000 (10,000 with `--quick`), filtered by
//! workflow version and status, through `ReadStore::list_runs` and, beside it, the same query sent
//! raw through sqlx (selecting the row instead of Aiki's JSON document); p50 and p99 of each,
//! and the query plans of the main filters.

use std::time::Instant;

use aiki::RunStatus;
use aiki::store::{ListRuns, RunCursor, RunFilter};
use serde_json::{Value, json};

/// Page size.
const PAGE: u32 = 50;
/// Pages listed per measure.
const SAMPLES: usize = 300;

/// Statuses the filled runs cycle through; `failed` is the one listed.
const STATUSES: [&str; 5] = ["queued", "running", "completed", "failed", "sleeping"];

/// `runs` rows of ten workflows, written in one statement (far faster than starting them).
fn fill_sql(postgres: bool) -> String {
    let columns = "(id, namespace, workflow, version, input, input_hash, reference_id, pool, \
                   status, revision, attempts, queued_at, error_kind, created_at, updated_at)";
    let statuses = STATUSES.map(|s| format!("'{s}'")).join(", ");
    if postgres {
        format!(
            "INSERT INTO aiki_runs {columns} SELECT (lpad(to_hex(i), 8, '0') || \
             '-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, \
             'bench-list-' || (i % 10) || '@1', 'bench-list-' || (i % 10), '1', '{{}}', 'h', \
             'ref-' || i, 'default', (ARRAY[{statuses}])[1 + (i / 10) % 5], 1, 1, \
             1700000000000 + i, CASE WHEN (i / 10) % 5 = 3 THEN 'task_failed' END, \
             1700000000000 + i / 3, 1700000000000 + i FROM generate_series(1, $1) AS i"
        )
    } else {
        let cases: String = STATUSES
            .iter()
            .enumerate()
            .map(|(n, s)| format!(" WHEN {n} THEN '{s}'"))
            .collect();
        format!(
            "WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < $1) \
             INSERT INTO aiki_runs {columns} SELECT \
             printf('%08x-0000-4000-8000-%012x', i, i), 'bench-list-' || (i % 10) || '@1', \
             'bench-list-' || (i % 10), '1', '{{}}', 'h', 'ref-' || i, 'default', \
             CASE (i / 10) % 5{cases} END, 1, 1, 1700000000000 + i, \
             CASE WHEN (i / 10) % 5 = 3 THEN 'task_failed' END, 1700000000000 + i / 3, \
             1700000000000 + i FROM seq"
        )
    }
}

/// The listing query, as raw SQL: the filter on workflow, version and status, the keyset
/// condition, newest first.
fn raw_sql(postgres: bool, cursor: bool) -> String {
    let keyset = match (cursor, postgres) {
        (false, _) => "",
        (true, true) => " AND (created_at, id) < ($4, $5::uuid)",
        (true, false) => " AND (created_at, id) < ($4, $5)",
    };
    let limit = if cursor { "$6" } else { "$4" };
    format!(
        "SELECT * FROM aiki_runs WHERE workflow = $1 AND version = $2 AND status IN ($3)\
         {keyset} ORDER BY created_at DESC, id DESC LIMIT {limit}"
    )
}

/// The plan the database picks for each main filter, with literal values.
async fn plans(raw: &mut Raw) -> anyhow::Result<Value> {
    let queries = [
        (
            "workflow version + status, newest first",
            "SELECT * FROM aiki_runs WHERE workflow = 'bench-list-3' AND version = '1' \
             AND status IN ('failed') ORDER BY created_at DESC, id DESC LIMIT 51",
        ),
        (
            "… after a cursor",
            "SELECT * FROM aiki_runs WHERE workflow = 'bench-list-3' AND version = '1' \
             AND status IN ('failed') AND (created_at, id) < (1700000020000, \
             '00000100-0000-4000-8000-000000000100') ORDER BY created_at DESC, id DESC LIMIT 51",
        ),
        (
            "reference id",
            "SELECT * FROM aiki_runs WHERE reference_id = 'ref-77' \
             ORDER BY created_at DESC, id DESC LIMIT 51",
        ),
        (
            "parent run",
            "SELECT * FROM aiki_runs WHERE parent_run_id = '00000100-0000-4000-8000-000000000100' \
             ORDER BY created_at DESC, id DESC LIMIT 51",
        ),
        (
            "no filter",
            "SELECT * FROM aiki_runs ORDER BY created_at DESC, id DESC LIMIT 51",
        ),
    ];
    let mut out = Vec::new();
    for (what, sql) in queries {
        out.push(json!({ "filter": what, "plan": raw.explain(sql).await? }));
    }
    Ok(json!(out))
}

/// A raw connection to the same database.
enum Raw {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Raw {
    async fn open(url: &str) -> anyhow::Result<Raw> {
        use sqlx::Connection;
        if url.starts_with("sqlite:") {
            Ok(Raw::Sqlite(sqlx::SqliteConnection::connect(url).await?))
        } else {
            // Aiki's own URL parameter is not the driver's.
            let url = url.split("&aiki_schema=").next().unwrap_or(url);
            Ok(Raw::Postgres(sqlx::PgConnection::connect(url).await?))
        }
    }

    async fn fill(&mut self, runs: i64) -> anyhow::Result<()> {
        match self {
            Raw::Sqlite(c) => {
                sqlx::query(&fill_sql(false))
                    .bind(runs)
                    .execute(&mut *c)
                    .await?;
                sqlx::query("ANALYZE").execute(&mut *c).await?;
            }
            Raw::Postgres(c) => {
                sqlx::query(&fill_sql(true))
                    .bind(runs)
                    .execute(&mut *c)
                    .await?;
                sqlx::query("ANALYZE aiki_runs").execute(&mut *c).await?;
            }
        }
        Ok(())
    }

    /// Runs the listing query raw; returns how many rows came back.
    async fn page(&mut self, workflow: &str, cursor: Option<RunCursor>) -> anyhow::Result<usize> {
        let limit = i64::from(PAGE) + 1;
        macro_rules! run {
            ($c:expr, $postgres:expr) => {{
                let sql = raw_sql($postgres, cursor.is_some());
                let query = sqlx::query(&sql).bind(workflow).bind("1").bind("failed");
                let query = match cursor {
                    Some(c) => query.bind(c.created_at).bind(c.id.to_string()).bind(limit),
                    None => query.bind(limit),
                };
                query.fetch_all(&mut *$c).await?.len()
            }};
        }
        Ok(match self {
            Raw::Sqlite(c) => run!(c, false),
            Raw::Postgres(c) => run!(c, true),
        })
    }

    async fn explain(&mut self, sql: &str) -> anyhow::Result<Vec<String>> {
        use sqlx::Row;
        Ok(match self {
            Raw::Sqlite(c) => sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
                .fetch_all(&mut *c)
                .await?
                .iter()
                .map(|row| row.get::<String, _>(3))
                .collect(),
            Raw::Postgres(c) => sqlx::query(&format!("EXPLAIN (COSTS OFF) {sql}"))
                .fetch_all(&mut *c)
                .await?
                .iter()
                .map(|row| row.get::<String, _>(0))
                .collect(),
        })
    }
}

/// p50 and p99 of a list of milliseconds.
fn percentiles(mut ms: Vec<f64>) -> Value {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    json!({ "p50_ms": at(0.5), "p99_ms": at(0.99) })
}

/// The measure on the fresh store behind `url`.
pub(crate) async fn measure(url: &str, runs: i64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let mut raw = Raw::open(url).await?;
    let filled = Instant::now();
    raw.fill(runs).await?;
    let fill_seconds = filled.elapsed().as_secs_f64();
    let workflow = "bench-list-3";
    let filter = RunFilter::default()
        .workflow(workflow)
        .version("1")
        .status(RunStatus::Failed);
    // Walk every page once for the cursors to sample from.
    let mut cursors = vec![None];
    let mut listed = 0;
    loop {
        let page = store
            .list_runs(ListRuns::new(filter.clone(), PAGE).after(*cursors.last().unwrap()))
            .await?;
        listed += page.runs.len();
        match page.next {
            Some(next) => cursors.push(Some(next)),
            None => break,
        }
    }
    let (mut aiki_ms, mut raw_ms) = (Vec::new(), Vec::new());
    for sample in 0..SAMPLES {
        // Spread over every depth (a prime stride through the pages).
        let cursor = cursors[(sample * 7919) % cursors.len()];
        // Alternate which goes first.
        for aiki_first in [sample % 2 == 0, sample % 2 == 1] {
            let clock = Instant::now();
            if aiki_first {
                let page = store
                    .list_runs(ListRuns::new(filter.clone(), PAGE).after(cursor))
                    .await?;
                anyhow::ensure!(!page.runs.is_empty(), "an empty page");
                aiki_ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            } else {
                anyhow::ensure!(raw.page(workflow, cursor).await? > 0, "an empty raw page");
                raw_ms.push(clock.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    Ok(json!({
        "runs": runs,
        "matching": listed,
        "pages": cursors.len(),
        "fill_seconds": fill_seconds,
        "list_runs": percentiles(aiki_ms),
        "raw": percentiles(raw_ms),
        "plans": plans(&mut raw).await?,
    }))
}

/// Prints one backend's figures.
pub(crate) fn print(backend: &str, result: &Value) {
    println!(
        "  {backend}: a page of {PAGE} of {} runs ({} match the filter, {} pages), {SAMPLES} pages \
         sampled",
        result["runs"], result["matching"], result["pages"]
    );
    for (what, key) in [
        ("Store::list_runs", "list_runs"),
        ("raw SQL, same query", "raw"),
    ] {
        println!(
            "    {what:<22} p50 {:.2} ms, p99 {:.2} ms",
            result[key]["p50_ms"].as_f64().unwrap_or(f64::NAN),
            result[key]["p99_ms"].as_f64().unwrap_or(f64::NAN),
        );
    }
    for plan in result["plans"].as_array().into_iter().flatten() {
        println!("    plan, {}:", plan["filter"].as_str().unwrap_or("?"));
        for line in plan["plan"].as_array().into_iter().flatten() {
            println!("      {}", line.as_str().unwrap_or("?"));
        }
    }
}
