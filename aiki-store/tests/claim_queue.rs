//! Claims stay indexed however deep the queue (PostgreSQL migration 0027, SQLite 0023): a
//! claim reads the queued runs of its pool in claim order and stops at its limit, instead of
//! reading and sorting every queued run. PostgreSQL's test is skipped loudly without a server
//! (failing under `CI=true`).

use crate::support;

use std::future::Future;

use aiki_store::prelude::*;
use aiki_store::{ClaimRequest, Namespace, RunRecord};
use support::records::new_run;

/// A claim of at most `limit` runs of `namespaces`.
fn request(namespaces: &[&Namespace], limit: u32) -> ClaimRequest {
    let namespaces = namespaces
        .iter()
        .map(|namespace| (*namespace).clone())
        .collect();
    ClaimRequest::new("w", namespaces, "default", limit, 2)
}

/// Checks the plans of claims of 1 and of 64 runs (`plan` gives the store's), then that a
/// claim takes the oldest run, `first`, first.
async fn claims_in_order<S: ExecutorStore, F: Future<Output = String>>(
    store: &S,
    plan: impl Fn(ClaimRequest) -> F,
    first: &RunRecord,
    namespaces: &[&Namespace],
) {
    for limit in [1, 64] {
        let plan = plan(request(namespaces, limit)).await;
        assert!(
            plan.contains("aiki_runs_queue"),
            "limit {limit}: the claim does not read the queue index:\n{plan}"
        );
        assert!(
            !plan.contains("Sort") && !plan.contains("TEMP B-TREE"),
            "limit {limit}: the claim sorts the queue:\n{plan}"
        );
    }
    let claimed = store
        .claim(request(namespaces, 3))
        .await
        .expect("claim")
        .runs;
    let times: Vec<_> = claimed.iter().map(|run| run.queued_at).collect();
    assert_eq!(claimed.len(), 3);
    assert_eq!(claimed[0].id, first.id, "the oldest first: {times:?}");
    assert!(times.is_sorted(), "in claim order: {times:?}");
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_sqlite_claim_reads_a_deep_queue_in_order_and_stops_at_its_limit() {
    use aiki_store::sqlite::SqliteStore;
    let file = support::TempFile::new();
    let store = SqliteStore::connect(&file.url()).await.expect("open");
    let chain = Namespace::new("queue-chain", "1");
    let other = Namespace::new("queue-other", "1");
    let mut first = None;
    for i in 0..2_000 {
        let namespace = if i % 2 == 0 { &chain } else { &other };
        let created = store
            .create_run(new_run(namespace, 1 + i))
            .await
            .expect("create");
        first.get_or_insert_with(|| created.run().clone());
    }
    let first = first.expect("started");
    let plan = |request: ClaimRequest| {
        let store = &store;
        async move { store.claim_plan(&request).await.expect("plan") }
    };
    claims_in_order(&store, plan, &first, &[&chain, &other]).await;
}

/// Queued runs in the PostgreSQL test's queue, deep enough that sorting them all is the
/// costlier plan.
#[cfg(feature = "postgres")]
const DEPTH: i64 = 5_000;

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_claim_reads_a_deep_queue_in_order_and_stops_at_its_limit() {
    use aiki_store::RunId;
    use aiki_store::postgres::PostgresStore;
    use support::postgres as pg;
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let schema = format!("queue_{}", RunId::new().as_uuid().simple());
    let store = PostgresStore::connect(&format!("{url}?aiki_schema={schema}"))
        .await
        .expect("open");
    let chain = Namespace::new("queue-chain", "1");
    let other = Namespace::new("queue-other", "1");
    let first = store
        .create_run(new_run(&chain, 1))
        .await
        .expect("create")
        .run()
        .clone();
    // The rest of the queue in one statement: copies of the first run, queued after it, half
    // of them of another version this claimer also serves.
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    sqlx::query(&format!(
        "INSERT INTO {schema}.aiki_runs SELECT (jsonb_populate_record(r, jsonb_build_object( \
           'id', gen_random_uuid(), 'reference_id', g::text, 'queued_at', r.queued_at + g, \
           'namespace', CASE WHEN g % 2 = 0 THEN $2 ELSE r.namespace END))).* \
         FROM {schema}.aiki_runs r, generate_series(1, $1) g WHERE r.id = $3::uuid"
    ))
    .bind(DEPTH - 1)
    .bind(other.to_string())
    .bind(first.id.to_string())
    .execute(&mut connection)
    .await
    .expect("fill the queue");
    sqlx::query(&format!("ANALYZE {schema}.aiki_runs"))
        .execute(&mut connection)
        .await
        .expect("analyze");
    let plan = |request: ClaimRequest| {
        let store = &store;
        async move { store.claim_plan(&request).await.expect("plan") }
    };
    claims_in_order(&store, plan, &first, &[&chain, &other]).await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut connection)
        .await
        .expect("drop the schema");
}
