//! Metrics: the Prometheus text a user's HTTP app serves (counters of this process, queue
//! gauges read from the store at scrape time), and the same through OpenTelemetry's SDK.

use std::time::Duration;

use aiki::{Client, NoInput, Run, TaskError, Worker, WorkflowError};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};

#[aiki::task(name = "prom-step")]
async fn prom_step(n: u32) -> Result<u32, TaskError> {
    Ok(n + 1)
}

#[aiki::task(name = "prom-broken")]
async fn prom_broken() -> Result<u32, TaskError> {
    Err(TaskError::new("always broken"))
}

#[aiki::workflow(name = "prom-flow", version = "1")]
async fn prom_flow(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    PromStep.start(run, n).await
}

#[aiki::workflow(name = "prom-fail", version = "1")]
async fn prom_fail(run: &Run) -> Result<u32, WorkflowError> {
    PromBroken.start(run).await
}

/// No worker serves it: its runs stay queued.
#[aiki::workflow(name = "prom-queued", version = "2")]
async fn prom_queued(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

/// The latest value OpenTelemetry exported for the `u64` counter or gauge `name` of
/// `workflow`.
fn exported(meter: &super::Meter, name: &str, workflow: &str) -> Option<u64> {
    meter.provider.force_flush().unwrap();
    let mut value = None;
    for resource in meter.exporter.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics().filter(|metric| metric.name() == name) {
                let ours = |kv: &opentelemetry::KeyValue| {
                    kv.key.as_str() == "workflow" && kv.value.as_str() == workflow
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for point in sum.data_points() {
                            if point.attributes().any(ours) {
                                value = Some(point.value());
                            }
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Gauge(gauge)) => {
                        for point in gauge.data_points() {
                            if point.attributes().any(ours) {
                                value = Some(point.value());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    value
}

/// The value of the sample `name{labels}` in Prometheus text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.parse().expect("a number"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_text_counts_runs_tasks_and_the_queue_at_scrape_time() {
    let meter = super::init();
    let store = aiki::store::connect("memory:").await.unwrap();
    let worker = Worker::builder(store.clone())
        .register(PromFlow)
        .register(PromFail)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(5));
    for n in 0..3 {
        let run = client.start::<PromFlow>(n).await.unwrap();
        assert_eq!(run.result().await.unwrap(), n + 1);
    }
    let failing = client.start::<PromFail>(NoInput).await.unwrap();
    assert!(failing.result().await.is_err());
    for _ in 0..2 {
        client.start::<PromQueued>(NoInput).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    worker.shutdown().await;

    let text = aiki::metrics::prometheus_text(&*store).await.unwrap();
    println!("{text}");
    let at = |series: &str| {
        sample(&text, series).unwrap_or_else(|| panic!("no sample `{series}` in:\n{text}"))
    };
    assert_eq!(
        at(r#"aiki_runs_started_total{workflow="prom-flow",version="1"}"#),
        3.0
    );
    assert_eq!(
        at(r#"aiki_runs_started_total{workflow="prom-queued",version="2"}"#),
        2.0
    );
    assert_eq!(
        at(
            r#"aiki_runs_ended_total{workflow="prom-flow",version="1",status="completed",error_kind=""}"#
        ),
        3.0
    );
    assert_eq!(
        at(
            r#"aiki_runs_ended_total{workflow="prom-fail",version="1",status="failed",error_kind="task_failed"}"#
        ),
        1.0
    );
    assert_eq!(
        at(r#"aiki_task_attempts_total{task="prom-step",outcome="completed"}"#),
        3.0
    );
    assert_eq!(
        at(r#"aiki_task_attempts_total{task="prom-broken",outcome="failed"}"#),
        1.0
    );
    assert_eq!(
        at(r#"aiki_task_attempt_seconds_count{task="prom-step"}"#),
        3.0
    );
    assert_eq!(
        at(r#"aiki_claim_latency_seconds_count{workflow="prom-flow",version="1"}"#),
        3.0
    );
    assert_eq!(
        at(r#"aiki_queue_depth{workflow="prom-queued",version="2"}"#),
        2.0
    );
    let age = at(r#"aiki_queue_oldest_age_seconds{workflow="prom-queued",version="2"}"#);
    assert!((0.0..60.0).contains(&age), "{age}");
    assert_eq!(
        at(r#"aiki_queue_depth{workflow="prom-flow",version="1"}"#),
        0.0,
        "a version with runs, none of them queued"
    );
    assert_eq!(
        at(r#"aiki_runs{workflow="prom-flow",version="1",status="completed"}"#),
        3.0
    );
    assert_eq!(
        at(r#"aiki_runs{workflow="prom-queued",version="2",status="queued"}"#),
        2.0
    );
    assert!(
        sample(
            &text,
            r#"aiki_runs{workflow="prom-flow",version="1",status="queued"}"#
        )
        .is_none(),
        "a status without runs is no sample"
    );
    assert!(text.ends_with("# EOF\n"), "OpenMetrics text");

    // The same counts through OpenTelemetry.
    let started = exported(meter, "aiki.runs.started", "prom-flow");
    assert_eq!(started, Some(3), "aiki.runs.started for prom-flow");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_reports_the_queue_gauges_through_opentelemetry() {
    let meter = super::init();
    let store = aiki::store::connect("memory:").await.unwrap();
    let client = Client::new(store.clone());
    #[aiki::workflow(name = "otel-queued", version = "1")]
    async fn otel_queued(_run: &Run) -> Result<(), WorkflowError> {
        Ok(())
    }
    for _ in 0..4 {
        client.start::<OtelQueued>(NoInput).await.unwrap();
    }
    let reporter = aiki::metrics::report_run_counts(store, Duration::from_millis(10));
    let mut depth = None;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        depth = exported(meter, "aiki.queue.depth", "otel-queued");
        if depth.is_some() {
            break;
        }
    }
    reporter.abort();
    assert_eq!(depth, Some(4));
}
