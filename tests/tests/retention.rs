//! Retention of bookkeeping: every process start adds a worker row; the daemons forget the
//! rows of workers not seen for longer than the retention, and keep the others.

use std::time::Duration;

use aiki::store::WorkerRecord;
use aiki::{Clock, Run, WorkflowError};
use aiki_tests::{Backend, Harness, PATIENCE, on_every_backend};

const DAY: i64 = 24 * 3600 * 1000;

#[aiki::workflow(name = "retention-noop", version = "1")]
async fn noop(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

async fn the_rows_of_workers_long_gone_are_pruned(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let now = h.clock.now();
    for (id, seen) in [
        ("gone-8-days", now - 8 * DAY),
        ("gone-4-days", now - 4 * DAY),
        ("gone-2-days", now - 2 * DAY),
    ] {
        h.store
            .record_worker(
                WorkerRecord::new(id, "host", 1, Vec::new(), "default", seen),
                seen,
            )
            .await
            .unwrap();
    }
    // The store's retention (its runtime configuration), shorter than the default 7 days.
    h.client
        .set_config(aiki::ConfigKey::WorkerRetention, 3 * DAY)
        .await
        .unwrap();
    h.deploy(|w| w.register(Noop)).await;
    let ids = || async {
        h.store
            .list_workers(h.clock.now(), 365 * DAY)
            .await
            .unwrap()
            .into_iter()
            .map(|worker| worker.id)
            .collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // The live worker's first heartbeat may land after the daemons' first pass: wait for it,
    // so that the pass after it is the one that must keep it.
    while !ids().await.iter().any(|id| id.starts_with("worker-")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the live worker never listed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while ids()
        .await
        .iter()
        .any(|id| id == "gone-8-days" || id == "gone-4-days")
    {
        assert!(tokio::time::Instant::now() < deadline, "never pruned");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left = ids().await;
    assert!(left.iter().any(|id| id == "gone-2-days"), "{left:?}");
    assert!(
        left.iter().any(|id| id.starts_with("worker-")),
        "the live one: {left:?}"
    );
}

/// With a run retention set, the daemons purge ended runs once they are older than it, with
/// their history; runs not ended stay, whatever their age.
async fn ended_runs_past_their_retention_are_purged(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.client
        .set_config(aiki::ConfigKey::RunRetention, 2 * HOUR)
        .await
        .unwrap();
    h.deploy(|w| w.register(Noop).register(Waits)).await;
    let done = h.client.start::<Noop>(aiki::NoInput).await.unwrap();
    h.reach(&done, aiki::RunStatus::Completed).await;
    let waiting = h.client.start::<Waits>(aiki::NoInput).await.unwrap();
    h.reach(&waiting, aiki::RunStatus::AwaitingEvent).await;
    // An hour on: younger than the retention, kept.
    h.clock.advance(Duration::from_millis(HOUR as u64));
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.store.get_run(done.id()).await.expect("kept for now");
    h.clock.advance(Duration::from_millis(2 * HOUR as u64));
    purged(&h, done.id()).await;
    assert!(matches!(
        h.store.load_history(done.id()).await,
        Err(aiki::StoreError::NotFound { .. })
    ));
    let waiting = h
        .store
        .get_run(waiting.id())
        .await
        .expect("not ended: kept");
    assert_eq!(waiting.status, aiki::RunStatus::AwaitingEvent);
}

const HOUR: i64 = 3_600_000;

/// Waits until the daemons have purged run `id`.
async fn purged(h: &Harness, id: aiki::RunId) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match h.store.get_run(id).await {
            Err(aiki::StoreError::NotFound { .. }) => return,
            Ok(_) => {}
            Err(error) => panic!("{error}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "never purged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[aiki::workflow(name = "retention-waits", version = "1", events(never = bool))]
async fn waits(run: &Run) -> Result<(), WorkflowError> {
    run.events().never().wait().await?;
    Ok(())
}

/// A retention below an hour is refused unless asked for explicitly; asked for (a trial), the
/// daemons purge an ended run a minute after it ended, not an hour.
async fn a_short_retention_asked_for_explicitly_purges_within_minutes(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let refused = h
        .client
        .set_config(aiki::ConfigKey::RunRetention, MINUTE)
        .await
        .expect_err("below an hour, unless asked for");
    assert!(
        refused.to_string().contains("--allow-short-retention"),
        "{refused}"
    );
    let set = h.client.set_short_retention(MINUTE).await.unwrap();
    assert_eq!(set.run_retention_ms, MINUTE);
    h.deploy(|w| w.register(Noop)).await;
    let done = h.client.start::<Noop>(aiki::NoInput).await.unwrap();
    h.reach(&done, aiki::RunStatus::Completed).await;
    // Half a minute on: younger than the retention, kept.
    h.clock.advance(Duration::from_millis(MINUTE as u64 / 2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.store.get_run(done.id()).await.expect("kept for now");
    // Two minutes on (the purge runs a batch a minute): gone.
    h.clock.advance(Duration::from_millis(2 * MINUTE as u64));
    purged(&h, done.id()).await;
}

const MINUTE: i64 = 60_000;

on_every_backend!(
    the_rows_of_workers_long_gone_are_pruned,
    ended_runs_past_their_retention_are_purged,
    a_short_retention_asked_for_explicitly_purges_within_minutes
);
