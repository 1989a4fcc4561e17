//! Ready hints between processes on PostgreSQL: a worker process whose safety poll is 60 s
//! claims a run started by another process within moments (the start's `NOTIFY`), and still
//! finds a run started while its listening connection was killed (the listener comes back and
//! looks at everything), long before its poll would have. The other process is this test,
//! which is not a worker: its own in-process wake-up reaches no worker.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::time::{Duration, Instant};

use aiki::RunStatus;
use aiki_tests::Backend;
use aiki_tests::crash::FiveSteps;
use aiki_tests::processes::wait_for;

// The world of the process tests; this test uses part of it.
#[allow(dead_code)]
#[path = "processes/world.rs"]
mod world;

use world::World;

#[allow(dead_code)]
const PATIENCE: Duration = Duration::from_secs(120);

/// Far beyond every latency asserted here: a run found only by the poll fails the test.
const SAFETY_POLL_MS: &str = "60000";

/// The pids of the backends listening on `schema`'s channel.
async fn listeners(schema: &str) -> Vec<i32> {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&aiki_tests::postgres_url())
        .await
        .expect("PostgreSQL answers");
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'aiki listener' \
         AND query = $1",
    )
    .bind(format!("LISTEN \"aiki_ready_{schema}\""))
    .fetch_all(&mut admin)
    .await
    .expect("pg_stat_activity")
}

async fn terminate(pids: &[i32]) {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&aiki_tests::postgres_url())
        .await
        .expect("PostgreSQL answers");
    for pid in pids {
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .execute(&mut admin)
            .await
            .expect("terminate");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_claims_at_a_hint_and_after_its_listener_is_killed() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    let mut world = World::new(Backend::Postgres).await;
    let schema = world
        .url
        .split("aiki_schema=")
        .nth(1)
        .expect("a fresh schema")
        .to_owned();
    world.spawn_with(
        "worker-a",
        Duration::from_millis(200),
        &[("AIKI_POLL_MS", SAFETY_POLL_MS)],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while listeners(&schema).await.is_empty() {
        assert!(Instant::now() < deadline, "the worker never listened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the worker's first claim pass find nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let run = world
        .client
        .start::<FiveSteps>("hinted".into())
        .await
        .unwrap();
    let started = Instant::now();
    wait_for(&run, RunStatus::Completed).await;
    let hinted = started.elapsed();
    println!("ready hints: a start in another process -> completed in {hinted:?} (poll 60 s)");
    assert!(hinted < Duration::from_secs(10), "{hinted:?}");

    for round in 0..2 {
        let pids = listeners(&schema).await;
        assert_eq!(
            pids.len(),
            1,
            "round {round}: one listener in the worker process"
        );
        terminate(&pids).await;
        // Started while the listener is down or reconnecting: its hint may be lost.
        let run = world
            .client
            .start::<FiveSteps>(format!("after-kill-{round}"))
            .await
            .unwrap();
        let started = Instant::now();
        wait_for(&run, RunStatus::Completed).await;
        let recovered = started.elapsed();
        println!("ready hints: listener killed, a start -> completed in {recovered:?} (poll 60 s)");
        assert!(
            recovered < Duration::from_secs(10),
            "round {round}: {recovered:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while listeners(&schema).await.is_empty() {
            assert!(Instant::now() < deadline, "the listener never came back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // Three runs of five steps, each step run once.
    assert_eq!(world.count_prefix("step "), 15);
}
