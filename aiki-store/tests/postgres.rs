//! PostgreSQL-specific behaviour: concurrent migration of a fresh database, schema versions,
//! an unreachable server, races between wake-ups and suspensions, and the round trips each
//! operation costs. Skipped loudly without a server (failing under `CI=true`).
#![cfg(feature = "postgres")]

use crate::support;

use std::sync::Arc;

use aiki_store::postgres::{PostgresOptions, PostgresStore};
use aiki_store::prelude::*;
use aiki_store::{
    Namespace, NewEvent, ParentLink, RunId, RunStatus, StoreError, Transition, WaitSpec,
};
use serde_json::json;
use support::postgres as pg;
use support::records::{claim, entry, new_run, unheld_lease};

fn unique_namespace() -> Namespace {
    Namespace::new(format!("pg-{}", RunId::new()), "1.0.0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_processes_migrate_one_fresh_database_at_once() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                PostgresStore::connect_with(PostgresOptions::new(url).max_connections(2)).await
            })
        })
        .collect();
    for open in opens {
        let store = open.await.expect("join").expect("every store opens");
        assert_eq!(
            store
                .wake_due(&unheld_lease(), 0, 100)
                .await
                .expect("schema is there"),
            0
        );
        store.close().await;
    }
    pg::drop_database(&url).await;
}

/// Regression: a worker aborted while its `BEGIN` was in flight left a pooled connection
/// inside a transaction (sqlx 0.8's `begin` is not cancel-safe on PostgreSQL), and the
/// statements of whoever used that connection next stayed uncommitted. One connection, so
/// that every statement reuses the one the cancellations touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_transactions_leave_nothing_open() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let store = PostgresStore::connect_with(PostgresOptions::new(&url).max_connections(1))
        .await
        .expect("open");
    let other = PostgresStore::connect(&url).await.expect("open again");
    support::cancel::cancelled_transactions_leave_nothing_open(&store, &other).await;
    store.close().await;
    other.close().await;
    pg::drop_database(&url).await;
}

/// A newer release's migration is accepted while the compatibility record admits this
/// release (a rolling deploy, a rollback), and refused, naming both versions, once it does not.
#[tokio::test]
async fn a_database_migrated_by_newer_code_is_accepted_only_when_it_admits_this_release() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let ours = store.migration_report().release;
    store.close().await;
    raw(
        &url,
        &[
            "INSERT INTO aiki._sqlx_migrations (version, description, success, checksum, \
           execution_time) VALUES (99990101000000, 'from the future', TRUE, '\\x00', 0)",
        ],
    )
    .await;
    let admitted = PostgresStore::connect(&url)
        .await
        .expect("an additive newer migration admits this release");
    assert_eq!(admitted.migration_report().applied, []);
    assert_eq!(
        admitted
            .wake_due(&unheld_lease(), 0, 100)
            .await
            .expect("works"),
        0
    );
    admitted.close().await;
    raw(
        &url,
        &["UPDATE aiki.aiki_compat SET readable_from = 99990101000000"],
    )
    .await;
    let error = PostgresStore::connect(&url).await.expect_err("refused");
    assert!(
        matches!(error, StoreError::Schema { .. }),
        "expected a schema error, got {error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("99990101000000") && message.contains(&format!("is {ours}")),
        "names both versions: {message}"
    );
    pg::drop_database(&url).await;
}

/// Runs statements on a database directly.
async fn raw(url: &str, statements: &[&str]) {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(url)
        .await
        .expect("raw connection");
    for statement in statements {
        sqlx::query(statement)
            .execute(&mut connection)
            .await
            .unwrap_or_else(|error| panic!("{statement}: {error}"));
    }
}

async fn count(url: &str, sql: &str) -> i64 {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(url)
        .await
        .expect("raw connection");
    sqlx::query_scalar(sql)
        .fetch_one(&mut connection)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// The host application's own `sqlx::migrate!` bookkeeping, with its version 1, in `public`.
const FOREIGN_MIGRATIONS: &[&str] = &[
    "CREATE TABLE _sqlx_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, \
     installed_on TIMESTAMPTZ NOT NULL DEFAULT now(), success BOOLEAN NOT NULL, \
     checksum BYTEA NOT NULL, execution_time BIGINT NOT NULL)",
    "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
     VALUES (1, 'create users', TRUE, '\\x0102', 5)",
    "CREATE TABLE users (id BIGINT PRIMARY KEY)",
];

#[tokio::test]
async fn aikis_tables_and_bookkeeping_live_apart_from_the_applications() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    raw(&url, FOREIGN_MIGRATIONS).await;
    let store = PostgresStore::connect(&url)
        .await
        .expect("open beside a foreign version 1");
    let namespace = unique_namespace();
    store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("a run");
    store.close().await;
    assert_eq!(
        count(&url, "SELECT COUNT(*) FROM aiki.aiki_runs").await,
        1,
        "the run is in Aiki's schema"
    );
    assert_eq!(
        count(&url, "SELECT COUNT(*) FROM public._sqlx_migrations").await,
        1,
        "the application's bookkeeping is untouched"
    );
    assert_eq!(
        count(
            &url,
            "SELECT COUNT(*) FROM public._sqlx_migrations WHERE description = 'create users'"
        )
        .await,
        1
    );
    assert!(count(&url, "SELECT COUNT(*) FROM aiki._sqlx_migrations").await >= 3);
    assert_eq!(
        count(
            &url,
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'aiki%'"
        )
        .await,
        0
    );
    // A schema named by the URL instead.
    let other = format!("{url}?aiki_schema=runs_elsewhere");
    PostgresStore::connect(&other)
        .await
        .expect("open")
        .close()
        .await;
    assert_eq!(
        count(&url, "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'runs_elsewhere' AND tablename = 'aiki_runs'").await,
        1
    );
    pg::drop_database(&url).await;
}

#[tokio::test]
async fn a_bad_schema_name_is_refused() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let error = PostgresStore::connect(&format!("{url}?aiki_schema=x;drop"))
        .await
        .expect_err("refused");
    assert!(
        matches!(error, StoreError::UnsupportedUrl { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("x;drop"), "{error}");
    pg::drop_database(&url).await;
}

#[tokio::test]
async fn check_mode_changes_nothing_and_refuses_what_it_cannot_read() {
    use aiki_store::MigrationMode;
    let Some(url) = pg::create_database().await else {
        return;
    };
    let check =
        || PostgresStore::connect_with(PostgresOptions::new(&url).migration(MigrationMode::Check));
    let error = check().await.expect_err("no schema yet");
    assert!(error.to_string().contains("aiki migrate"), "{error}");
    assert_eq!(
        count(
            &url,
            "SELECT COUNT(*) FROM pg_namespace WHERE nspname = 'aiki'"
        )
        .await,
        0,
        "a check creates nothing"
    );
    let never =
        PostgresStore::connect_with(PostgresOptions::new(&url).migration(MigrationMode::Never))
            .await
            .expect("never checks");
    never.close().await;
    PostgresStore::connect(&url)
        .await
        .expect("migrate")
        .close()
        .await;
    check()
        .await
        .expect("this release's schema passes")
        .close()
        .await;
    raw(
        &url,
        &[
            "INSERT INTO aiki._sqlx_migrations (version, description, success, checksum, \
           execution_time) VALUES (99990101000000, 'from the future', TRUE, '\\x00', 0)",
            "UPDATE aiki.aiki_compat SET readable_from = 99990101000000",
        ],
    )
    .await;
    let error = check().await.expect_err("newer");
    assert!(
        error.to_string().contains("99990101000000") && error.to_string().contains("newer"),
        "{error}"
    );
    pg::drop_database(&url).await;
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let result = aiki_store::connect("postgres://postgres@127.0.0.1:1/postgres").await;
    assert!(
        matches!(result, Err(StoreError::Unavailable { .. })),
        "{result:?}"
    );
    assert!(result.err().is_some_and(|error| error.is_transient()));
}

/// An event and a suspension waiting for it, racing: whichever commits first, the run never
/// stays asleep with its event delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_racing_a_suspension_is_never_lost() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
    for _ in 0..40 {
        let namespace = unique_namespace();
        store
            .create_run(new_run(&namespace, 1))
            .await
            .expect("create");
        let run = store
            .claim(claim(&namespace, 2))
            .await
            .expect("claim")
            .runs
            .remove(0);
        let sender = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .append_event(NewEvent::new(run.id, "go", json!(1), 3))
                    .await
            })
        };
        let mut suspend = Transition::to(RunStatus::AwaitingEvent, 3);
        suspend.wait = Some(WaitSpec::default().event("go", 0));
        store
            .transition(run.id, run.revision, suspend)
            .await
            .expect("suspend");
        sender.await.expect("join").expect("append");
        let status = store.get_run(run.id).await.expect("get_run").status;
        assert_eq!(status, RunStatus::Queued, "the wake-up was lost");
    }
}

/// A child ending while its parent suspends on it: the parent always ends up scheduled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_ending_while_its_parent_suspends_is_never_lost() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
    for _ in 0..40 {
        let namespace = unique_namespace();
        store
            .create_run(new_run(&namespace, 1))
            .await
            .expect("create");
        let parent = store
            .claim(claim(&namespace, 2))
            .await
            .expect("claim")
            .runs
            .remove(0);
        let child_namespace = unique_namespace();
        let mut child = new_run(&child_namespace, 2);
        child.parent = Some(ParentLink::new(parent.id, "c:1"));
        let child = store
            .start_child(parent.revision, entry(parent.id, "c:1"), child)
            .await
            .expect("start_child");
        let child_run = store
            .claim(claim(&child_namespace, 3))
            .await
            .expect("claim")
            .runs
            .remove(0);
        let finisher = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .transition(
                        child.id,
                        child_run.revision,
                        Transition::to(RunStatus::Completed, 4),
                    )
                    .await
            })
        };
        let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, 4);
        suspend.wait = Some(WaitSpec::default().child(child.id));
        store
            .transition(parent.id, parent.revision, suspend)
            .await
            .expect("suspend");
        finisher.await.expect("join").expect("complete");
        let status = store.get_run(parent.id).await.expect("get_run").status;
        assert_eq!(status, RunStatus::Queued, "the wake-up was lost");
    }
}

/// Children of one all-of wait ending at the same moment, on several connections: the parent
/// is woken exactly once, by the last of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_of_an_all_of_wait_ending_at_once_wake_their_parent_once() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
    for round in 0..10 {
        let namespace = unique_namespace();
        store
            .create_run(new_run(&namespace, 1))
            .await
            .expect("create");
        let parent = store
            .claim(claim(&namespace, 2))
            .await
            .expect("claim")
            .runs
            .remove(0);
        let mut wait = WaitSpec::default().all_children(true);
        let mut claimed = Vec::new();
        for i in 0..8 {
            let child_namespace = unique_namespace();
            let address = format!("c:{i}");
            let mut child = new_run(&child_namespace, 2);
            child.parent = Some(ParentLink::new(parent.id, address.clone()));
            let child = store
                .start_child(parent.revision, entry(parent.id, &address), child)
                .await
                .expect("start_child");
            wait = wait.child(child.id);
            claimed.push(
                store
                    .claim(claim(&child_namespace, 3))
                    .await
                    .expect("claim")
                    .runs
                    .remove(0),
            );
        }
        let waiting = store
            .transition(
                parent.id,
                parent.revision,
                Transition::to(RunStatus::AwaitingChildWorkflow, 4).wait(wait),
            )
            .await
            .expect("suspend");
        assert_eq!(waiting.status, RunStatus::AwaitingChildWorkflow);
        let endings: Vec<_> = claimed
            .into_iter()
            .map(|child| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .transition(
                            child.id,
                            child.revision,
                            Transition::to(RunStatus::Completed, 5),
                        )
                        .await
                })
            })
            .collect();
        for ending in endings {
            ending.await.expect("join").expect("complete");
        }
        let woken = store.get_run(parent.id).await.expect("get_run");
        assert_eq!(
            woken.status,
            RunStatus::Queued,
            "round {round}: the wake-up was lost"
        );
        assert_eq!(
            woken.revision,
            waiting.revision + 1,
            "round {round}: woken once"
        );
    }
}

async fn cost(label: &str, expected: u64, before: u64, after: u64) {
    println!("postgres {label}: {} round trips", after - before);
    assert_eq!(after - before, expected, "{label}");
}

/// The cost of each operation in round trips (`BEGIN`/`COMMIT` included).
#[tokio::test]
async fn round_trips_per_operation() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let namespace = unique_namespace();
    let s = store.statements();
    let run = store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create");
    // The insert, and its ready hint sent after the commit (a statement that writes nothing).
    cost("create_run", 2, s, store.statements()).await;
    let id = run.run().id;
    let s = store.statements();
    let claimed = store
        .claim(claim(&namespace, 2))
        .await
        .expect("claim")
        .runs
        .remove(0);
    cost("claim", 1, s, store.statements()).await;
    let rev = claimed.revision;
    let s = store.statements();
    store.put_entry(rev, entry(id, "t:1")).await.expect("entry");
    cost("put_entry", 1, s, store.statements()).await;
    let s = store.statements();
    store.refresh_claim(id, "w", rev, 3).await.expect("refresh");
    cost("refresh_claim", 1, s, store.statements()).await;
    let s = store.statements();
    store.load_history(id).await.expect("history");
    cost("load_history", 1, s, store.statements()).await;
    let s = store.statements();
    let mut child = new_run(&unique_namespace(), 3);
    child.parent = Some(ParentLink::new(id, "c:1"));
    let child = store
        .start_child(rev, entry(id, "c:1"), child)
        .await
        .expect("start_child");
    cost("start_child", 5, s, store.statements()).await;
    let s = store.statements();
    store
        .append_event(NewEvent::new(id, "e", json!(1), 3))
        .await
        .expect("event");
    cost("append_event", 4, s, store.statements()).await;
    let s = store.statements();
    store
        .record_event_timeout(id, rev, "t", 0, 3)
        .await
        .expect("timeout");
    cost("record_event_timeout", 1, s, store.statements()).await;
    let s = store.statements();
    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, 4);
    suspend.wait = Some(WaitSpec::default().child(child.id));
    store.transition(id, rev, suspend).await.expect("suspend");
    cost("transition (suspend on a child)", 5, s, store.statements()).await;
    let child_rev = store
        .claim(claim(&child.namespace, 5))
        .await
        .expect("claim")
        .runs
        .remove(0)
        .revision;
    let s = store.statements();
    let child = store
        .transition(
            child.id,
            child_rev,
            Transition::to(RunStatus::Sleeping, 6).due_at(100),
        )
        .await
        .expect("sleep");
    cost("transition (plain)", 1, s, store.statements()).await;
    let s = store.statements();
    store
        .transition(
            child.id,
            child.revision,
            Transition::to(RunStatus::Cancelled, 7),
        )
        .await
        .expect("cancel");
    // One round trip: the parent is woken by a trigger inside the statement.
    cost("transition (terminal)", 1, s, store.statements()).await;
    assert_eq!(
        store.get_run(id).await.expect("parent").status,
        RunStatus::Queued
    );
}

/// A plain transition records its answer in its own statement: one round trip, as outside a
/// scope; a new run records it in a transaction (four), in the form the previous release reads.
/// Sent as new under an id that answered already (a client misusing a key, or a repeat racing
/// the first send), neither writes anything and the first answer is given.
#[tokio::test]
async fn an_answered_transition_takes_one_round_trip_and_a_taken_id_writes_nothing() {
    use aiki_store::operation::{OperationId, fresh_scope};
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let namespace = unique_namespace();
    let op = |name: &str| OperationId::new(format!("{name}-{}", RunId::new())).expect("an id");
    let (start, finish) = (op("start"), op("finish"));

    let s = store.statements();
    let created = fresh_scope(start.clone(), store.create_run(new_run(&namespace, 1)))
        .await
        .expect("create");
    cost("create_run (answered)", 5, s, store.statements()).await;
    let other = new_run(&namespace, 1);
    let other_id = other.id;
    let again = fresh_scope(start, store.create_run(other))
        .await
        .expect("the repeat");
    assert_eq!(again, created, "the first answer");
    assert!(
        matches!(
            store.get_run(other_id).await,
            Err(StoreError::NotFound { .. })
        ),
        "the repeat's run is not written"
    );

    let one = store
        .claim(claim(&namespace, 2))
        .await
        .expect("claim")
        .runs
        .remove(0);
    let two = store
        .create_run(new_run(&namespace, 3))
        .await
        .expect("create")
        .run()
        .clone();
    let two = store
        .claim(claim(&namespace, 3))
        .await
        .expect("claim")
        .runs
        .into_iter()
        .find(|run| run.id == two.id)
        .expect("the second run claimed");
    let done = || Transition::to(RunStatus::Completed, 4).output(json!(1), "f");
    let s = store.statements();
    let finished = fresh_scope(
        finish.clone(),
        store.transition(one.id, one.revision, done()),
    )
    .await
    .expect("transition");
    cost("transition (answered)", 1, s, store.statements()).await;
    let again = fresh_scope(finish, store.transition(two.id, two.revision, done()))
        .await
        .expect("the repeat");
    assert_eq!(again, finished, "the first answer");
    let untouched = store.get_run(two.id).await.expect("get_run");
    assert_eq!(
        (untouched.status, untouched.revision),
        (RunStatus::Running, two.revision),
        "the repeat's own move is not written"
    );
}

/// Concurrent `put_entry` calls share statements (group commit), and a write the database
/// refuses (text with a NUL character) fails alone: the others in its batch are written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_entries_are_written_together_and_a_refused_one_fails_alone() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
    let namespace = unique_namespace();
    let run = store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create");
    let id = run.run().id;
    let rev = store
        .claim(claim(&namespace, 2))
        .await
        .expect("claim")
        .runs
        .remove(0)
        .revision;
    let before = store.statements();
    let writes: Vec<_> = (0..200)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.put_entry(rev, entry(id, &format!("t:{i}"))).await })
        })
        .collect();
    for write in writes {
        write.await.expect("join").expect("put_entry");
    }
    let spent = store.statements() - before;
    println!("postgres: 200 concurrent put_entry calls in {spent} statements");
    assert!(spent <= 200, "one statement per batch");

    let writes: Vec<_> = (0..50)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut written = entry(id, &format!("u:{i}"));
                if i == 25 {
                    written.error = Some(aiki_store::Failure::new("task_failed", "nul \0 here"));
                }
                store.put_entry(rev, written).await
            })
        })
        .collect();
    for (i, write) in writes.into_iter().enumerate() {
        let outcome = write.await.expect("join");
        if i == 25 {
            // A value the database refuses (a NUL in text) is the request's fault, not an
            // outage: refused as invalid, alone in its batch.
            assert!(
                matches!(outcome, Err(StoreError::Invalid { .. })),
                "{outcome:?}"
            );
        } else {
            outcome.expect("the others are written");
        }
    }
    let history = store.load_history(id).await.expect("history");
    assert_eq!(history.entries.len(), 249);
}

#[tokio::test]
async fn an_unknown_aiki_parameter_is_refused() {
    let Some(url) = pg::shared_database().await else {
        return;
    };
    for (parameter, named) in [
        ("aiki_claim_clock=server", "aiki_claim_clock=server"),
        ("aiki_schemas=x", "aiki_schemas"),
    ] {
        let error = PostgresStore::connect(&format!("{url}?{parameter}"))
            .await
            .expect_err("refused");
        assert!(
            matches!(error, StoreError::UnsupportedUrl { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains(named), "{error}");
    }
}

/// A retry is one transaction: its connection killed after the first statement (the status
/// change; a trigger on the entry reset terminates its own backend) leaves the run, its
/// entries and its timeline as they were.
#[tokio::test]
async fn a_retry_whose_connection_dies_midway_changes_nothing() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let run = support::records::failed_run(&store, 1_000).await;
    raw(
        &url,
        &[
            "CREATE FUNCTION aiki.kill_own_connection() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NEW; END; $$",
            "CREATE TRIGGER kill_own_connection BEFORE UPDATE OF status ON aiki.aiki_entries \
             FOR EACH ROW WHEN (NEW.status = 'awaiting_retry') \
             EXECUTE FUNCTION aiki.kill_own_connection()",
        ],
    )
    .await;
    let error = store
        .transition(run.id, run.revision, support::records::retry(&run, 2_000))
        .await
        .expect_err("the connection died");
    assert!(
        error.is_transient(),
        "a lost connection is transient: {error}"
    );
    support::records::assert_unchanged(&store, &run).await;
    raw(
        &url,
        &["DROP TRIGGER kill_own_connection ON aiki.aiki_entries"],
    )
    .await;
    let retried = store
        .transition(run.id, run.revision, support::records::retry(&run, 2_000))
        .await
        .expect("the same retry, now whole");
    assert_eq!(retried.status, aiki_store::RunStatus::Queued);
    store.close().await;
    pg::drop_database(&url).await;
}

/// Two transactions take change numbers in one order and commit in the other: a reader that
/// followed the stream while the first was still open still gets its change, once, after it
/// commits (a reader paging by number alone would have skipped it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_committing_out_of_number_order_are_read_once() {
    use sqlx::Connection;
    let Some(url) = pg::shared_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let namespace = unique_namespace();
    let mut ids = Vec::new();
    for at in [1, 2] {
        let run = store
            .create_run(new_run(&namespace, at).status(RunStatus::Scheduled))
            .await
            .expect("create")
            .run()
            .clone();
        ids.push(run.id);
    }
    let start = store
        .changes_since(&aiki_store::ChangeCursor::start(), 0)
        .await
        .expect("the end of the stream")
        .next;
    let change = |id: RunId| {
        format!(
            "UPDATE aiki.aiki_runs SET status = 'paused', revision = revision + 1, \
             updated_at = 10 WHERE id = '{id}'"
        )
    };
    // The first transaction takes the smaller number and stays open.
    let mut first = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query("BEGIN").execute(&mut first).await.unwrap();
    sqlx::query(&change(ids[0]))
        .execute(&mut first)
        .await
        .unwrap();
    // The second takes a larger number and commits first.
    let mut second = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query(&change(ids[1]))
        .execute(&mut second)
        .await
        .unwrap();
    let mine = |page: &aiki_store::ChangePage| -> Vec<(RunId, u64)> {
        page.changes
            .iter()
            .filter(|change| ids.contains(&change.run_id))
            .map(|change| (change.run_id, change.seq))
            .collect()
    };
    let early = store.changes_since(&start, 100).await.expect("read");
    let seen = mine(&early);
    assert_eq!(seen.len(), 1, "only the committed change: {seen:?}");
    assert_eq!(seen[0].0, ids[1]);
    let second_number = seen[0].1;
    // Read on while the first is still open: nothing more, and nothing lost.
    let mut cursor = early.next;
    for _ in 0..3 {
        let page = store.changes_since(&cursor, 100).await.expect("read");
        assert!(mine(&page).is_empty());
        cursor = page.next;
    }
    sqlx::query("COMMIT").execute(&mut first).await.unwrap();
    let mut late = Vec::new();
    for _ in 0..3 {
        let page = store.changes_since(&cursor, 100).await.expect("read");
        late.extend(mine(&page));
        cursor = page.next;
    }
    assert_eq!(
        late.len(),
        1,
        "the first transaction's change, once: {late:?}"
    );
    assert_eq!(late[0].0, ids[0]);
    assert!(
        late[0].1 < second_number,
        "numbered before the one read first ({} < {second_number})",
        late[0].1
    );
    first.close().await.unwrap();
    second.close().await.unwrap();
    store.close().await;
}
