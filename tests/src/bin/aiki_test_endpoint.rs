//! A push endpoint process for the push tests: receives an aiki server's signed deliveries on
//! `AIKI_ENDPOINT_LISTEN` (default `127.0.0.1:0`) and executes the workflows of
//! `aiki_tests::crash` on the store named by `AIKI_ENDPOINT_STORE_URL`, appending one line per
//! task execution to `AIKI_SIDE_EFFECTS`. Its secrets are `AIKI_ENDPOINT_SECRETS`
//! (comma-separated), its execution budget `AIKI_ENDPOINT_BUDGET_MS` (60 s), its claim refresh
//! `AIKI_CLAIM_REFRESH_MS` (200 ms); `AIKI_CLAIM_IDLE_MS` (1 s) is set as the store's claim idle
//! timeout, as the worker processes do; long steps take `AIKI_LONG_TASK_MS` (2 s). Prints
//! `listening on http://ADDRESS` once it serves; the tests `kill -9` and `SIGSTOP` it.

use std::time::Duration;

use aiki::endpoint::Endpoint;
use aiki_tests::crash::{Env, FiveSteps, Long, LongOnce, ManyLong};

fn var(name: &str) -> anyhow::Result<String> {
    std::env::var(name).map_err(|_| anyhow::anyhow!("set {name}"))
}

fn millis(name: &str, default: u64) -> anyhow::Result<Duration> {
    Ok(Duration::from_millis(
        std::env::var(name).map_or(Ok(default), |ms| ms.parse())?,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = var("AIKI_ENDPOINT_STORE_URL")?;
    let id = var("AIKI_WORKER_ID")?;
    let store = aiki::store::connect(&url).await?;
    let idle = i64::try_from(millis("AIKI_CLAIM_IDLE_MS", 1000)?.as_millis())?;
    aiki::Client::new(store.clone())
        .set_config(aiki::ConfigKey::ClaimIdleTimeout, idle)
        .await?;
    let registry = aiki::Registry::builder()
        .register(FiveSteps)
        .register(Long)
        .register(LongOnce)
        .register(ManyLong)
        .state(Env {
            side_effects: var("AIKI_SIDE_EFFECTS")?.into(),
            worker: id.clone(),
            long_task: millis("AIKI_LONG_TASK_MS", 2000)?,
        })
        .build()?;
    let mut endpoint = Endpoint::builder(store, registry)
        .id(id.clone())
        .budget(millis("AIKI_ENDPOINT_BUDGET_MS", 60_000)?)
        .claim_refresh_interval(millis("AIKI_CLAIM_REFRESH_MS", 200)?);
    for secret in var("AIKI_ENDPOINT_SECRETS")?.split(',') {
        endpoint = endpoint.secret(secret);
    }
    let app = endpoint.build()?.router();
    let listen = std::env::var("AIKI_ENDPOINT_LISTEN").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    // The address of an endpoint just killed may take a moment to be free again.
    let listener = loop {
        match tokio::net::TcpListener::bind(&listen).await {
            Ok(listener) => break listener,
            Err(error) => {
                eprintln!("cannot listen on {listen} yet ({error}); retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
