//! A reader far behind the change stream pays for a page, not for its backlog (PostgreSQL): a
//! later batch's first page is found by its transaction ids, and its later pages walk the
//! changes' numbers from the last one read, as PostgreSQL plans them once for any parameters
//! (a prepared statement's generic plan). Skipped loudly without a server (failing under
//! `CI=true`).

use crate::support;

/// Changes in the batch the reader is behind by.
#[cfg(feature = "postgres")]
const BACKLOG: i64 = 5_000;

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_page_of_a_large_batch_reads_its_own_changes() {
    use aiki_store::postgres::PostgresStore;
    use aiki_store::prelude::*;
    use aiki_store::{ChangeCursor, Namespace, RunId};
    use sqlx::Connection as _;
    use support::postgres as pg;
    use support::records::new_run;

    let Some(url) = pg::shared_database().await else {
        return;
    };
    let schema = format!("pages_{}", RunId::new().as_uuid().simple());
    let store = PostgresStore::connect(&format!("{url}?aiki_schema={schema}"))
        .await
        .expect("open");
    let namespace = Namespace::new("pages", "1");
    let reader = store
        .changes_since(&ChangeCursor::start(), 0)
        .await
        .expect("a cursor from now")
        .next;
    let first = store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create")
        .run()
        .clone();
    // The rest of the backlog in one statement: copies of the first run, each with the
    // `queued` change its insert records.
    let mut connection = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query(&format!(
        "INSERT INTO {schema}.aiki_runs SELECT (jsonb_populate_record(r, jsonb_build_object( \
           'id', gen_random_uuid(), 'reference_id', g::text))).* \
         FROM {schema}.aiki_runs r, generate_series(1, $1) g WHERE r.id = $2::uuid"
    ))
    .bind(BACKLOG - 1)
    .bind(first.id.to_string())
    .execute(&mut connection)
    .await
    .expect("the backlog");
    sqlx::query(&format!("ANALYZE {schema}.aiki_timeline"))
        .execute(&mut connection)
        .await
        .expect("analyze");

    // Every change once, in number order, a page at a time.
    let mut cursor = reader.clone();
    let mut seqs = Vec::new();
    loop {
        let page = store.changes_since(&cursor, 100).await.expect("a page");
        if page.changes.is_empty() {
            break;
        }
        seqs.extend(page.changes.iter().map(|change| change.seq));
        cursor = page.next;
    }
    assert_eq!(seqs.len() as i64, BACKLOG, "every change of the backlog");
    assert!(
        seqs.windows(2).all(|pair| pair[0] < pair[1]),
        "each once, in number order"
    );

    // How PostgreSQL plans the pages of a later batch, for any parameters.
    let (page, page_after) = store
        .change_page_statements()
        .expect("the statements of the snapshot stream");
    for setting in [
        format!("SET search_path TO {schema}"),
        "SET plan_cache_mode = force_generic_plan".to_owned(),
        format!("PREPARE page(text, text, bigint, bigint) AS {page}"),
        format!("PREPARE page_after(text, text, bigint, bigint) AS {page_after}"),
    ] {
        sqlx::query(&setting)
            .execute(&mut connection)
            .await
            .expect(&setting);
    }
    let earlier = reader.as_str().split('/').next().expect("a snapshot");
    let later: String = sqlx::query_scalar("SELECT pg_current_snapshot()::text")
        .fetch_one(&mut connection)
        .await
        .expect("a snapshot");
    let mut plans = Vec::new();
    for statement in ["page", "page_after"] {
        let lines: Vec<String> = sqlx::query_scalar(&format!(
            "EXPLAIN EXECUTE {statement}('{earlier}', '{later}', {}, 100)",
            seqs[seqs.len() / 2]
        ))
        .fetch_all(&mut connection)
        .await
        .expect("explain");
        plans.push(lines.join("\n"));
    }
    assert!(
        plans[0].contains("aiki_timeline_by_xid"),
        "a batch's first page is not found by its transaction ids:\n{}",
        plans[0]
    );
    assert!(
        plans[1].contains("aiki_timeline_by_seq") && !plans[1].contains("Sort"),
        "a later page reads the whole batch and sorts it:\n{}",
        plans[1]
    );
    drop(connection);
    let mut connection = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut connection)
        .await
        .expect("drop the schema");
}
