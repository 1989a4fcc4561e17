//! Runs in flight before an upgrade finish after it: each committed fixture (a SQLite file and a
//! PostgreSQL dump written by an earlier release, see `aiki_tests::upgrade`) is opened with this
//! release, which migrates it, and every run it holds completes, no recorded task running again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use aiki::{Client, ManualClock, RunStatus, Worker};
use aiki_tests::Executions;
use aiki_tests::upgrade::{
    Fixture, FixtureChild, FixtureFlaky, FixtureGo, FixtureStep, RUNS, TIMERS, WRITTEN_AT,
    expected_output,
};

/// Every release's fixtures, oldest first.
const RELEASES: &[&str] = &["v0.1.0"];

fn fixture(release: &str, file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(release)
        .join(file)
}

/// Upgrades the store at `url` by opening it, then finishes every run it holds.
async fn finish_every_run(url: &str, release: &str) {
    let store = aiki::store::connect(url)
        .await
        .expect("the fixture opens and migrates");
    let clock = ManualClock::new(WRITTEN_AT + 1_000);
    let client = Client::new(store.clone())
        .with_clock(clock.clone())
        .with_poll_interval(Duration::from_millis(5));
    let executions = Executions::default();
    let worker = Worker::builder(store.clone())
        .register(Fixture)
        .register(FixtureChild)
        .task(FixtureStep)
        .task(FixtureFlaky)
        .state(executions.clone())
        .clock(clock.clone())
        .poll_interval(Duration::from_millis(5))
        .build()
        .expect("worker config")
        .start();
    let mut runs = Vec::new();
    for (input, status) in RUNS {
        let handle = client
            .start::<Fixture>(input.to_owned())
            .reference_id(input)
            .await
            .expect("the fixture's run is found by its reference id");
        let record = handle.record().await.unwrap();
        assert!(
            record.created_at <= WRITTEN_AT + 1_000 && record.attempts >= 1,
            "{release}: `{input}` is the fixture's run, not a new one: {record:?}"
        );
        if input != "queued" {
            assert_eq!(
                record.status.as_str(),
                status,
                "{release}: `{input}` as written"
            );
        }
        runs.push((input, handle));
    }
    let (_, event_run) = runs.iter().find(|(input, _)| *input == "event").unwrap();
    event_run.send::<FixtureGo>("sent".into()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    clock.advance(TIMERS);
    for (input, handle) in &runs {
        let output = tokio::time::timeout(Duration::from_secs(30), handle.result())
            .await
            .unwrap_or_else(|_| panic!("{release}: `{input}` did not finish"))
            .unwrap_or_else(|error| panic!("{release}: `{input}` failed: {error}"));
        assert_eq!(output, expected_output(input), "{release}: `{input}`");
        assert_eq!(
            handle.status().await.unwrap(),
            RunStatus::Completed,
            "{release}: `{input}`"
        );
    }
    // The first step of each suspended run was recorded before the upgrade: only their second
    // steps run, and both of the queued run's; the flaky task's second attempt runs once.
    assert_eq!(executions.count("fixture-step"), 6, "{release}");
    assert_eq!(executions.count("fixture-flaky"), 1, "{release}");
    worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fixtures_upgrade_and_every_run_completes() {
    for release in RELEASES {
        let copy = std::env::temp_dir().join(format!("aiki-upgrade-{}.db", uuid::Uuid::new_v4()));
        std::fs::copy(fixture(release, "sqlite.db"), &copy).expect("copy the fixture");
        aiki_tests::bounded(finish_every_run(
            &format!("sqlite://{}", copy.display()),
            release,
        ))
        .await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", copy.display()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fixtures_upgrade_and_every_run_completes() {
    use sqlx::Connection;
    if !aiki_tests::postgres_available().await {
        return;
    }
    let server = aiki_tests::postgres_url();
    for release in RELEASES {
        let database = format!("aiki_upgrade_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(&server).await.unwrap();
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&mut admin)
            .await
            .unwrap();
        let (base, _) = server.rsplit_once('/').unwrap();
        let url = format!("{base}/{database}");
        // The dump is plain SQL (`pg_dump --inserts`); its psql meta-commands are dropped.
        let dump = std::fs::read_to_string(fixture(release, "postgres.sql")).unwrap();
        let script: String = dump
            .lines()
            .filter(|line| !line.starts_with('\\'))
            .map(|line| format!("{line}\n"))
            .collect();
        {
            let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
            sqlx::raw_sql(&script)
                .execute(&mut connection)
                .await
                .expect("the dump loads");
        }
        // The runs are driven by a manual clock: claims are timed by it too, not by the
        // server's (whose time the worker would otherwise follow).
        let driven = aiki_tests::caller_claim_clock(&url);
        aiki_tests::bounded(finish_every_run(&driven, release)).await;
        // v0.1.0 kept its tables in `public`; they now live in Aiki's own schema.
        let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
        let located: Vec<(String, String)> = sqlx::query_as(
            "SELECT schemaname::text, tablename::text FROM pg_tables \
             WHERE tablename LIKE 'aiki%' OR tablename = '_sqlx_migrations' ORDER BY 1, 2",
        )
        .fetch_all(&mut connection)
        .await
        .unwrap();
        assert!(
            located.iter().all(|(schema, _)| schema == "aiki"),
            "{release}: {located:?}"
        );
        let names: Vec<&str> = located.iter().map(|(_, table)| table.as_str()).collect();
        assert_eq!(
            names,
            [
                "_sqlx_migrations",
                "aiki_api_keys",
                "aiki_catalog",
                "aiki_catalog_builds",
                "aiki_catalog_tasks",
                "aiki_compat",
                "aiki_config",
                "aiki_endpoints",
                "aiki_entries",
                "aiki_events",
                "aiki_leases",
                "aiki_operation_answers",
                "aiki_runs",
                "aiki_schedule_log",
                "aiki_schedules",
                "aiki_sleeps",
                "aiki_timeline",
                "aiki_waits",
                "aiki_workers"
            ],
            "{release}: Aiki's tables and the bookkeeping, nothing left behind"
        );
        let _ = connection.close().await;
        sqlx::query(&format!("DROP DATABASE {database} WITH (FORCE)"))
            .execute(&mut admin)
            .await
            .unwrap();
    }
}
