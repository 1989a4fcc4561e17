//! The store's runtime configuration as workers and operators meet it: a worker whose claim
//! refresh interval does not fit the store's claim idle timeout claims nothing until an
//! operator changes the timeout to fit, and an operator cannot lower the timeout below what a
//! live worker needs unless forced.

use std::time::Duration;

use aiki::{Client, ClientError, ConfigKey, Run, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::{Backend, PATIENCE, on_every_backend};

#[aiki::task(name = "config-step")]
async fn config_step(n: u64) -> Result<u64, TaskError> {
    Ok(n + 1)
}

#[aiki::workflow(name = "config-flow", version = "1")]
async fn config_flow(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    ConfigStep.start(run, n).await
}

async fn a_worker_that_does_not_fit_waits_for_a_configuration_that_does(backend: Backend) {
    let store = backend.open().await;
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(5));
    // 45 s refreshes under the default 90 s timeout: not below half of it.
    let worker = Worker::builder(store.clone())
        .register(ConfigFlow)
        .poll_interval(Duration::from_millis(5))
        .claim_refresh_interval(Duration::from_secs(45))
        .build()
        .unwrap();
    assert!(matches!(worker.verify().await, Err(ClientError::Config(_))));
    let worker = worker.start();
    let run = client.start::<ConfigFlow>(1).await.unwrap();
    // Long enough for a worker that ignored the refusal to claim the run many times over.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(run.status().await.unwrap(), RunStatus::Queued);
    let changed_at = aiki::Clock::now(&aiki::SystemClock);
    let config = client
        .set_config(ConfigKey::ClaimIdleTimeout, 100_000)
        .await
        .expect("no live worker refreshes too slowly for it (the waiting one has not started)");
    assert_eq!(config.claim_idle_timeout_ms, 100_000);
    // The worker checks again every 5 s, then starts and runs what waited.
    let done = tokio::time::timeout(PATIENCE, run.result())
        .await
        .expect("the worker starts once the timeout fits")
        .unwrap();
    assert_eq!(done, 2);
    let claimed = client
        .store()
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .find(|change| change.to == RunStatus::Running)
        .expect("claimed");
    assert!(
        claimed.at >= changed_at,
        "claimed at {} before the configuration fit at {changed_at}",
        claimed.at
    );
    worker.shutdown().await;
}

async fn lowering_the_idle_timeout_below_a_live_workers_needs_is_refused(backend: Backend) {
    let store = backend.open().await;
    let client = Client::new(store.clone());
    let worker = Worker::builder(store.clone())
        .register(ConfigFlow)
        .worker_id("refreshes-every-second")
        .claim_refresh_interval(Duration::from_secs(1))
        .build()
        .unwrap()
        .start();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while client
        .live_workers(Duration::from_secs(60))
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker never beat"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    match client.set_config(ConfigKey::ClaimIdleTimeout, 2_000).await {
        Err(ClientError::Config(message)) => assert!(
            message.contains("refreshes-every-second (refreshes every 1000 ms)"),
            "{message}"
        ),
        other => panic!("a 2 s timeout under 1 s refreshes is refused: {other:?}"),
    }
    assert_eq!(
        client.runtime_config().await.unwrap().claim_idle_timeout_ms,
        90_000,
        "a refused change writes nothing"
    );
    let fits = client
        .set_config(ConfigKey::ClaimIdleTimeout, 2_001)
        .await
        .expect("above twice the refresh interval");
    assert_eq!(fits.claim_idle_timeout_ms, 2_001);
    let forced = client
        .force_config(ConfigKey::ClaimIdleTimeout, 1_500)
        .await
        .expect("forced");
    assert_eq!(forced.claim_idle_timeout_ms, 1_500);
    worker.shutdown().await;
}

on_every_backend!(
    a_worker_that_does_not_fit_waits_for_a_configuration_that_does,
    lowering_the_idle_timeout_below_a_live_workers_needs_is_refused,
);
