//! Group commit of starts on SQLite and PostgreSQL: concurrent starts share statements, and
//! each caller still gets its own outcome: its run, the run that holds its reference id (taken
//! by a stored run or by another start of the same batch), or its own error.
#![cfg(any(feature = "sqlite", feature = "postgres"))]

use crate::support;

use std::collections::HashMap;
use std::sync::Arc;

use aiki_store::operation::{self, OperationId};
use aiki_store::prelude::*;
use aiki_store::{
    CreateOutcome, ListRuns, Namespace, NewRun, RunFilter, RunId, RunStatus, StoreError,
};
use support::records::new_run;

/// Starts 200 runs at once on `store`: 160 without a reference id and 4 reference ids started
/// 10 times each. `statements` reads the store's statement count.
async fn concurrent_starts_share_statements(
    store: Arc<dyn Store>,
    statements: impl Fn() -> u64,
    backend: &str,
) {
    let namespace = Namespace::new(format!("starts-{}", RunId::new()), "1.0.0");
    let before = statements();
    let starts: Vec<_> = (0..200)
        .map(|i| {
            let store = store.clone();
            let mut run = new_run(&namespace, 1);
            if i % 5 == 0 {
                run.reference_id = Some(format!("order-{}", i % 4));
            }
            tokio::spawn(async move { (run.reference_id.clone(), store.create_run(run).await) })
        })
        .collect();
    let mut created = Vec::new();
    let mut holders: HashMap<String, Vec<CreateOutcome>> = HashMap::new();
    for start in starts {
        let (reference, outcome) = start.await.expect("join");
        let outcome = outcome.expect("create_run");
        match reference {
            Some(reference) => holders.entry(reference).or_default().push(outcome),
            None => {
                assert!(matches!(outcome, CreateOutcome::Created(_)), "{outcome:?}");
                created.push(outcome.run().id);
            }
        }
    }
    let spent = statements() - before;
    println!("{backend}: 200 concurrent starts in {spent} statements");
    // 36 starts found their reference id taken and read its run: one statement each.
    assert!(
        spent < 200,
        "concurrent starts share statements: {spent} statements for 200 starts"
    );
    assert_eq!(holders.len(), 4);
    for (reference, outcomes) in &holders {
        let first: Vec<_> = outcomes
            .iter()
            .filter(|outcome| matches!(outcome, CreateOutcome::Created(_)))
            .collect();
        assert_eq!(first.len(), 1, "{reference}: one start creates the run");
        let id = first[0].run().id;
        assert!(
            outcomes.iter().all(|outcome| outcome.run().id == id),
            "{reference}: every other start is answered with the run holding it"
        );
        created.push(id);
    }
    let filter = RunFilter::default().workflow(&namespace.workflow);
    let page = store
        .list_runs(ListRuns::new(filter, 500))
        .await
        .expect("list");
    assert_eq!(
        page.runs.len(),
        164,
        "every run started once, and only once"
    );
    for id in created {
        let run = store.get_run(id).await.expect("stored");
        assert_eq!(run.status, RunStatus::Queued);
    }
}

/// A start the database refuses in a batch (its run id is taken) fails alone; the starts
/// beside it are inserted: made directly, and made as operations (as a server makes them: a
/// batch in a transaction that records their answers).
async fn a_refused_start_fails_alone(store: Arc<dyn Store>) {
    for as_operations in [false, true] {
        a_refused_start_fails_alone_made(store.clone(), as_operations).await;
    }
}

/// [`a_refused_start_fails_alone`], each start in a fresh operation's scope if `as_operations`.
async fn a_refused_start_fails_alone_made(store: Arc<dyn Store>, as_operations: bool) {
    let namespace = Namespace::new(format!("refused-{}", RunId::new()), "1.0.0");
    let taken = store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create")
        .run()
        .id;
    let starts: Vec<_> = (0..40)
        .map(|i| {
            let store = store.clone();
            let mut run: NewRun = new_run(&namespace, 1);
            if i == 20 {
                run.id = taken;
            }
            tokio::spawn(async move {
                if as_operations {
                    let id = OperationId::new(format!("refused-{}", RunId::new())).expect("id");
                    operation::fresh_scope(id, store.create_run(run)).await
                } else {
                    store.create_run(run).await
                }
            })
        })
        .collect();
    for (i, start) in starts.into_iter().enumerate() {
        let outcome = start.await.expect("join");
        if i == 20 {
            assert!(
                matches!(outcome, Err(StoreError::AlreadyExists { .. })),
                "{outcome:?}"
            );
        } else {
            assert!(
                matches!(outcome, Ok(CreateOutcome::Created(_))),
                "{outcome:?}"
            );
        }
    }
}

/// Starts made as operations (as a server makes them) are batched with their answers: each
/// repeat gets its first answer, and a fresh start of an operation answered already (its
/// batch rolled back) gets that answer and starts nothing.
async fn answered_starts_share_statements(
    store: Arc<dyn Store>,
    statements: impl Fn() -> u64,
    backend: &str,
) {
    let namespace = Namespace::new(format!("answered-{}", RunId::new()), "1.0.0");
    let fresh_id = || OperationId::new(format!("op-{}", RunId::new())).expect("id");
    let answered_before = fresh_id();
    let first = operation::fresh_scope(
        answered_before.clone(),
        store.create_run(new_run(&namespace, 1)),
    )
    .await
    .expect("first start");
    // Operations 0..100 share statements; 100..120 are a batch with a start of the operation
    // answered before.
    let operations: Vec<OperationId> = (0..120)
        .map(|i| {
            if i == 110 {
                answered_before.clone()
            } else {
                fresh_id()
            }
        })
        .collect();
    let start = |i: usize, fresh: bool| {
        let store = store.clone();
        let mut run = new_run(&namespace, 1);
        if i.is_multiple_of(10) && i < 100 {
            run.reference_id = Some("shared".to_owned());
        }
        let id = operations[i].clone();
        tokio::spawn(async move {
            if fresh {
                operation::fresh_scope(id, store.create_run(run)).await
            } else {
                operation::scope(id, store.create_run(run)).await
            }
        })
    };
    let before = statements();
    let starts: Vec<_> = (0..100).map(|i| start(i, true)).collect();
    let mut answers = Vec::new();
    for handle in starts {
        answers.push(handle.await.expect("join").expect("create_run"));
    }
    let spent = statements() - before;
    println!("{backend}: 100 concurrent answered starts in {spent} statements");
    // Alone, each costs four (BEGIN, the insert, the answer, COMMIT).
    assert!(spent < 200, "{spent} statements for 100 answered starts");
    let shared: Vec<RunId> = (0..100).step_by(10).map(|i| answers[i].run().id).collect();
    assert!(shared.iter().all(|id| *id == shared[0]), "{shared:?}");

    let starts: Vec<_> = (100..120).map(|i| start(i, true)).collect();
    for handle in starts {
        answers.push(handle.await.expect("join").expect("create_run"));
    }
    assert_eq!(
        answers[110], first,
        "the operation's answer recorded before"
    );

    let repeats: Vec<_> = (0..120).map(|i| start(i, false)).collect();
    for (i, handle) in repeats.into_iter().enumerate() {
        let again = handle.await.expect("join").expect("repeat");
        assert_eq!(
            again, answers[i],
            "operation {i}: a repeat gets its first answer"
        );
    }
    let filter = RunFilter::default().workflow(&namespace.workflow);
    let page = store
        .list_runs(ListRuns::new(filter, 500))
        .await
        .expect("list");
    // The first start, one holding "shared", 90 + 19 more.
    assert_eq!(page.runs.len(), 111, "no start made twice");
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use aiki_store::sqlite::SqliteStore;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_starts_share_statements() {
        let file = support::TempFile::new();
        let store = Arc::new(SqliteStore::connect(&file.url()).await.expect("open"));
        let counted = store.clone();
        super::concurrent_starts_share_statements(store, move || counted.statements(), "sqlite")
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answered_starts_share_statements() {
        let file = support::TempFile::new();
        let store = Arc::new(SqliteStore::connect(&file.url()).await.expect("open"));
        let counted = store.clone();
        super::answered_starts_share_statements(store, move || counted.statements(), "sqlite")
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_start_fails_alone() {
        let file = support::TempFile::new();
        let store = Arc::new(SqliteStore::connect(&file.url()).await.expect("open"));
        super::a_refused_start_fails_alone(store).await;
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use aiki_store::postgres::PostgresStore;
    use support::postgres as pg;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_starts_share_statements() {
        let Some(url) = pg::shared_database().await else {
            return;
        };
        let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
        let counted = store.clone();
        super::concurrent_starts_share_statements(store, move || counted.statements(), "postgres")
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answered_starts_share_statements() {
        let Some(url) = pg::shared_database().await else {
            return;
        };
        let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
        let counted = store.clone();
        super::answered_starts_share_statements(store, move || counted.statements(), "postgres")
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_start_fails_alone() {
        let Some(url) = pg::shared_database().await else {
            return;
        };
        let store = Arc::new(PostgresStore::connect(&url).await.expect("open"));
        super::a_refused_start_fails_alone(store).await;
    }
}
