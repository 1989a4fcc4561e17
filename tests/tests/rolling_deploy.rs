//! Rolling deploys and rollbacks across an additive migration, on SQLite and PostgreSQL.
//!
//! Release N is played by this code capped at the schema before this round's operations
//! migration (`as_release_at`: it knows only the migrations up to that version and renders its
//! statements for that schema); release N+1 is this code, whose operations migration adds
//! columns it really reads and writes (the task inputs recorded with their calls, the
//! timeline's facts, pause requests). The two run side by side on one database in both
//! directions: N+1's pre-deploy check reads N's schema before the migration; after N+1
//! migrates, N's workers keep working, an N pod restarting accepts the newer schema (its
//! compatibility record admits N), and runs started by either are finished by either.

use std::sync::Arc;
use std::time::Duration;

use aiki::store::RunAction;
use aiki::store::postgres::{PostgresOptions, PostgresStore};
use aiki::store::sqlite::{SqliteOptions, SqliteStore};
use aiki::{BoxStore, Client, MigrationMode, Run, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::Backend;

#[aiki::task(name = "rolling-step")]
async fn rolling_step(input: String) -> Result<String, TaskError> {
    Ok(format!("{input}!"))
}

/// A step, a sleep (long for keys starting `slow`, so that another release may take the run
/// over while it sleeps), a step.
#[aiki::workflow(name = "rolling", version = "1")]
async fn rolling(run: &Run, key: String) -> Result<String, WorkflowError> {
    let first = RollingStep.start(run, format!("{key}/a")).await?;
    let pause = if key.starts_with("slow") { 1_500 } else { 50 };
    run.sleep("between", Duration::from_millis(pause)).await?;
    RollingStep.start(run, first).await
}

/// The schema version release N knows last (the one before the operations migration).
fn release_n(backend: Backend) -> i64 {
    match backend {
        Backend::Sqlite => 9,
        _ => 10,
    }
}

/// A store on `url` as release N (`capped`) or N+1, in `mode`; with its migration report.
async fn open(
    backend: Backend,
    url: &str,
    capped: bool,
    mode: MigrationMode,
) -> Result<(BoxStore, aiki::store::MigrationReport), aiki::StoreError> {
    let cap = release_n(backend);
    match backend {
        Backend::Sqlite => {
            let mut options = SqliteOptions::new(url).migration(mode);
            if capped {
                options = options.as_release_at(cap);
            }
            let store = SqliteStore::connect_with(options).await?;
            let report = store.migration_report().clone();
            Ok((Arc::new(store), report))
        }
        _ => {
            let mut options = PostgresOptions::new(url).migration(mode);
            if capped {
                options = options.as_release_at(cap);
            }
            let store = PostgresStore::connect_with(options).await?;
            let report = store.migration_report().clone();
            Ok((Arc::new(store), report))
        }
    }
}

fn worker(store: &BoxStore, id: &str) -> aiki::WorkerHandle {
    Worker::builder(store.clone())
        .register(Rolling)
        .task(RollingStep)
        .worker_id(id)
        .poll_interval(Duration::from_millis(10))
        .build()
        .expect("worker config")
        .start()
}

async fn start(client: &Client, key: &str) -> aiki::RunHandle<Rolling> {
    client.start::<Rolling>(key.to_owned()).await.unwrap()
}

async fn finishes(handle: &aiki::RunHandle<Rolling>, key: &str) {
    let out = tokio::time::timeout(Duration::from_secs(30), handle.result())
        .await
        .unwrap_or_else(|_| panic!("run {key} did not finish"))
        .unwrap();
    assert_eq!(out, format!("{key}/a!!"));
}

async fn releases_side_by_side(backend: Backend) {
    let url = backend.fresh_url().await;
    let n = release_n(backend);
    // Release N creates the database and runs its workflows.
    let (old, report) = open(backend, &url, true, MigrationMode::Apply)
        .await
        .unwrap();
    assert_eq!((report.version, report.release), (n, n));
    let old_client = Client::new(old.clone());
    let old_worker = worker(&old, "release-n");
    let before = start(&old_client, "before").await;
    finishes(&before, "before").await;

    // N+1's pre-deploy check runs against N's schema: it reads it, changing nothing.
    let (check, report) = open(backend, &url, false, MigrationMode::Check)
        .await
        .expect("N+1 checks against N's schema");
    assert_eq!(report.found, Some(n));
    assert!(
        report.applied.is_empty() && report.release > n,
        "{report:?}"
    );
    let history = check.load_history(before.id()).await.unwrap();
    assert_eq!(history.run.status, RunStatus::Completed);
    assert_eq!(history.entries.len(), 2);
    assert!(history.entries.iter().all(|entry| entry.input.is_none()));
    let reasons: Vec<String> = check
        .timeline(before.id())
        .await
        .unwrap()
        .into_iter()
        .map(|change| change.reason)
        .collect();
    assert_eq!(reasons.first().map(String::as_str), Some("started"));
    assert_eq!(reasons.last().map(String::as_str), Some("completed"));
    let refused = check
        .release_claim(before.id(), 0, 0, None, None)
        .await
        .expect_err("an operator's release needs N+1's schema");
    assert!(refused.to_string().contains("aiki migrate"), "{refused}");

    // A run N starts sleeps when N+1 is deployed: N+1 migrates, N's worker goes, N+1's
    // finishes the run. Its first call has no input recorded (N wrote it), its second has.
    let handover = start(&old_client, "slow-up").await;
    wait_sleeping(&old, handover.id()).await;
    let (new, report) = open(backend, &url, false, MigrationMode::Apply)
        .await
        .unwrap();
    assert_eq!(report.found, Some(n));
    let applied: Vec<&str> = report
        .applied
        .iter()
        .map(|migration| migration.description.as_str())
        .collect();
    assert_eq!(
        &applied[..2],
        ["operations", "contract"],
        "the operations and contract migrations (and PostgreSQL's index): {report:?}"
    );
    old_worker.shutdown().await;
    let new_client = Client::new(new.clone());
    let new_worker = worker(&new, "release-n+1");
    finishes(&handover, "slow-up").await;
    assert_eq!(inputs(&new, handover.id()).await, [false, true]);

    // Rollback: N+1 starts a run, sleeping when its worker goes; an N pod (restarting on the
    // migrated schema, which its compatibility record admits) finishes it.
    let rollback = start(&new_client, "slow-down").await;
    wait_sleeping(&new, rollback.id()).await;
    new_worker.shutdown().await;
    let (restarted, report) = open(backend, &url, true, MigrationMode::Apply)
        .await
        .expect("release N accepts the schema N+1 migrated");
    assert_eq!((report.release, report.applied.len()), (n, 0));
    assert!(report.version > n);
    let restarted_worker = worker(&restarted, "release-n-restarted");
    finishes(&rollback, "slow-down").await;
    assert_eq!(inputs(&new, rollback.id()).await, [true, false]);

    // Both releases side by side: runs started by either, finished by either.
    let new_worker = worker(&new, "release-n+1-again");
    let mut handles = Vec::new();
    for i in 0..6 {
        let key = format!("mixed-{i}");
        let client = if i % 2 == 0 { &old_client } else { &new_client };
        handles.push((start(client, &key).await, key));
    }
    for (handle, key) in &handles {
        finishes(handle, key).await;
        let timeline = new.timeline(handle.id()).await.unwrap();
        assert!(
            timeline.iter().all(|change| !change.reason.is_empty()),
            "N+1 words every change: {timeline:?}"
        );
    }

    new_worker.shutdown().await;
    // N reads N+1's runs, in check mode too.
    let (old_check, _) = open(backend, &url, true, MigrationMode::Check)
        .await
        .expect("release N checks against N+1's schema");
    assert_eq!(
        old_check.get_run(handles[1].0.id()).await.unwrap().status,
        RunStatus::Completed
    );
    restarted_worker.shutdown().await;
}

/// The previous release's writes on the migrated schema keep the newer records true: its
/// catalog publications reach the per-build catalog, and its runs leaving `running` drop a
/// pause request or a stale mark N+1 put on them (triggers, since N's statements do not know
/// those columns).
async fn the_previous_releases_writes_keep_the_new_records_true(backend: Backend) {
    use aiki::Workflow;
    use aiki::store::{CatalogEntry, ClaimRequest, ClaimTiming, SchemaRecord, Transition};
    let url = backend.fresh_url().await;
    let (new, _) = open(backend, &url, false, MigrationMode::Apply)
        .await
        .unwrap();
    let (old, _) = open(backend, &url, true, MigrationMode::Apply)
        .await
        .expect("release N accepts the migrated schema");
    let now = || aiki::Clock::now(&aiki::SystemClock);

    // A build only an N pod runs is in the catalog N+1 reads.
    let legacy = aiki::Namespace::new("rolling-legacy", "1");
    let schema = SchemaRecord::new(serde_json::json!({}), "any");
    old.publish_catalog(
        CatalogEntry::new(legacy.clone(), schema.clone(), schema)
            .fingerprint("build-n")
            .published_by("pod-n"),
        now(),
    )
    .await
    .unwrap();
    let catalog = new.catalog().await.unwrap();
    assert!(
        catalog
            .iter()
            .any(|entry| entry.namespace == legacy && entry.fingerprint == "build-n"),
        "{catalog:?}"
    );

    // Runs an N pod holds: N+1 asks one to pause and marks the other's claim stale; N ends
    // both.
    let client = Client::new(new.clone());
    let paused = start(&client, "pause").await;
    let stale = start(&client, "stale").await;
    let claimed = old
        .claim(ClaimRequest::new(
            "pod-n",
            vec![Rolling::namespace()],
            "default",
            2,
            now(),
        ))
        .await
        .unwrap()
        .runs;
    assert_eq!(
        claimed.len(),
        2,
        "{:?}",
        new.get_run(paused.id()).await.unwrap()
    );
    new.act(paused.id(), RunAction::Pause, Some("ops".to_owned()), now())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let lease = new
        .acquire_lease("rolling-deploy-test", "pod-n1", 600_000, now())
        .await
        .unwrap();
    let released = new
        .release_stale_claims(&lease, now(), ClaimTiming::new(600_000, 10), 100)
        .await
        .unwrap();
    assert!(
        released.is_empty(),
        "a first sweep only marks: {released:?}"
    );
    let marked = new.get_run(stale.id()).await.unwrap();
    assert!(marked.claim_stale_since.is_some(), "{marked:?}");
    assert!(
        new.get_run(paused.id())
            .await
            .unwrap()
            .pause_requested_at
            .is_some()
    );
    for run in &claimed {
        let done = Transition::to(RunStatus::Completed, now()).output(serde_json::json!("x"), "fp");
        old.transition(run.id, run.revision, done).await.unwrap();
    }
    for id in [paused.id(), stale.id()] {
        let ended = new.get_run(id).await.unwrap();
        assert_eq!(ended.status, RunStatus::Completed);
        assert_eq!(
            (ended.pause_requested_at, ended.claim_stale_since),
            (None, None),
            "an ended run keeps no pause request or stale mark"
        );
    }
}

/// Waits (real time, bounded) until the run sleeps.
async fn wait_sleeping(store: &BoxStore, id: aiki::RunId) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.get_run(id).await.unwrap().status != RunStatus::Sleeping {
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {id} never slept"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Whether each of the run's two calls has its input recorded, in call order.
async fn inputs(store: &BoxStore, id: aiki::RunId) -> Vec<bool> {
    let mut entries = store.load_history(id).await.unwrap().entries;
    entries.sort_by_key(|entry| entry.updated_at);
    entries.iter().map(|entry| entry.input.is_some()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_releases_n_and_n_plus_1_side_by_side() {
    aiki_tests::bounded(releases_side_by_side(Backend::Sqlite)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_releases_n_and_n_plus_1_side_by_side() {
    if aiki_tests::postgres_available().await {
        aiki_tests::bounded(releases_side_by_side(Backend::Postgres)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_the_previous_releases_writes_keep_the_new_records_true() {
    aiki_tests::bounded(the_previous_releases_writes_keep_the_new_records_true(
        Backend::Sqlite,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_the_previous_releases_writes_keep_the_new_records_true() {
    if aiki_tests::postgres_available().await {
        aiki_tests::bounded(the_previous_releases_writes_keep_the_new_records_true(
            Backend::Postgres,
        ))
        .await;
    }
}
