//! `--wake`: how soon a worker in another process hears of work. One worker process with the
//! default settings except how it discovers work: `poll` (a `PollingSubscriber` every 50 ms,
//! the default before ready hints), `hints` (the default: on PostgreSQL the `NOTIFY` hints
//! with a 5 s safety poll; elsewhere the 50 ms poll again) and `redis` (a `RedisSubscriber`
//! fed by a `RedisPublisher` in this process, on `AIKI_BENCH_REDIS_URL`, default
//! `redis://127.0.0.1:6379/`). This process, which is not a
//! worker (its in-process wake-up reaches no worker), starts one-task runs, and sends events to
//! runs waiting for them; each latency is read from the store's times (the run's start or the
//! event's send, to its completion), so how often this process looks does not count. Timer
//! wake-ups (a 50 ms durable sleep) are the worker's own daemons' and are shown beside them.
//! Then throughput fed each way: four such worker processes and the bench's runs of ten tasks.

use std::time::Duration;

use aiki::{Client, PollingSubscriber, RunStatus, Worker};
use serde_json::{Value, json};

/// `--wake-worker <url> <poll|hints>`.
pub(crate) async fn worker_process(url: String, discovery: String) -> anyhow::Result<()> {
    let store = aiki::store::connect(&url).await?;
    let builder = Worker::builder(store)
        .register(super::Chain)
        .register(super::One)
        .register(super::Nap)
        .register(super::Waiter);
    let builder = match discovery.as_str() {
        "poll" => builder.subscriber(PollingSubscriber::new(Duration::from_millis(50))),
        "hints" => builder,
        "redis" => builder.subscriber(aiki::redis::RedisSubscriber::new(&redis_url())?),
        other => anyhow::bail!("--wake-worker: `{other}` is not `poll`, `hints` or `redis`"),
    };
    let worker = builder.build()?.start();
    super::serve(worker).await;
    Ok(())
}

fn redis_url() -> String {
    std::env::var("AIKI_BENCH_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned())
}

/// The three latencies with a worker process discovering work by `discovery`.
pub(crate) async fn measure(url: &str, discovery: &str, runs: usize) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let _publisher = match discovery {
        "redis" => Some(aiki::redis::RedisPublisher::new(&redis_url(), store.clone())?.start()),
        _ => None,
    };
    let worker =
        super::WorkerProcess::start_with(&["--wake-worker", url, discovery], false).await?;
    let client = Client::new(store).with_poll_interval(Duration::from_millis(2));
    let mut start = Vec::new();
    let mut send = Vec::new();
    let mut timer = Vec::new();
    for i in 0..runs {
        // Apart, so that each start finds the worker waiting for work.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let handle = client.start::<super::One>(i as u64).await?;
        let run = super::wait_for(&handle, RunStatus::Completed).await?;
        start.push((run.updated_at - run.created_at) as f64);

        let handle = client.start::<super::Waiter>(i as u64).await?;
        super::wait_for(&handle, RunStatus::AwaitingEvent).await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sent = super::now_ms();
        handle.send::<super::WaiterGo>(()).await?;
        let run = super::wait_for(&handle, RunStatus::Completed).await?;
        send.push((run.updated_at - sent) as f64);

        let handle = client.start::<super::Nap>(i as u64).await?;
        let sleeping = super::wait_for(&handle, RunStatus::Sleeping).await?;
        let due = sleeping.due_at.unwrap_or(sleeping.updated_at);
        let run = super::wait_for(&handle, RunStatus::Completed).await?;
        timer.push((run.updated_at - due) as f64);
    }
    worker.stop().await;
    let p = |values: Vec<f64>, q: f64| super::percentile(&super::sorted(values), q);
    Ok(json!({
        "discovery": discovery,
        "runs": runs,
        "start_p50_ms": p(start.clone(), 0.5),
        "start_p99_ms": p(start, 0.99),
        "send_p50_ms": p(send.clone(), 0.5),
        "send_p99_ms": p(send, 0.99),
        "timer_p50_ms": p(timer.clone(), 0.5),
        "timer_p99_ms": p(timer, 0.99),
    }))
}

/// Throughput with `workers` worker processes discovering work by `discovery`: `runs` runs of
/// ten tasks, started by this process.
pub(crate) async fn fed(
    url: &str,
    discovery: &str,
    workers: usize,
    runs: u64,
) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let _publisher = match discovery {
        "redis" => Some(aiki::redis::RedisPublisher::new(&redis_url(), store.clone())?.start()),
        _ => None,
    };
    let mut processes = Vec::new();
    for _ in 0..workers {
        processes.push(
            super::WorkerProcess::start_with(&["--wake-worker", url, discovery], false).await?,
        );
    }
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let bar =
        indicatif::ProgressBar::new(runs).with_message(format!("{workers} fed by {discovery}"));
    let t0 = super::now_ms();
    let handles = super::start_chains(&client, runs).await?;
    let last = super::complete_chains(&handles, &bar).await?.max(t0);
    bar.finish_and_clear();
    for process in processes {
        process.stop().await;
    }
    let seconds = ((last - t0).max(1)) as f64 / 1000.0;
    Ok(json!({
        "discovery": discovery,
        "workers": workers,
        "runs": runs,
        "runs_per_s": runs as f64 / seconds,
        "steps_per_s": (runs * 10) as f64 / seconds,
    }))
}

pub(crate) fn print_fed(backend: &str, result: &Value) {
    println!(
        "  {backend:<8} throughput, {} worker processes fed by {} ({} runs x 10 tasks): {:.0} runs/s, {:.0} steps/s",
        result["workers"],
        result["discovery"].as_str().unwrap_or("?"),
        result["runs"],
        result["runs_per_s"].as_f64().unwrap_or(f64::NAN),
        result["steps_per_s"].as_f64().unwrap_or(f64::NAN),
    );
}

pub(crate) fn print(backend: &str, result: &Value) {
    let ms = |key: &str| format!("{:.0} ms", result[key].as_f64().unwrap_or(f64::NAN));
    println!(
        "  {backend:<8} wake-up in another process ({}, {} runs each), p50 / p99: \
         start → completed {} / {}; send → completed {} / {}; 50 ms timer due → completed \
         {} / {}",
        result["discovery"].as_str().unwrap_or("?"),
        result["runs"],
        ms("start_p50_ms"),
        ms("start_p99_ms"),
        ms("send_p50_ms"),
        ms("send_p99_ms"),
        ms("timer_p50_ms"),
        ms("timer_p99_ms"),
    );
}
