//! Task retries: `fetch-quote` fails its first three attempts and succeeds on the fourth under
//! an exponential policy (100 ms, 200 ms, 400 ms between attempts); `notify-partner` always
//! fails, exhausts its fixed policy (3 attempts, 150 ms apart), and the workflow handles the
//! resulting `WorkflowError::TaskFailed` instead of failing the run.
//!
//! While a task waits for its next attempt, the run is `awaiting_retry` and holds no worker;
//! when the delay is over it is replayed and the task runs again.
//!
//! Run it with `cargo run -p aiki-examples --example retry`.

use std::time::{Duration, Instant};

use aiki::{Client, Run, State, Task, TaskContext, TaskError, Worker, WorkflowError};
use serde::{Deserialize, Serialize};

/// When the example started, shared with the tasks to print when each attempt ran.
#[derive(Debug)]
struct Started(Instant);

/// Flaky: fails attempts 1 to 3.
#[aiki::task(name = "fetch-quote", retry = exponential(max_attempts = 5, base_delay_ms = 100))]
async fn fetch_quote(
    symbol: String,
    State(started): State<Started>,
    ctx: TaskContext,
) -> Result<u64, TaskError> {
    let at = started.0.elapsed().as_millis();
    if ctx.attempt() <= 3 {
        println!(
            "  fetch-quote    attempt {} at {at:>4} ms: 503, will retry",
            ctx.attempt()
        );
        return Err(TaskError::new(format!(
            "quote service unavailable for {symbol}"
        )));
    }
    println!(
        "  fetch-quote    attempt {} at {at:>4} ms: ok",
        ctx.attempt()
    );
    Ok(4200)
}

/// Broken: fails every attempt.
#[aiki::task(name = "notify-partner", retry = fixed(max_attempts = 3, delay_ms = 150))]
async fn notify_partner(
    _message: String,
    State(started): State<Started>,
    ctx: TaskContext,
) -> Result<(), TaskError> {
    let at = started.0.elapsed().as_millis();
    println!(
        "  notify-partner attempt {} at {at:>4} ms: timeout",
        ctx.attempt()
    );
    Err(TaskError::new("partner API timed out"))
}

/// What the workflow produced.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Report {
    price: u64,
    notified: bool,
    note: String,
}

#[aiki::workflow(name = "quote", version = "1")]
async fn quote(run: &Run, symbol: String) -> Result<Report, WorkflowError> {
    // Retried until it succeeds; `?` would fail the run if it never did.
    let price = FetchQuote.start(run, symbol.clone()).await?;

    // Exhausts its attempts: handle the typed error instead of failing the run.
    let message = format!("{symbol} costs {price}");
    match NotifyPartner.start(run, message).await {
        Ok(()) => Ok(Report {
            price,
            notified: true,
            note: "partner notified".to_owned(),
        }),
        Err(WorkflowError::TaskFailed {
            task,
            attempts,
            message,
            ..
        }) => Ok(Report {
            price,
            notified: false,
            note: format!("`{task}` gave up after {attempts} attempts ({message})"),
        }),
        Err(other) => Err(other),
    }
}

/// The delays a policy waits between attempts.
fn schedule(task: &impl Task) -> String {
    let policy = task.retry();
    let delays: Vec<String> = (1..policy.max_attempts())
        .filter_map(|failed| policy.delay_after(failed))
        .map(|delay| format!("{} ms", delay.as_millis()))
        .collect();
    format!(
        "up to {} attempts, waiting {} between them",
        policy.max_attempts(),
        delays.join(", ")
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A fresh SQLite database in a folder of its own, removed at the end.
    let dir = std::env::temp_dir().join(format!("aiki-retry-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = aiki::connect(&format!("sqlite://{}", dir.join("aiki.db").display())).await?;

    println!("fetch-quote:    {}", schedule(&FetchQuote));
    println!("notify-partner: {}", schedule(&NotifyPartner));

    let started = Instant::now();
    let worker = Worker::builder(store.clone())
        .register(Quote)
        .state(Started(started))
        .poll_interval(Duration::from_millis(10))
        .build()?
        .start();
    let client = Client::new(store);

    let run = client.start::<Quote>("ACME".to_owned()).await?;
    let report = run.result().await?;
    println!(
        "run completed at {} ms: {report:?}",
        started.elapsed().as_millis()
    );
    anyhow::ensure!(report.price == 4200 && !report.notified);

    worker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
