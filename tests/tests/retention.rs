//! Retention of bookkeeping: every process start adds a worker row; the daemons forget the
//! rows of workers not seen for longer than the retention, and keep the others.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

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

on_every_backend!(the_rows_of_workers_long_gone_are_pruned);
