//! Observability set-up: traces and metrics over OTLP/HTTP, and the Prometheus text.
//!
//! ```sh
//! cargo run -p aiki-examples --example observability
//! ```
//!
//! The set-up is the first block of `main`: an OTLP/HTTP exporter for spans and one for
//! metrics, the `tracing-opentelemetry` layer, and the providers made global. Aiki needs its
//! `otel` feature for the links between executions and the trace each run was started in, and
//! for its metrics to reach the global meter provider. Point `OTEL_ENDPOINT` at a collector
//! (`http://localhost:4318`); without it, this example starts a stand-in collector on
//! 127.0.0.1 that only counts what it receives, and checks that spans and metrics arrived.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{Client, Run, TaskError, Worker, WorkflowError};
use opentelemetry::trace::TracerProvider;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[aiki::task(name = "greet")]
async fn greet(name: String) -> Result<String, TaskError> {
    tracing::info!(%name, "greeting");
    Ok(format!("hello, {name}"))
}

#[aiki::workflow(name = "greeter", version = "1")]
async fn greeter(run: &Run, name: String) -> Result<String, WorkflowError> {
    Greet.start(run, name).await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (endpoint, received) = match std::env::var("OTEL_ENDPOINT") {
        Ok(endpoint) => (endpoint, None),
        Err(_) => {
            let (endpoint, received) = stand_in_collector()?;
            (endpoint, Some(received))
        }
    };

    // The set-up.
    let resource = Resource::builder().with_service_name("greeter").build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{endpoint}/v1/traces"))
        .build()?;
    let tracer_provider = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(format!("{endpoint}/v1/metrics"))
        .build()?;
    let meter_provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics).build())
        .with_resource(resource)
        .build();
    opentelemetry::global::set_meter_provider(meter_provider.clone());
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tracer_provider.tracer("greeter")))
        .init();

    // The application: a run started while handling a request; its execution links to it.
    let store = aiki::connect("memory:").await?;
    let worker = Worker::builder(store.clone())
        .register(Greeter)
        .build()?
        .start();
    let client = Client::new(store.clone());
    let run = async { client.start::<Greeter>("world".to_owned()).await }
        .instrument(tracing::info_span!("handle-request"))
        .await?;
    println!("{}", run.result().await?);
    // What a `GET /metrics` handler of the application would answer.
    let text = aiki::metrics::prometheus_text(&*store).await?;
    let started = text
        .lines()
        .find(|line| line.starts_with("aiki_runs_started_total{workflow=\"greeter\""))
        .unwrap_or_default()
        .to_owned();
    println!("{started}");
    worker.shutdown().await;

    // Flushes what is still batched.
    tracer_provider.shutdown()?;
    meter_provider.shutdown()?;

    if let Some(received) = received {
        let received = received.lock().expect("the collector's counts").clone();
        println!("the stand-in collector received: {received:?}");
        anyhow::ensure!(
            received
                .iter()
                .any(|(path, bytes)| path == "/v1/traces" && *bytes > 0),
            "no spans reached the collector"
        );
        anyhow::ensure!(
            received
                .iter()
                .any(|(path, bytes)| path == "/v1/metrics" && *bytes > 0),
            "no metrics reached the collector"
        );
        anyhow::ensure!(
            started.ends_with(" 1"),
            "the Prometheus text counts the run"
        );
    }
    Ok(())
}

/// Paths posted to and the body size of each request.
type Received = Arc<Mutex<Vec<(String, usize)>>>;

/// An HTTP server on 127.0.0.1 that answers every request `200 OK` and records its path and
/// body size; its thread ends with the process.
fn stand_in_collector() -> std::io::Result<(String, Received)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let received = Received::default();
    let counts = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut reader = BufReader::new(&stream);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_owned();
            let mut length = 0;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_ok() {
                counts.lock().expect("counts").push((path, length));
            }
            let _ = (&stream).write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        }
    });
    Ok((endpoint, received))
}
