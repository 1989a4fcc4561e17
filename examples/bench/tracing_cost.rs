//! `--tracing-cost`: what a `tracing` subscriber costs. The throughput row (N runs × 10 tasks,
//! one worker process) runs five times with a subscriber that records at `info` and discards
//! (`tracing-subscriber`'s fmt layer into `io::sink`) and five times with none, interleaved,
//! in one run of this program; it prints the median and spread of each, and the raw commit
//! rate measured in the same run.

use serde_json::{Value, json};

/// The environment variable that tells a worker process to install the recording subscriber.
pub(crate) const TRACING_ENV: &str = "AIKI_BENCH_TRACING";

/// Repetitions of each variant.
pub(crate) const REPETITIONS: usize = 5;

/// Installs the recording subscriber in a worker process when its parent asked for one.
pub(crate) fn install_if_asked() {
    if std::env::var(TRACING_ENV).as_deref() == Ok("info") {
        tracing_subscriber::fmt()
            .with_writer(std::io::sink)
            .with_max_level(tracing::Level::INFO)
            .init();
    }
}

/// The median and the spread (min, max) of `values`.
fn summary(mut values: Vec<f64>) -> Value {
    values.sort_by(f64::total_cmp);
    json!({
        "median": values[values.len() / 2],
        "min": values[0],
        "max": values[values.len() - 1],
        "all": values,
    })
}

/// The order of the two variants in repetition `repetition` (`true`: with the subscriber):
/// alternating which goes first, so that a trend over the run hits both alike.
pub(crate) fn order(repetition: usize) -> [bool; 2] {
    [!repetition.is_multiple_of(2), repetition.is_multiple_of(2)]
}

/// The report of one backend: steps/s without and with the subscriber, and the raw rate.
pub(crate) fn report(raw: f64, without: Vec<f64>, with: Vec<f64>) -> Value {
    json!({
        "raw_commits_per_s": raw,
        "without_subscriber": summary(without),
        "info_subscriber": summary(with),
    })
}

/// Prints one backend's figures.
pub(crate) fn print(backend: &str, cost: &Value) {
    let line = |label: &str, s: &Value| {
        println!(
            "    {label:<34} median {:>7.0} steps/s, spread {:.0} – {:.0} ({:.2} × raw)",
            s["median"].as_f64().unwrap_or(f64::NAN),
            s["min"].as_f64().unwrap_or(f64::NAN),
            s["max"].as_f64().unwrap_or(f64::NAN),
            s["median"].as_f64().unwrap_or(f64::NAN)
                / cost["raw_commits_per_s"].as_f64().unwrap_or(f64::NAN),
        );
    };
    println!("  {backend}: tracing cost, {REPETITIONS} repetitions each, interleaved");
    println!(
        "    limit: raw single-row INSERT commits {:>7.0} /s",
        cost["raw_commits_per_s"].as_f64().unwrap_or(f64::NAN)
    );
    line("no subscriber:", &cost["without_subscriber"]);
    line("subscriber recording at info:", &cost["info_subscriber"]);
}
