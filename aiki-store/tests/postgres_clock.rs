//! PostgreSQL's clock: by default the database server's clock, not the callers', times claims,
//! leases, sleeps and retries (`aiki_claim_clock=caller` makes the callers' clocks time them).
//! Skipped loudly without a server (failing under `CI=true`).
#![cfg(feature = "postgres")]

use crate::support;

use aiki_store::postgres::PostgresStore;
use aiki_store::prelude::*;
use aiki_store::{Namespace, RunId, RunRecord, RunStatus, SleepRecord, Transition};
use support::postgres as pg;
use support::records::{claim, entry, lease, new_run};

/// A new run, claimed at a caller's time of 2 ms since the epoch.
async fn claimed_run(store: &PostgresStore) -> RunRecord {
    let namespace = Namespace::new(format!("pg-clock-{}", RunId::new()), "1.0.0");
    store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("create");
    store
        .claim(claim(&namespace, 2))
        .await
        .expect("claim")
        .runs
        .remove(0)
}

/// Milliseconds since the epoch by this machine's clock.
fn wall_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64
}

/// By default the server's clock times claims: a caller whose clock is far off (here: stuck in
/// 1970, then an hour ahead) neither stamps its claims with its own time nor releases the
/// claims of others as stale. With `aiki_claim_clock=caller` the same calls do release them.
#[tokio::test]
async fn the_database_clock_times_claims_whatever_the_callers_say() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let claimed = claimed_run(&store).await;
    let id = claimed.id;
    let stamped = claimed.heartbeat_at.expect("a claimed run has a heartbeat");
    assert!(
        (stamped - wall_clock()).abs() < 60_000,
        "the heartbeat is the server's time ({stamped}), not the caller's (2)"
    );
    store
        .refresh_claim(id, "w", claimed.revision, 3)
        .await
        .expect("refresh");
    let refreshed = store.get_run(id).await.expect("read");
    assert!(refreshed.heartbeat_at.expect("heartbeat") >= stamped);
    let an_hour_ahead = wall_clock() + 3_600_000;
    let timing = aiki_store::ClaimTiming::new(30_000, 10_000);
    let held = lease(&store, wall_clock()).await;
    for _ in 0..2 {
        assert_eq!(
            store
                .release_stale_claims(&held, an_hour_ahead, timing, 100)
                .await
                .expect("sweep"),
            Vec::<RunId>::new(),
            "a caller an hour ahead does not release (or mark) a claim refreshed a moment ago"
        );
    }
    assert_eq!(
        store.get_run(id).await.expect("read").claim_stale_since,
        None
    );
    assert_eq!(
        store.get_run(id).await.expect("read").status,
        RunStatus::Running
    );

    let callers = PostgresStore::connect(&format!("{url}?aiki_claim_clock=caller"))
        .await
        .expect("open");
    let held = lease(&callers, an_hour_ahead).await;
    callers
        .release_stale_claims(&held, an_hour_ahead, timing, 100)
        .await
        .expect("mark");
    assert_eq!(
        callers
            .release_stale_claims(&held, an_hour_ahead + timing.confirm_ms, timing, 100)
            .await
            .expect("sweep"),
        vec![id],
        "by the caller's clock the same claim is an hour old"
    );
    store.close().await;
    callers.close().await;
    pg::drop_database(&url).await;
}

/// By default the server's clock times sleeps and retries too: a sleep counted from a
/// caller's time an hour off ends its duration after the database's time, and so does a
/// task's or a workflow's retry delay; a sleep counted from a recorded end is stored as given.
/// With `aiki_claim_clock=caller` the caller's time is the store's.
#[tokio::test]
async fn the_database_clock_times_sleeps_and_retries_whatever_the_callers_say() {
    let Some(url) = pg::create_database().await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.expect("open");
    let callers = PostgresStore::connect(&format!("{url}?aiki_claim_clock=caller"))
        .await
        .expect("open");
    let run = claimed_run(&store).await;
    for skew in [3_600_000, -3_600_000] {
        let caller = wall_clock() + skew;
        let before = wall_clock();
        let nap = SleepRecord::new(run.id, format!("nap{skew}"), 0, 5_000, caller + 5_000);
        let stored = store
            .put_sleep(run.revision, nap, Some(caller))
            .await
            .expect("put_sleep");
        assert!(
            (stored.wake_at - (before + 5_000)).abs() < 60_000,
            "the sleep ends 5 s after the database's time, not the caller's ({skew} ms off): \
             {} ms off",
            stored.wake_at - (before + 5_000)
        );
    }
    let recorded_end = wall_clock() + 36_000_000;
    let longer = SleepRecord::new(run.id, "longer", 0, 10_000, recorded_end);
    let stored = store
        .put_sleep(run.revision, longer.clone(), None)
        .await
        .expect("put_sleep");
    assert_eq!(
        stored, longer,
        "counted from a recorded end, it is stored as given"
    );
    let caller = wall_clock() + 3_600_000;
    let before = wall_clock();
    let mut failed = entry(run.id, "charge:aa");
    failed.status = aiki_store::EntryStatus::AwaitingRetry;
    failed.output = None;
    failed.fingerprint = None;
    failed.updated_at = caller;
    failed.retry_at = Some(caller + 5_000);
    store
        .put_entry(run.revision, failed)
        .await
        .expect("put_entry");
    let history = store.load_history(run.id).await.expect("history");
    let retry_at = history.entries[0].retry_at.expect("a retry time");
    assert!(
        (retry_at - (before + 5_000)).abs() < 60_000,
        "the retry is due 5 s after the database's time, not the caller's: {} ms off",
        retry_at - (before + 5_000)
    );
    let before = wall_clock();
    let retry = Transition::to(RunStatus::AwaitingRetry, caller).due_at(caller + 5_000);
    let waiting = store
        .transition(run.id, run.revision, retry)
        .await
        .expect("a workflow retry");
    let due = waiting.due_at.expect("due");
    assert!(
        (due - (before + 5_000)).abs() < 60_000,
        "the workflow retry is due 5 s after the database's time: {} ms off",
        due - (before + 5_000)
    );
    let caller = wall_clock() + 3_600_000;
    let nap = SleepRecord::new(run.id, "caller", 0, 5_000, caller + 5_000);
    let stored = callers
        .put_sleep(waiting.revision, nap.clone(), Some(caller))
        .await
        .expect("put_sleep");
    assert_eq!(
        stored, nap,
        "timed by its callers, the store keeps the caller's time"
    );
    store.close().await;
    callers.close().await;
    pg::drop_database(&url).await;
}
