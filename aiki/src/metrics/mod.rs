//! Metrics: what this process's clients, workers and executions did, and how deep each
//! workflow version's queue is, as Prometheus (OpenMetrics) text a user's own HTTP app serves
//! in one line, and, with the `otel` feature, through OpenTelemetry's global meter provider.
//!
//! | metric | labels | what |
//! | --- | --- | --- |
//! | `aiki_runs_started_total` | workflow, version | runs started by this process (children included) |
//! | `aiki_runs_ended_total` | workflow, version, status, error_kind | runs this process's executions completed or failed |
//! | `aiki_task_attempts_total` | task, outcome | task attempts run here (`completed`, `failed`, `panicked`) |
//! | `aiki_task_attempt_seconds` | task | how long each attempt ran (histogram) |
//! | `aiki_claim_latency_seconds` | workflow, version | from queued to claimed, per claimed run (histogram) |
//! | `aiki_store_errors_total` | operation, kind | store calls that failed (`transient` or `permanent`) |
//! | `aiki_store_retries_total` | operation | store calls retried after a transient error |
//! | `aiki_schedule_occurrences_total` | outcome | schedule occurrences the sweep of this process decided (`fired`, `skipped`, `missed`) |
//! | `aiki_runs_purged_total` | | ended runs the daemons of this process purged past their retention |
//! | `aiki_runs` | workflow, version, status | runs in each status, read from the store at scrape time |
//! | `aiki_queue_depth` | workflow, version | queued runs (0 for a version with runs but none queued) |
//! | `aiki_queue_oldest_age_seconds` | workflow, version | how long the oldest of them has waited |
//! | `aiki_http_requests_total` | method, route, status | requests an `aiki-server` in this process answered, by route template |
//! | `aiki_http_request_seconds` | method, route, status | how long it took to answer them (histogram) |
//!
//! The queue gauges come from one store read ([`ReadStore::run_counts`]) per scrape: serve them
//! from one process (a scrape of every worker would count the same queue once per worker).
//!
//! ```no_run
//! # async fn serve(store: aiki::BoxStore) -> Result<(), aiki::StoreError> {
//! // In a handler of `GET /metrics`, with `PROMETHEUS_CONTENT_TYPE` as its content type:
//! let body: String = aiki::metrics::prometheus_text(&*store).await?;
//! # Ok(()) }
//! ```

#[cfg(feature = "otel")]
mod otel;

use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use aiki_store::{Namespace, ReadStore, RunStatus, StoreError};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

use crate::clock::{Clock, SystemClock};

#[cfg(feature = "otel")]
pub use otel::report_run_counts;

/// The content type of [`prometheus_text`]'s output (OpenMetrics text, which Prometheus reads).
pub const PROMETHEUS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    workflow: String,
    version: String,
}

impl VersionLabels {
    fn of(namespace: &Namespace) -> Self {
        VersionLabels {
            workflow: namespace.workflow.clone(),
            version: namespace.version.clone(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    workflow: String,
    version: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    workflow: String,
    version: String,
    status: String,
    error_kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    task: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    task: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    operation: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    method: String,
    route: String,
    status: u16,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds, from 1 ms to about 9 hours, doubling.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 25))
}

/// Seconds, from 1 ms to about 30 s, doubling: what an HTTP request takes.
fn request_seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// This process's metrics.
struct Metrics {
    http_requests: Family<HttpLabels, Counter>,
    http_seconds: Histograms<HttpLabels>,
    registry: Registry,
    runs_started: Family<VersionLabels, Counter>,
    runs_ended: Family<EndLabels, Counter>,
    task_attempts: Family<AttemptLabels, Counter>,
    task_seconds: Histograms<TaskLabels>,
    claim_latency: Histograms<VersionLabels>,
    store_errors: Family<StoreLabels, Counter>,
    store_retries: Family<OperationLabels, Counter>,
    schedule_occurrences: Family<OutcomeLabels, Counter>,
    runs_purged: Counter,
    runs: Family<StatusLabels, Gauge>,
    queue_depth: Family<VersionLabels, Gauge>,
    queue_age: Family<VersionLabels, Gauge<f64, AtomicU64>>,
    /// One scrape at a time sets the queue gauges and encodes.
    scrape: Mutex<()>,
}

/// `metric`, registered under `name`.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut r = Registry::default();
    Metrics {
        http_requests: registered(
            &mut r,
            "aiki_http_requests",
            "Requests an aiki-server in this process answered, by route template and status",
            Family::default(),
        ),
        http_seconds: registered(
            &mut r,
            "aiki_http_request_seconds",
            "How long an aiki-server in this process took to answer requests, by route \
             template and status",
            Family::new_with_constructor(request_seconds),
        ),
        runs_started: registered(
            &mut r,
            "aiki_runs_started",
            "Runs started by this process",
            Family::default(),
        ),
        runs_ended: registered(
            &mut r,
            "aiki_runs_ended",
            "Runs this process's executions completed or failed",
            Family::default(),
        ),
        task_attempts: registered(
            &mut r,
            "aiki_task_attempts",
            "Task attempts run by this process",
            Family::default(),
        ),
        task_seconds: registered(
            &mut r,
            "aiki_task_attempt_seconds",
            "How long task attempts ran",
            Family::new_with_constructor(seconds),
        ),
        claim_latency: registered(
            &mut r,
            "aiki_claim_latency_seconds",
            "From queued to claimed, per run claimed by this process",
            Family::new_with_constructor(seconds),
        ),
        store_errors: registered(
            &mut r,
            "aiki_store_errors",
            "Store calls of this process that failed",
            Family::default(),
        ),
        store_retries: registered(
            &mut r,
            "aiki_store_retries",
            "Store calls of this process retried after a transient error",
            Family::default(),
        ),
        schedule_occurrences: registered(
            &mut r,
            "aiki_schedule_occurrences",
            "Schedule occurrences this process's sweep decided: fired, skipped (or buffered) by \
             an overlap policy, or missed outside the catch-up window",
            Family::default(),
        ),
        runs_purged: registered(
            &mut r,
            "aiki_runs_purged",
            "Ended runs this process's daemons purged past their retention",
            Counter::default(),
        ),
        runs: registered(
            &mut r,
            "aiki_runs",
            "Runs per workflow version and status, read from the store at scrape time",
            Family::default(),
        ),
        queue_depth: registered(
            &mut r,
            "aiki_queue_depth",
            "Queued runs per workflow version, read from the store at scrape time",
            Family::default(),
        ),
        queue_age: registered(
            &mut r,
            "aiki_queue_oldest_age_seconds",
            "How long the oldest queued run of each workflow version has waited",
            Family::default(),
        ),
        registry: r,
        scrape: Mutex::new(()),
    }
});

/// A run was started (by a client, or as a child).
pub(crate) fn run_started(namespace: &Namespace) {
    METRICS
        .runs_started
        .get_or_create(&VersionLabels::of(namespace))
        .inc();
    #[cfg(feature = "otel")]
    otel::run_started(namespace);
}

/// An execution ended the run (`completed`, `failed`, ...), with the error's kind if it failed.
pub(crate) fn run_ended(namespace: &Namespace, status: RunStatus, error_kind: Option<&str>) {
    let labels = EndLabels {
        workflow: namespace.workflow.clone(),
        version: namespace.version.clone(),
        status: status.as_str().to_owned(),
        error_kind: error_kind.unwrap_or_default().to_owned(),
    };
    METRICS.runs_ended.get_or_create(&labels).inc();
    #[cfg(feature = "otel")]
    otel::run_ended(
        &labels.workflow,
        &labels.version,
        &labels.status,
        &labels.error_kind,
    );
}

/// A task attempt ran for `elapsed` and ended with `outcome`.
pub(crate) fn task_attempt(task: &str, outcome: &str, elapsed: Duration) {
    METRICS
        .task_attempts
        .get_or_create(&AttemptLabels {
            task: task.to_owned(),
            outcome: outcome.to_owned(),
        })
        .inc();
    METRICS
        .task_seconds
        .get_or_create(&TaskLabels {
            task: task.to_owned(),
        })
        .observe(elapsed.as_secs_f64());
    #[cfg(feature = "otel")]
    otel::task_attempt(task, outcome, elapsed);
}

/// A run of `namespace` was claimed after waiting `waited` in the queue.
pub(crate) fn claimed(namespace: &Namespace, waited: Duration) {
    METRICS
        .claim_latency
        .get_or_create(&VersionLabels::of(namespace))
        .observe(waited.as_secs_f64());
    #[cfg(feature = "otel")]
    otel::claimed(namespace, waited);
}

/// A store call failed.
pub(crate) fn store_error(operation: &'static str, error: &StoreError) {
    let kind = if error.is_transient() {
        "transient"
    } else {
        "permanent"
    };
    METRICS
        .store_errors
        .get_or_create(&StoreLabels {
            operation: operation.to_owned(),
            kind: kind.to_owned(),
        })
        .inc();
    #[cfg(feature = "otel")]
    otel::store_error(operation, kind);
}

/// A store call is retried after a transient error.
pub(crate) fn store_retry(operation: &'static str) {
    METRICS
        .store_retries
        .get_or_create(&OperationLabels {
            operation: operation.to_owned(),
        })
        .inc();
    #[cfg(feature = "otel")]
    otel::store_retry(operation);
}

/// The schedule sweep decided `count` occurrences with `outcome` (`fired`, `skipped`,
/// `missed`).
pub(crate) fn schedule_occurrences(outcome: &'static str, count: u64) {
    if count > 0 {
        METRICS
            .schedule_occurrences
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_owned(),
            })
            .inc_by(count);
    }
}

/// An HTTP server answered a request to `route` with `status` after `elapsed`. `route` is a
/// route template (`/api/v1/runs/{id}`), never a raw path, and `method` one the server
/// routes: every distinct label value is a series of its own, so a caller keeps them few
/// (`aiki-server` names a path no route matches `unmatched`).
pub fn http_request(method: &str, route: &str, status: u16, elapsed: Duration) {
    let labels = HttpLabels {
        method: method.to_owned(),
        route: route.to_owned(),
        status,
    };
    METRICS.http_requests.get_or_create(&labels).inc();
    METRICS
        .http_seconds
        .get_or_create(&labels)
        .observe(elapsed.as_secs_f64());
}

/// The daemons purged `count` ended runs past their retention.
pub(crate) fn runs_purged(count: u64) {
    if count > 0 {
        METRICS.runs_purged.inc_by(count);
    }
}

/// This process's metrics as Prometheus (OpenMetrics) text, with the queue gauges read from
/// `store` now (one [`ReadStore::run_counts`] call). Serve it with [`PROMETHEUS_CONTENT_TYPE`].
pub async fn prometheus_text(store: &dyn ReadStore) -> Result<String, StoreError> {
    let counts = store.run_counts().await?;
    let now = SystemClock.now();
    let metrics = &*METRICS;
    let _scrape = metrics
        .scrape
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Series that no longer exist drop out rather than linger at their last value.
    metrics.runs.clear();
    metrics.queue_depth.clear();
    metrics.queue_age.clear();
    let gauge = |count: u64| i64::try_from(count).unwrap_or(i64::MAX);
    for counts in &counts {
        let labels = VersionLabels::of(&counts.namespace);
        for (status, count) in &counts.by_status {
            let labels = StatusLabels {
                workflow: labels.workflow.clone(),
                version: labels.version.clone(),
                status: status.as_str().to_owned(),
            };
            metrics.runs.get_or_create(&labels).set(gauge(*count));
        }
        metrics
            .queue_depth
            .get_or_create(&labels)
            .set(gauge(counts.queued()));
        if let Some(oldest) = counts.oldest_queued_at {
            let age = now.saturating_sub(oldest).max(0) as f64 / 1000.0;
            metrics.queue_age.get_or_create(&labels).set(age);
        }
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics.registry)
        .expect("BUG: writing to a String cannot fail");
    Ok(text)
}
