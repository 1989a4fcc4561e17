//! A worker process for the crash tests: serves the workflows of `aiki_tests::crash` on the
//! store named by `AIKI_WORKER_STORE_URL`, and appends one line per task execution to the file
//! named by `AIKI_SIDE_EFFECTS` (a side effect that survives the process, to count executions).
//! With `AIKI_SOAK_SIDE_TABLE_URL` it serves the chaos soak's workflow (`aiki_tests::soak`)
//! too, whose handlers log their starts to that database; either variable, or both.
//!
//! Claims are refreshed every 200 ms and released after 1 s without refresh, unless
//! `AIKI_CLAIM_REFRESH_MS` and `AIKI_CLAIM_IDLE_MS` say otherwise: the idle timeout is the
//! store's runtime configuration, which the process sets as it starts (as an operator would,
//! every process of a test setting the same); `AIKI_WORKER_POOL` names
//! its pool (`default`), `AIKI_POLL_MS` its poll interval (20 ms; on PostgreSQL the safety net
//! beside the ready hints); with `AIKI_REDIS_URL` it hears of work through Redis, polling the
//! store every `AIKI_POLL_MS` (5 s) as the safety net; with `AIKI_SUBSCRIBER=poll` it only polls,
//! ready hints or not. SIGTERM (or Ctrl-C) shuts the worker down gracefully; the tests also
//! `kill -9` and `SIGSTOP` it. With an `http://` URL it is a remote worker: the executor role
//! through that aiki server (key in `AIKI_API_KEY`, claims long-polling), no daemons.
//! `AIKI_SET_CONFIG=0` sets no claim idle timeout (a worker the tests expect to fail its claims).

use std::time::Duration;

use aiki::{Worker, WorkerStore};
use aiki_tests::crash::{Env, FiveSteps, Long, LongOnce, TwoSteps, WithChildren};
use aiki_tests::soak::{SideTable, Soak, SoakEnv, SoakStep};

fn var(name: &str) -> anyhow::Result<String> {
    std::env::var(name).map_err(|_| anyhow::anyhow!("set {name}"))
}

/// A duration in ms from the environment, or the default.
fn millis(name: &str, default: u64) -> anyhow::Result<Duration> {
    Ok(Duration::from_millis(
        std::env::var(name).map_or(Ok(default), |ms| ms.parse())?,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    aiki_tests::log_from_env();
    let url = var("AIKI_WORKER_STORE_URL")?;
    let worker_id = var("AIKI_WORKER_ID")?;
    let crash = std::env::var("AIKI_SIDE_EFFECTS").ok();
    let soak = std::env::var("AIKI_SOAK_SIDE_TABLE_URL").ok();
    anyhow::ensure!(
        crash.is_some() || soak.is_some(),
        "set AIKI_SIDE_EFFECTS (the crash tests) or AIKI_SOAK_SIDE_TABLE_URL (the soak)"
    );
    let (store, client) = if url.starts_with("http://") {
        let store = aiki::store::http::HttpStore::new(&url)?
            .with_key(var("AIKI_API_KEY")?)
            .long_poll(Duration::from_secs(2));
        let store = std::sync::Arc::new(store);
        (
            WorkerStore::executor(store.clone()),
            aiki::Client::new(store),
        )
    } else {
        // The store may be restarting: keep trying, as a deployed worker would.
        let store = loop {
            match aiki::store::connect(&url).await {
                Ok(store) => break store,
                Err(error) => {
                    eprintln!("{worker_id}: store not ready ({error}); retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        (WorkerStore::from(store.clone()), aiki::Client::new(store))
    };
    let idle = i64::try_from(millis("AIKI_CLAIM_IDLE_MS", 1000)?.as_millis())?;
    // The store may go away again (an outage test): keep trying, as for the connection.
    // `AIKI_SET_CONFIG=0` leaves it as it is (a worker that is to fail its claims).
    let set_config = std::env::var("AIKI_SET_CONFIG").as_deref() != Ok("0");
    if set_config {
        loop {
            match client
                .set_config(aiki::ConfigKey::ClaimIdleTimeout, idle)
                .await
            {
                Ok(_) => break,
                Err(aiki::ClientError::Store(aiki::StoreError::Unavailable { .. })) => {
                    eprintln!("{worker_id}: store not ready to configure; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    let mut builder = Worker::builder(store);
    if let Some(side_effects) = crash {
        builder = builder
            .register(FiveSteps)
            .register(Long)
            .register(LongOnce)
            .register(TwoSteps)
            .register(WithChildren)
            .state(Env {
                side_effects: side_effects.into(),
                worker: worker_id.clone(),
                long_task: Duration::from_millis(
                    std::env::var("AIKI_LONG_TASK_MS").map_or(Ok(2000), |ms| ms.parse())?,
                ),
            });
    }
    if let Some(url) = soak {
        builder = builder.register(Soak).task(SoakStep).state(SoakEnv {
            side_table: SideTable::connect(&url)?,
            worker: worker_id.clone(),
            work: Duration::from_millis(
                std::env::var("AIKI_SOAK_TASK_MS").map_or(Ok(100), |ms| ms.parse())?,
            ),
        });
    }
    if let Ok(redis) = std::env::var("AIKI_REDIS_URL") {
        builder = builder.subscriber(
            aiki::redis::RedisSubscriber::new(&redis)?.safety_poll(millis("AIKI_POLL_MS", 5000)?),
        );
    } else if std::env::var("AIKI_SUBSCRIBER").as_deref() == Ok("poll") {
        builder = builder.subscriber(aiki::PollingSubscriber::new(millis("AIKI_POLL_MS", 20)?));
    }
    let worker = builder
        .worker_id(worker_id.clone())
        .pool(std::env::var("AIKI_WORKER_POOL").unwrap_or_else(|_| "default".to_owned()))
        .max_concurrent_runs(64)
        .poll_interval(millis("AIKI_POLL_MS", 20)?)
        .claim_refresh_interval(millis("AIKI_CLAIM_REFRESH_MS", 200)?)
        .build()?
        .start();
    println!("{worker_id} ready");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    worker.shutdown().await;
    Ok(())
}
