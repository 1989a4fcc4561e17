//! Per-step cost as a run grows: one run of 10,000 sequential tasks (1,000 with `--quick`) on an
//! in-process worker. The workflow times each step itself (the `Instant` between one task
//! call's result and the next's; the first from the execution's start) and the row compares the
//! first 100 steps with the last 100: mean and median of each, and late ÷ early.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use aiki::{Client, Run, RunStatus, Worker, WorkflowError};
use indicatif::ProgressBar;
use serde_json::{Value, json};

use super::Inc;

/// Steps compared at each end of the run.
const WINDOW: usize = 100;

/// Each finished execution's step times, in order.
static EXECUTIONS: Mutex<Vec<Vec<Duration>>> = Mutex::new(Vec::new());

/// `n` sequential tasks, each timed.
#[aiki::workflow(name = "bench-long-run", version = "1")]
async fn long_run(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let mut steps = Vec::with_capacity(n as usize);
    let mut last = Instant::now();
    let mut x = 0;
    for _ in 0..n {
        x = Inc.start(run, x).await?;
        let now = Instant::now();
        steps.push(now - last);
        last = now;
    }
    EXECUTIONS.lock().expect("not poisoned").push(steps);
    Ok(x)
}

/// The run of `steps` tasks on the store at `url`.
pub(crate) async fn measure(url: &str, steps: u64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let worker = Worker::builder(store.clone())
        .register(LongRun)
        .build()?
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let before = EXECUTIONS.lock().expect("not poisoned").len();
    let bar = ProgressBar::new_spinner().with_message(format!("one run of {steps} tasks"));
    bar.enable_steady_tick(Duration::from_millis(100));
    let clock = Instant::now();
    let handle = client.start::<LongRun>(steps).await?;
    let run = handle
        .wait_for_status_timeout(RunStatus::Completed, Duration::from_secs(1800))
        .await?;
    let wall = clock.elapsed();
    bar.finish_and_clear();
    worker.shutdown().await;
    anyhow::ensure!(
        run.output == Some(json!(steps)),
        "wrong output {:?}",
        run.output
    );
    let executions: Vec<_> = EXECUTIONS
        .lock()
        .expect("not poisoned")
        .drain(before..)
        .collect();
    // A second execution would replay the first's steps: its times are not step costs.
    anyhow::ensure!(
        executions.len() == 1,
        "the run took {} executions, not one; its step times are not comparable",
        executions.len()
    );
    let times = &executions[0];
    let window = WINDOW.min(times.len() / 2).max(1);
    let early = summary(&times[..window]);
    let late = summary(&times[times.len() - window..]);
    Ok(json!({
        "steps": steps,
        "window": window,
        "early_mean_us": early.0,
        "late_mean_us": late.0,
        "late_to_early": late.0 / early.0,
        "early_median_us": early.1,
        "late_median_us": late.1,
        "late_to_early_median": late.1 / early.1,
        "wall_s": wall.as_secs_f64(),
    }))
}

/// Mean and median of `times`, in µs.
fn summary(times: &[Duration]) -> (f64, f64) {
    let mut us: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    (us.iter().sum::<f64>() / us.len() as f64, us[us.len() / 2])
}

/// `steps 1–100: mean 410 µs (median 380 µs); steps 901–1000: mean 450 µs (median 400 µs);
/// 1.10 × (median 1.05 ×)`.
pub(crate) fn describe(row: &Value) -> String {
    let f = |key: &str| row[key].as_f64().unwrap_or(f64::NAN);
    let steps = row["steps"].as_u64().unwrap_or(0);
    let window = row["window"].as_u64().unwrap_or(0);
    format!(
        "steps 1–{window}: mean {:.0} µs (median {:.0}); steps {}–{steps}: mean {:.0} µs \
         (median {:.0}); late ÷ early {:.2} × (median {:.2} ×)",
        f("early_mean_us"),
        f("early_median_us"),
        steps.saturating_sub(window) + 1,
        f("late_mean_us"),
        f("late_median_us"),
        f("late_to_early"),
        f("late_to_early_median"),
    )
}
