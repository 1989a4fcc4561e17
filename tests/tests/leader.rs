//! The daemons' lease across real processes on PostgreSQL (claims and leases timed by the
//! server's clock): a leader frozen with `SIGSTOP` past its lease is replaced by another worker
//! process, and when it is thawed it neither takes the lease back nor sweeps under its old
//! token (the token check in every sweep is the conformance suite's
//! `check_a_lapsed_leases_sweeps_do_nothing`); the daemons keep working under the new leader.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use aiki::{Client, RunStatus};
use aiki_tests::Backend;
use aiki_tests::crash::Long;
use aiki_tests::processes::WorkerProcesses;
use sqlx::Connection;

fn worker(url: &str, effects: &PathBuf, id: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_aiki_test_worker"));
    command
        .env("AIKI_WORKER_STORE_URL", url)
        .env("AIKI_SIDE_EFFECTS", effects)
        .env("AIKI_WORKER_ID", id)
        .env("AIKI_LONG_TASK_MS", "10");
    command
}

/// The daemons' lease as stored: `(holder, token)`.
async fn lease(url: &str) -> Option<(String, i64)> {
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_as("SELECT holder, token FROM aiki_leases WHERE name = 'daemons'")
        .fetch_optional(&mut connection)
        .await
        .unwrap()
}

/// Waits (real time, bounded) until `holder` holds the daemons' lease.
async fn held_by(url: &str, holder: &str, within: Duration) -> (String, i64) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let current = lease(url).await;
        if let Some(current) = current.as_ref().filter(|(h, _)| h == holder) {
            return current.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{holder} never took the lease ({current:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_leader_is_replaced_and_sweeps_nothing_when_thawed() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    let url = Backend::Postgres.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let effects = std::env::temp_dir().join(format!("aiki-leader-{}", uuid::Uuid::new_v4()));
    let mut workers = WorkerProcesses::default();
    let a = workers.spawn(worker(&url, &effects, "leader-a"));
    let first = held_by(&url, "leader-a", Duration::from_secs(30)).await;
    workers.signal(a, "STOP");
    workers.spawn(worker(&url, &effects, "leader-b"));
    // The lease lasts 5 s; b asks at least every third of it.
    let second = held_by(&url, "leader-b", Duration::from_secs(40)).await;
    assert!(
        second.1 > first.1,
        "a new token: {second:?} after {first:?}"
    );
    workers.signal(a, "CONT");
    // The thawed leader renews within a third of the lease and finds b's.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(lease(&url).await, Some(second.clone()), "b kept the lease");
    // The daemons work under b: a start scheduled a second ahead is queued by its sweeps.
    let client = Client::new(store.clone());
    let at = aiki::Clock::now(&aiki::SystemClock) + 1_000;
    let run = client
        .start::<Long>("scheduled".to_owned())
        .start_at(at)
        .await
        .unwrap();
    let done = run
        .wait_for_status_timeout(RunStatus::Completed, Duration::from_secs(60))
        .await
        .expect("the run completes");
    assert!(done.error.is_none(), "{done:?}");
    assert_eq!(lease(&url).await, Some(second), "b still leads");
    let _ = std::fs::remove_file(&effects);
}
