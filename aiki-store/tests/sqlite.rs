//! SQLite-specific behaviour: durability across reopening, concurrent migration, schema
//! versions, options, and the statements each operation costs.
#![cfg(feature = "sqlite")]

use crate::support;

use aiki_store::prelude::*;
use aiki_store::sqlite::{SqliteOptions, SqliteStore, SqliteSynchronous};
use aiki_store::{
    Namespace, NewEvent, ParentLink, RunId, RunStatus, SleepRecord, StoreError, Transition,
    WaitSpec,
};
use serde_json::json;
use support::TempFile;
use support::records::{claim, entry, new_run, unheld_lease};

#[tokio::test]
async fn everything_written_survives_closing_and_reopening_the_file() {
    let file = TempFile::new();
    let namespace = Namespace::new("durable", "1.0.0");
    let (id, before) = {
        let store = SqliteStore::connect_with(
            SqliteOptions::new(file.url()).synchronous(SqliteSynchronous::Full),
        )
        .await
        .expect("open");
        let run = store
            .create_run(new_run(&namespace, 1))
            .await
            .expect("create");
        let id = run.run().id;
        let claimed = store
            .claim(claim(&namespace, 2))
            .await
            .expect("claim")
            .runs
            .remove(0);
        store
            .put_entry(claimed.revision, entry(id, "task:1"))
            .await
            .expect("entry");
        store
            .put_sleep(
                claimed.revision,
                SleepRecord::new(id, "nap", 0, 10, 20),
                None,
            )
            .await
            .expect("sleep");
        store
            .append_event(
                NewEvent::new(id, "go", json!("now"), 3).reference_id(Some("r".to_owned())),
            )
            .await
            .expect("event");
        store
            .transition(
                id,
                claimed.revision,
                Transition::to(RunStatus::Sleeping, 4).due_at(20),
            )
            .await
            .expect("sleep");
        let before = store.load_history(id).await.expect("history");
        store.close().await;
        (id, before)
    };
    let reopened = SqliteStore::connect(&file.url()).await.expect("reopen");
    assert_eq!(reopened.load_history(id).await.expect("history"), before);
    assert_eq!(before.entries.len(), 1);
    assert_eq!(before.sleeps.len(), 1);
    assert_eq!(before.events.len(), 1);
    assert_eq!(before.run.status, RunStatus::Sleeping);
}

/// Regression: an aborted worker left SQLite's one writer connection inside a `BEGIN
/// IMMEDIATE` (sqlx acknowledged the custom `BEGIN`, then the caller was dropped before it
/// got its transaction), and every later write of the process ran inside it, uncommitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_transactions_leave_nothing_open() {
    let file = TempFile::new();
    let store = SqliteStore::connect(&file.url()).await.expect("open");
    let other = SqliteStore::connect(&file.url()).await.expect("open again");
    support::cancel::cancelled_transactions_leave_nothing_open(&store, &other).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_stores_migrate_one_fresh_file_at_once() {
    let file = TempFile::new();
    let url = file.url();
    let opens: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { SqliteStore::connect(&url).await })
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
}

/// A store playing an older release (`as_release_at`) migrates only as far as that release
/// would, whether it migrates as it opens or later through `migrate`.
#[tokio::test]
async fn a_capped_store_migrates_no_further_than_its_release() {
    let file = TempFile::new();
    let store = SqliteStore::connect_with(
        SqliteOptions::new(file.url())
            .migrate(false)
            .as_release_at(5),
    )
    .await
    .expect("open without migrating");
    let report = store.migrate().await.expect("migrate");
    assert_eq!((report.version, report.release), (5, 5), "{report:?}");
    assert_eq!(report.applied.len(), 5, "{report:?}");
    store.close().await;
}

/// A newer release's migration is accepted while the compatibility record admits this
/// release (a rolling deploy, a rollback), and refused, naming both versions, once it does not.
#[tokio::test]
async fn a_database_migrated_by_newer_code_is_accepted_only_when_it_admits_this_release() {
    use sqlx::Connection;
    let file = TempFile::new();
    let store = SqliteStore::connect(&file.url()).await.expect("open");
    let ours = store.migration_report().release;
    store.close().await;
    let raw = |sql: &'static str| {
        let url = file.url();
        async move {
            let mut connection = sqlx::SqliteConnection::connect(&url)
                .await
                .expect("raw connection");
            sqlx::query(sql)
                .execute(&mut connection)
                .await
                .expect("raw statement");
            connection.close().await.expect("close");
        }
    };
    raw(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
         execution_time) VALUES (99990101000000, 'from the future', TRUE, x'00', 0)",
    )
    .await;
    let admitted = SqliteStore::connect(&file.url())
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
    raw("UPDATE aiki_compat SET readable_from = 99990101000000").await;
    let error = SqliteStore::connect(&file.url())
        .await
        .expect_err("refused");
    assert!(
        matches!(error, StoreError::Schema { .. }),
        "expected a schema error, got {error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("99990101000000") && message.contains(&format!("is {ours}")),
        "names both versions: {message}"
    );
}

#[tokio::test]
async fn migrations_can_be_left_to_the_operator() {
    let file = TempFile::new();
    let store = SqliteStore::connect_with(SqliteOptions::new(file.url()).migrate(false))
        .await
        .expect("open");
    assert!(
        store.wake_due(&unheld_lease(), 0, 100).await.is_err(),
        "no schema yet"
    );
    store.migrate().await.expect("migrate");
    store.migrate().await.expect("migrating twice is a no-op");
    assert_eq!(
        store
            .wake_due(&unheld_lease(), 0, 100)
            .await
            .expect("wake_due"),
        0
    );
}

#[tokio::test]
async fn connect_dispatches_on_the_url() {
    let memory = aiki_store::connect("sqlite::memory:")
        .await
        .expect("memory");
    assert_eq!(memory.backend(), "sqlite");
    let file = TempFile::new();
    let url = format!("sqlite:{}", file.0.display());
    assert_eq!(
        aiki_store::connect(&url).await.expect("file").backend(),
        "sqlite"
    );
    assert!(file.0.exists(), "the file is created");
    for url in ["mysql://localhost/db", "redis://x", "nonsense"] {
        let result = aiki_store::connect(url).await;
        assert!(
            matches!(result, Err(StoreError::UnsupportedUrl { .. })),
            "{url}: {result:?}"
        );
    }
}

/// The cost of each operation in statements (`BEGIN`/`COMMIT` included): what one task step
/// or one transition costs in round trips.
async fn cost(label: &str, expected: u64, before: u64, after: u64) {
    println!("sqlite {label}: {} statements", after - before);
    assert_eq!(after - before, expected, "{label}");
}

#[tokio::test]
async fn statements_per_operation() {
    let store = SqliteStore::connect("sqlite::memory:").await.expect("open");
    let namespace = Namespace::new("costs", "1.0.0");
    let s = store.statements();
    let run = store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create");
    cost("create_run", 1, s, store.statements()).await;
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
    store.get_run(id).await.expect("get_run");
    cost("get_run", 1, s, store.statements()).await;
    let s = store.statements();
    let mut child = new_run(&Namespace::new("costs-child", "1.0.0"), 3);
    child.parent = Some(ParentLink::new(id, "c:1"));
    let child = store
        .start_child(rev, entry(id, "c:1"), child)
        .await
        .expect("start_child");
    cost("start_child", 4, s, store.statements()).await;
    let s = store.statements();
    store
        .append_event(NewEvent::new(id, "e", json!(1), 3))
        .await
        .expect("event");
    cost("append_event (no wake)", 4, s, store.statements()).await;
    let s = store.statements();
    store
        .record_event_timeout(id, rev, "t", 0, 3)
        .await
        .expect("timeout");
    cost("record_event_timeout", 1, s, store.statements()).await;
    let s = store.statements();
    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, 4);
    suspend.wait = Some(WaitSpec::default().child(child.id));
    let parent = store.transition(id, rev, suspend).await.expect("suspend");
    cost(
        "transition (suspend with a wait spec)",
        1,
        s,
        store.statements(),
    )
    .await;
    let child_rev = store
        .claim(claim(&child.namespace, 5))
        .await
        .expect("claim")
        .runs
        .remove(0)
        .revision;
    let s = store.statements();
    store
        .transition(child.id, child_rev, Transition::to(RunStatus::Completed, 6))
        .await
        .expect("complete");
    // One statement: the parent is woken by a trigger inside it.
    cost(
        "transition (terminal, with a parent)",
        1,
        s,
        store.statements(),
    )
    .await;
    assert_eq!(
        store.get_run(id).await.expect("parent").revision,
        parent.revision + 1
    );
    let s = store.statements();
    store
        .wake_due(&unheld_lease(), 6, 100)
        .await
        .expect("wake_due");
    cost("wake_due", 1, s, store.statements()).await;
}

/// Concurrent `put_entry` calls share statements (group commit) and each gets its own outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_entries_are_written_together() {
    let file = TempFile::new();
    let store = std::sync::Arc::new(SqliteStore::connect(&file.url()).await.expect("open"));
    let namespace = Namespace::new("group-commit", "1.0.0");
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
            tokio::spawn(async move {
                let expected = if i % 10 == 0 { rev + 1 } else { rev };
                (
                    i,
                    store
                        .put_entry(expected, entry(id, &format!("t:{i}")))
                        .await,
                )
            })
        })
        .collect();
    for write in writes {
        let (i, outcome) = write.await.expect("join");
        if i % 10 == 0 {
            assert!(
                matches!(outcome, Err(StoreError::RevisionConflict { actual, .. }) if actual == rev),
                "{outcome:?}"
            );
        } else {
            outcome.expect("put_entry");
        }
    }
    let spent = store.statements() - before;
    println!("sqlite: 200 concurrent put_entry calls in {spent} statements");
    assert!(
        spent < 200,
        "one statement per batch (plus one per batch with a conflict)"
    );
    let history = store.load_history(id).await.expect("history");
    assert_eq!(history.entries.len(), 180);
    store.close().await;
}

#[tokio::test]
async fn a_file_in_a_missing_folder_names_the_folder_and_the_fix() {
    let folder = std::env::temp_dir().join(format!("aiki-missing-{}", RunId::new()));
    let url = format!("sqlite://{}/runs.db", folder.display());
    let error = SqliteStore::connect(&url).await.expect_err("refused");
    assert!(
        matches!(error, StoreError::CannotOpen { .. }),
        "expected CannotOpen, got {error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&folder.display().to_string()), "{message}");
    assert!(message.contains("mkdir -p"), "says what to do: {message}");
    assert!(!folder.exists(), "nothing was created");
}

#[tokio::test]
async fn a_file_of_another_application_is_refused() {
    use sqlx::Connection;
    let file = TempFile::new();
    {
        let mut connection = sqlx::SqliteConnection::connect(&format!("{}?mode=rwc", file.url()))
            .await
            .expect("raw connection");
        sqlx::query("CREATE TABLE users (id INTEGER PRIMARY KEY)")
            .execute(&mut connection)
            .await
            .expect("the application's table");
        connection.close().await.expect("close");
    }
    let error = SqliteStore::connect(&file.url())
        .await
        .expect_err("refused");
    assert!(matches!(error, StoreError::CannotOpen { .. }), "{error:?}");
    assert!(
        error.to_string().contains("`users`") && error.to_string().contains("file of its own"),
        "{error}"
    );
}

#[tokio::test]
async fn check_mode_creates_nothing_and_accepts_this_releases_schema() {
    use aiki_store::MigrationMode;
    let file = TempFile::new();
    let check = || {
        SqliteStore::connect_with(SqliteOptions::new(file.url()).migration(MigrationMode::Check))
    };
    let error = check().await.expect_err("no file yet");
    assert!(matches!(error, StoreError::CannotOpen { .. }), "{error:?}");
    assert!(error.to_string().contains("aiki migrate"), "{error}");
    assert!(!file.0.exists(), "a check creates no file");
    let unmigrated = SqliteStore::connect_with(SqliteOptions::new(file.url()).migrate(false))
        .await
        .expect("open without migrating");
    unmigrated.close().await;
    let error = check().await.expect_err("no schema yet");
    assert!(matches!(error, StoreError::Schema { .. }), "{error:?}");
    assert!(error.to_string().contains("aiki migrate"), "{error}");
    assert!(
        error.to_string().contains("holds no Aiki schema")
            && !error.to_string().contains("migration failed"),
        "{error}"
    );
    SqliteStore::connect(&file.url())
        .await
        .expect("migrate")
        .close()
        .await;
    let checked = check().await.expect("this release's schema passes");
    assert!(checked.wake_due(&unheld_lease(), 0, 100).await.is_ok());
    checked.close().await;
}

/// A retry is one transaction: a failure injected after its first statement (the status
/// change; a trigger aborts the entry reset) leaves the run, its entries and its timeline as
/// they were.
#[tokio::test]
async fn a_retry_that_fails_midway_changes_nothing() {
    let file = TempFile::new();
    let store = SqliteStore::connect(&file.url()).await.expect("open");
    let run = support::records::failed_run(&store, 1_000).await;
    {
        use sqlx::Connection;
        let mut connection = sqlx::SqliteConnection::connect(&file.url())
            .await
            .expect("raw connection");
        sqlx::query(
            "CREATE TRIGGER inject_failure BEFORE UPDATE OF status ON aiki_entries \
             WHEN NEW.status = 'awaiting_retry' \
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
        )
        .execute(&mut connection)
        .await
        .expect("install the failure");
        connection.close().await.expect("close");
    }
    let error = store
        .transition(run.id, run.revision, support::records::retry(&run, 2_000))
        .await
        .expect_err("the injected failure");
    assert!(error.to_string().contains("injected failure"), "{error}");
    support::records::assert_unchanged(&store, &run).await;
    {
        use sqlx::Connection;
        let mut connection = sqlx::SqliteConnection::connect(&file.url())
            .await
            .expect("raw connection");
        sqlx::query("DROP TRIGGER inject_failure")
            .execute(&mut connection)
            .await
            .expect("remove the failure");
        connection.close().await.expect("close");
    }
    let retried = store
        .transition(run.id, run.revision, support::records::retry(&run, 2_000))
        .await
        .expect("the same retry, now whole");
    assert_eq!(retried.status, aiki_store::RunStatus::Queued);
    store.close().await;
}
