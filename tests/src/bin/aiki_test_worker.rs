//! A worker process for the crash tests: serves the workflows of `aiki_tests::crash` on the
//! store named by `AIKI_WORKER_STORE_URL`, and appends one line per task execution to the file
//! named by `AIKI_SIDE_EFFECTS` (a side effect that survives the process, to count executions).
//!
//! Claims are refreshed every 200 ms and released after 1 s without refresh. SIGTERM (or
//! Ctrl-C) shuts the worker down gracefully; the tests also `kill -9` and `SIGSTOP` it.

use std::time::Duration;

use aiki::Worker;
use aiki_tests::crash::{Env, FiveSteps, Long, LongOnce};

fn var(name: &str) -> anyhow::Result<String> {
    std::env::var(name).map_err(|_| anyhow::anyhow!("set {name}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = var("AIKI_WORKER_STORE_URL")?;
    let worker_id = var("AIKI_WORKER_ID")?;
    let env = Env {
        side_effects: var("AIKI_SIDE_EFFECTS")?.into(),
        worker: worker_id.clone(),
        long_task: Duration::from_millis(
            std::env::var("AIKI_LONG_TASK_MS").map_or(Ok(2000), |ms| ms.parse())?,
        ),
    };
    // The store may be restarting: keep trying, as a deployed worker would.
    let store = loop {
        match aiki::connect(&url).await {
            Ok(store) => break store,
            Err(error) => {
                eprintln!("{worker_id}: store not ready ({error}); retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let worker = Worker::builder(store)
        .register(FiveSteps)
        .register(Long)
        .register(LongOnce)
        .state(env)
        .worker_id(worker_id.clone())
        .max_concurrent_runs(64)
        .poll_interval(Duration::from_millis(20))
        .claim_refresh_interval(Duration::from_millis(200))
        .claim_idle_timeout(Duration::from_secs(1))
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
