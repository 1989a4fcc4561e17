//! The same metrics through OpenTelemetry (feature `otel`): instruments of the global meter
//! provider's `aiki` meter, created at the first measurement, so set the provider before the
//! first client or worker runs. Names follow OpenTelemetry's dotted style; units are seconds.

use std::sync::LazyLock;
use std::time::Duration;

use aiki_store::Namespace;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram};

use crate::clock::{Clock, SystemClock};

struct Instruments {
    runs_started: Counter<u64>,
    runs_ended: Counter<u64>,
    task_attempts: Counter<u64>,
    task_seconds: Histogram<f64>,
    claim_latency: Histogram<f64>,
    store_errors: Counter<u64>,
    store_retries: Counter<u64>,
    queue_depth: Gauge<u64>,
    queue_age: Gauge<f64>,
}

static INSTRUMENTS: LazyLock<Instruments> = LazyLock::new(|| {
    let meter = opentelemetry::global::meter("aiki");
    Instruments {
        runs_started: meter
            .u64_counter("aiki.runs.started")
            .with_description("Runs started by this process")
            .build(),
        runs_ended: meter
            .u64_counter("aiki.runs.ended")
            .with_description("Runs this process's executions completed or failed")
            .build(),
        task_attempts: meter
            .u64_counter("aiki.task.attempts")
            .with_description("Task attempts run by this process")
            .build(),
        task_seconds: meter
            .f64_histogram("aiki.task.attempt.duration")
            .with_unit("s")
            .with_description("How long task attempts ran")
            .build(),
        claim_latency: meter
            .f64_histogram("aiki.claim.latency")
            .with_unit("s")
            .with_description("From queued to claimed, per run claimed by this process")
            .build(),
        store_errors: meter
            .u64_counter("aiki.store.errors")
            .with_description("Store calls of this process that failed")
            .build(),
        store_retries: meter
            .u64_counter("aiki.store.retries")
            .with_description("Store calls of this process retried after a transient error")
            .build(),
        queue_depth: meter
            .u64_gauge("aiki.queue.depth")
            .with_description("Queued runs per workflow version")
            .build(),
        queue_age: meter
            .f64_gauge("aiki.queue.oldest_age")
            .with_unit("s")
            .with_description("How long the oldest queued run of each workflow version has waited")
            .build(),
    }
});

fn version(namespace: &Namespace) -> [KeyValue; 2] {
    [
        KeyValue::new("workflow", namespace.workflow.clone()),
        KeyValue::new("version", namespace.version.clone()),
    ]
}

pub(super) fn run_started(namespace: &Namespace) {
    INSTRUMENTS.runs_started.add(1, &version(namespace));
}

pub(super) fn run_ended(workflow: &str, version: &str, status: &str, error_kind: &str) {
    INSTRUMENTS.runs_ended.add(
        1,
        &[
            KeyValue::new("workflow", workflow.to_owned()),
            KeyValue::new("version", version.to_owned()),
            KeyValue::new("status", status.to_owned()),
            KeyValue::new("error_kind", error_kind.to_owned()),
        ],
    );
}

pub(super) fn task_attempt(task: &str, outcome: &str, elapsed: Duration) {
    let task = KeyValue::new("task", task.to_owned());
    INSTRUMENTS.task_attempts.add(
        1,
        &[task.clone(), KeyValue::new("outcome", outcome.to_owned())],
    );
    INSTRUMENTS
        .task_seconds
        .record(elapsed.as_secs_f64(), &[task]);
}

pub(super) fn claimed(namespace: &Namespace, waited: Duration) {
    INSTRUMENTS
        .claim_latency
        .record(waited.as_secs_f64(), &version(namespace));
}

pub(super) fn store_error(operation: &'static str, kind: &'static str) {
    INSTRUMENTS.store_errors.add(
        1,
        &[
            KeyValue::new("operation", operation),
            KeyValue::new("kind", kind),
        ],
    );
}

pub(super) fn store_retry(operation: &'static str) {
    INSTRUMENTS
        .store_retries
        .add(1, &[KeyValue::new("operation", operation)]);
}

/// Records the queue gauges (`aiki.queue.depth`, `aiki.queue.oldest_age`) from one
/// [`ReadStore::run_counts`](aiki_store::ReadStore::run_counts) read every `every`, until the returned task is aborted. Run it in
/// one process, not in every worker. A failed read is logged and tried again next time.
pub fn report_run_counts(
    store: aiki_store::BoxStore,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match store.run_counts().await {
                Ok(counts) => {
                    let now = SystemClock.now();
                    for counts in counts {
                        let labels = version(&counts.namespace);
                        INSTRUMENTS.queue_depth.record(counts.queued(), &labels);
                        // 0 once the queue is empty, not the last age for good.
                        let age = counts.oldest_queued_at.map_or(0.0, |oldest| {
                            now.saturating_sub(oldest).max(0) as f64 / 1000.0
                        });
                        INSTRUMENTS.queue_age.record(age, &labels);
                    }
                }
                Err(error) => tracing::warn!(%error, "could not read the queue depths"),
            }
            tokio::time::sleep(every).await;
        }
    })
}
