//! PostgreSQL's ready hints (migration 0020 and `ExecutorStore::ready_signals`): what notifies
//! and what does not, one listening connection per process, and a listener whose connection
//! is killed coming back. Each test has a schema (and so a channel) of its own. Skipped loudly
//! without a server (failing under `CI=true`).
#![cfg(feature = "postgres")]

use crate::support;

use std::time::{Duration, Instant};

use aiki_store::postgres::{PostgresOptions, PostgresStore};
use aiki_store::prelude::*;
use aiki_store::{
    Namespace, NewEvent, Ready, ReadyReceiver, ReadySignals, RunId, RunStatus, Transition, WaitSpec,
};
use serde_json::json;
use support::postgres as pg;
use support::records::{claim, entry, new_run};

/// A store on a schema of its own, and the schema's name.
async fn fresh_store() -> Option<(PostgresStore, String)> {
    let schema = format!("ready_{}", RunId::new().as_uuid().simple());
    Some((open(&schema).await?, schema))
}

/// A store on `schema` of the shared database.
async fn open(schema: &str) -> Option<PostgresStore> {
    let url = pg::shared_database().await?;
    let store = PostgresStore::connect(&format!("{url}?aiki_schema={schema}"))
        .await
        .expect("open");
    Some(store)
}

/// A store on a schema of its own, its schema's name, and a receiver of its hints that has
/// heard the first one (anything may be ready).
async fn listening() -> Option<(PostgresStore, String, ReadyReceiver)> {
    let (store, schema) = fresh_store().await?;
    let mut hints = signals(&store).subscribe();
    assert_eq!(next(&mut hints).await, Ready::Anything, "listening");
    Some((store, schema, hints))
}

/// Starts a run of `namespace` at `now`.
async fn start(store: &PostgresStore, namespace: &Namespace, now: i64) -> aiki_store::RunRecord {
    store
        .create_run(new_run(namespace, now))
        .await
        .expect("create")
        .run()
        .clone()
}

fn signals(store: &PostgresStore) -> ReadySignals {
    store
        .ready_signals()
        .expect("a schema at migration 20 sends ready hints")
}

/// The next hint, within 10 s.
async fn next(hints: &mut ReadyReceiver) -> Ready {
    tokio::time::timeout(Duration::from_secs(10), hints.recv())
        .await
        .expect("a hint within 10 s")
}

fn hint(namespace: &Namespace) -> Ready {
    Ready::Namespace {
        namespace: namespace.clone(),
        pool: "default".to_owned(),
    }
}

/// The listening backends of `schema`'s channel.
async fn listeners(schema: &str) -> Vec<i32> {
    let mut admin = pg::admin().await.expect("admin connection");
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'aiki listener' \
         AND query = $1",
    )
    .bind(format!("LISTEN \"aiki_ready_{schema}\""))
    .fetch_all(&mut admin)
    .await
    .expect("pg_stat_activity")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_becoming_queued_notify_and_nothing_else_does() {
    let Some((store, _schema, mut hints)) = listening().await else {
        return;
    };

    // A start notifies.
    let namespace = Namespace::new("ready-flow", "1");
    let run = start(&store, &namespace, 1).await;
    assert_eq!(next(&mut hints).await, hint(&namespace), "a start");

    // A claim, task writes and a suspension do not: the next hint is a marker's start
    // (hints come in commit order).
    let run = store
        .claim(claim(&namespace, 2))
        .await
        .expect("claim")
        .runs
        .into_iter()
        .find(|claimed| claimed.id == run.id)
        .expect("claimed");
    for task in 0..20 {
        store
            .put_entry(run.revision, entry(run.id, &format!("task-{task}")))
            .await
            .expect("task write");
    }
    let mut suspend = Transition::to(RunStatus::AwaitingEvent, 3);
    suspend.wait = Some(WaitSpec::default().event("go", 0));
    let run = store
        .transition(run.id, run.revision, suspend)
        .await
        .expect("suspend");
    let marker = Namespace::new("ready-marker", "1");
    store.create_run(new_run(&marker, 4)).await.expect("marker");
    assert_eq!(
        next(&mut hints).await,
        hint(&marker),
        "a claim, task writes or a suspension notified"
    );

    // An event that wakes the run notifies; so does a claim released back to the queue.
    store
        .append_event(NewEvent::new(run.id, "go", json!(1), 5))
        .await
        .expect("event");
    assert_eq!(
        next(&mut hints).await,
        hint(&namespace),
        "an event's wake-up"
    );
    let run = store
        .claim(claim(&namespace, 6))
        .await
        .expect("claim")
        .runs
        .remove(0);
    store
        .transition(run.id, run.revision, Transition::to(RunStatus::Queued, 7))
        .await
        .expect("release");
    assert_eq!(next(&mut hints).await, hint(&namespace), "a released claim");
    assert_eq!(hints.try_recv(), None, "one hint each");
}

/// Inserts, on a connection of its own in one transaction, a copy of the queued run `of` under
/// namespace `namespace`, as a statement of an earlier release would (a plain `INSERT`), after
/// `aiki.start_hints` is set to `after_commit` for the transaction if `quiet`.
async fn insert_copy(schema: &str, of: RunId, namespace: &Namespace, quiet: bool) {
    let url = pg::shared_database().await.expect("the shared database");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    let mut tx = sqlx::Connection::begin(&mut connection)
        .await
        .expect("begin");
    if quiet {
        sqlx::query("SELECT set_config('aiki.start_hints', 'after_commit', true)")
            .execute(&mut *tx)
            .await
            .expect("set_config");
    }
    let copy = format!(
        "CREATE TEMP TABLE copied ON COMMIT DROP AS SELECT * FROM {schema}.aiki_runs \
         WHERE id = $1::uuid"
    );
    sqlx::query(&copy)
        .bind(of.to_string())
        .execute(&mut *tx)
        .await
        .expect("copy");
    sqlx::query(
        "UPDATE copied SET id = gen_random_uuid(), reference_id = gen_random_uuid()::text, \
         workflow = $1, version = $2, namespace = $1 || '@' || $2",
    )
    .bind(namespace.workflow.clone())
    .bind(namespace.version.clone())
    .execute(&mut *tx)
    .await
    .expect("rename");
    sqlx::query(&format!(
        "INSERT INTO {schema}.aiki_runs SELECT * FROM copied"
    ))
    .execute(&mut *tx)
    .await
    .expect("insert");
    tx.commit().await.expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_is_hinted_by_the_store_after_its_commit_and_an_earlier_release_s_by_the_trigger() {
    let Some((store, schema, mut hints)) = listening().await else {
        return;
    };

    // This release's start: one hint, sent once the run can be claimed.
    let namespace = Namespace::new("hinted", "1");
    let run = start(&store, &namespace, 1).await;
    assert_eq!(next(&mut hints).await, hint(&namespace), "a start");
    let claimed = store.claim(claim(&namespace, 2)).await.expect("claim").runs;
    assert_eq!(
        claimed.iter().map(|run| run.id).collect::<Vec<_>>(),
        [run.id],
        "the hinted run is claimable"
    );
    assert_eq!(hints.try_recv(), None, "one hint per start");

    // An insert in a transaction that leaves hints to the store: the trigger stays quiet (the
    // next hint is the marker's).
    let queued = start(&store, &namespace, 3).await;
    assert_eq!(next(&mut hints).await, hint(&namespace));
    let quiet = Namespace::new("quiet", "1");
    insert_copy(&schema, queued.id, &quiet, true).await;
    let marker = Namespace::new("marker", "1");
    start(&store, &marker, 4).await;
    assert_eq!(
        next(&mut hints).await,
        hint(&marker),
        "the trigger notified an insert that left its hint to the store"
    );

    // An earlier release's insert (no setting): the trigger notifies, as it always did.
    let earlier = Namespace::new("earlier", "1");
    insert_copy(&schema, queued.id, &earlier, false).await;
    assert_eq!(
        next(&mut hints).await,
        hint(&earlier),
        "an earlier release's start"
    );

    // A store playing the release before migration 26, on this schema: hinted by the trigger.
    let url = pg::shared_database().await.expect("the shared database");
    let previous = PostgresStore::connect_with(
        PostgresOptions::new(format!("{url}?aiki_schema={schema}")).as_release_at(25),
    )
    .await
    .expect("open as the previous release");
    let theirs = Namespace::new("previous-release", "1");
    previous
        .create_run(new_run(&theirs, 5))
        .await
        .expect("create");
    assert_eq!(
        next(&mut hints).await,
        hint(&theirs),
        "the previous release's start"
    );
    assert_eq!(hints.try_recv(), None, "one hint each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_listens_on_one_connection_per_schema() {
    let Some((store, schema)) = fresh_store().await else {
        return;
    };
    let other = open(&schema).await.expect("the shared database");
    let (first, second) = (signals(&store), signals(&other));
    assert!(first.same_source(&second), "two stores, one listener");
    let mut hints = [first.subscribe(), second.subscribe(), first.subscribe()];
    for hints in &mut hints {
        assert_eq!(next(hints).await, Ready::Anything);
    }
    assert_eq!(listeners(&schema).await.len(), 1, "one listening backend");
    // Every receiver hears every hint.
    let namespace = Namespace::new("shared", "1");
    other
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create");
    for hints in &mut hints {
        assert_eq!(next(hints).await, hint(&namespace));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_listener_comes_back_and_says_anything_may_be_ready() {
    let Some((store, schema)) = fresh_store().await else {
        return;
    };
    let mut hints = signals(&store).subscribe();
    assert_eq!(next(&mut hints).await, Ready::Anything, "listening");
    for round in 0..3 {
        let pids = listeners(&schema).await;
        assert_eq!(pids.len(), 1, "round {round}: one listening backend");
        let mut admin = pg::admin().await.expect("admin connection");
        let killed = Instant::now();
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(pids[0])
            .execute(&mut admin)
            .await
            .expect("terminate");
        // Hints sent while it was away are lost: the first one back is "anything".
        assert_eq!(next(&mut hints).await, Ready::Anything, "round {round}");
        let back = killed.elapsed();
        println!("ready hints: listener killed, listening again after {back:?}");
        assert!(back < Duration::from_secs(5), "back after {back:?}");
        let namespace = Namespace::new(format!("after-kill-{round}"), "1");
        store
            .create_run(new_run(&namespace, 1))
            .await
            .expect("create");
        assert_eq!(next(&mut hints).await, hint(&namespace), "round {round}");
    }
}

#[tokio::test]
async fn a_bad_listen_url_is_refused_when_connecting() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let error = PostgresStore::connect(&format!(
        "{url}?aiki_listen_url=postgres%3A%2F%2Fh%3Aport%2Fdb"
    ))
    .await
    .expect_err("a listen URL that is not PostgreSQL's");
    let message = error.to_string();
    assert!(message.contains("listen URL"), "{message}");
}
