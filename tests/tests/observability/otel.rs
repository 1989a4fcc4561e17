//! OpenTelemetry through the SDK's in-memory exporter: a run started inside a request's span
//! stores its traceparent; it executes on one worker, which is dropped mid-run, and recovers on
//! another, each worker with its own tracer provider. Each execution is a root span of its own
//! trace, linked to the request; task attempts are its children; the replay on the second
//! worker is an event.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aiki::{Client, Run, RunStatus, State, TaskContext, TaskError, Worker, WorkflowError};
use opentelemetry::trace::{SpanId, TraceContextExt, TracerProvider};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tokio::sync::Notify;
use tracing::Instrument;
use tracing::instrument::WithSubscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// A tracer provider exporting to memory, and a dispatcher whose spans go to it.
struct Traced {
    provider: SdkTracerProvider,
    exporter: InMemorySpanExporter,
    dispatch: tracing::Dispatch,
}

impl Traced {
    fn new(name: &'static str) -> Traced {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer(name));
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        Traced {
            provider,
            exporter,
            dispatch,
        }
    }

    fn spans(&self, name: &str) -> Vec<SpanData> {
        self.provider.force_flush().expect("flush");
        let spans = self.exporter.get_finished_spans().expect("spans");
        spans.into_iter().filter(|s| s.name == name).collect()
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::new(key.to_owned()))
        .map(|kv| kv.value.clone())
}

fn text(span: &SpanData, key: &str) -> String {
    attribute(span, key)
        .map(|v| v.to_string())
        .unwrap_or_default()
}

#[derive(Default)]
struct Gate {
    entered: Notify,
    first: AtomicU32,
}

#[aiki::task(name = "otel-first")]
async fn otel_first(input: String) -> Result<String, TaskError> {
    Ok(format!("first({input})"))
}

/// Its first attempt never ends (its worker is dropped during it).
#[aiki::task(name = "otel-second", retry = fixed(max_attempts = 2, delay_ms = 1))]
async fn otel_second(
    input: String,
    State(gate): State<Arc<Gate>>,
    ctx: TaskContext,
) -> Result<String, TaskError> {
    if gate.first.fetch_add(1, Ordering::SeqCst) == 0 {
        gate.entered.notify_one();
        std::future::pending::<()>().await;
    }
    Ok(format!("second({input}) by attempt {}", ctx.attempt()))
}

#[aiki::workflow(name = "otel-flow", version = "1")]
async fn otel_flow(run: &Run, input: String) -> Result<String, WorkflowError> {
    let first = OtelFirst.start(run, input).await?;
    OtelSecond.start(run, first).await
}

fn worker(store: &aiki::BoxStore, gate: &Arc<Gate>, id: &str) -> Worker {
    Worker::builder(store.clone())
        .register(OtelFlow)
        .state(gate.clone())
        .worker_id(id)
        .poll_interval(Duration::from_millis(20))
        .claim_refresh_interval(Duration::from_millis(200))
        .build()
        .expect("worker config")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_link_to_the_start_across_a_recovery_on_another_worker() {
    super::init();
    let store = aiki::store::connect("memory:").await.unwrap();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(20));
    client
        .set_config(aiki::ConfigKey::ClaimIdleTimeout, 1_000)
        .await
        .unwrap();
    let (caller, first, second) = (Traced::new("caller"), Traced::new("a"), Traced::new("b"));
    let gate = Arc::new(Gate::default());

    // The caller starts the run inside a span of its own: the run keeps that context.
    let request = tracing::dispatcher::with_default(&caller.dispatch, || {
        tracing::info_span!("handle-request")
    });
    let requested = request.context().span().span_context().clone();
    assert!(requested.is_valid());
    let run = client
        .start::<OtelFlow>("x".into())
        .into_future()
        .instrument(request.clone())
        .with_subscriber(caller.dispatch.clone())
        .await
        .unwrap();
    drop(request);
    let stored = run.record().await.unwrap().traceparent.expect("stored");
    assert_eq!(
        stored,
        format!("00-{}-{}-01", requested.trace_id(), requested.span_id())
    );

    let a = tracing::dispatcher::with_default(&first.dispatch, || {
        worker(&store, &gate, "worker-a").start()
    });
    tokio::time::timeout(Duration::from_secs(30), gate.entered.notified())
        .await
        .expect("the second task started on worker a");
    a.abort().await;
    let b = tracing::dispatcher::with_default(&second.dispatch, || {
        worker(&store, &gate, "worker-b").start()
    });
    let done = run
        .wait_for_status_timeout(RunStatus::Completed, Duration::from_secs(60))
        .await
        .expect("recovered on worker b");
    assert_eq!(
        done.output,
        Some(serde_json::json!("second(first(x)) by attempt 2"))
    );
    b.shutdown().await;

    let request_spans = caller.spans("handle-request");
    assert_eq!(request_spans.len(), 1);
    for (traced, worker, revision_after) in [(&first, "worker-a", 0), (&second, "worker-b", 2)] {
        let executions = traced.spans("aiki.execution");
        assert_eq!(executions.len(), 1, "{worker}: one execution span");
        let execution = &executions[0];
        assert_eq!(text(execution, "worker"), worker);
        assert_eq!(text(execution, "run_id"), run.id().to_string());
        assert_eq!(text(execution, "workflow"), "otel-flow");
        assert_eq!(text(execution, "version"), "1");
        assert_eq!(text(execution, "traceparent"), stored);
        assert!(
            text(execution, "revision").parse::<u64>().unwrap() > revision_after,
            "{worker}"
        );
        assert_eq!(
            execution.parent_span_id,
            SpanId::INVALID,
            "{worker}: an execution is the root of a trace of its own"
        );
        assert_ne!(
            execution.span_context.trace_id(),
            requested.trace_id(),
            "{worker}: not one giant trace"
        );
        let links: Vec<_> = execution
            .links
            .links
            .iter()
            .map(|link| link.span_context.clone())
            .collect();
        assert_eq!(
            links.len(),
            1,
            "{worker}: linked to the request that started the run"
        );
        assert_eq!(links[0].trace_id(), requested.trace_id());
        assert_eq!(links[0].span_id(), requested.span_id());
        for task in traced.spans("aiki.task") {
            assert_eq!(task.parent_span_id, execution.span_context.span_id());
            assert_eq!(
                task.span_context.trace_id(),
                execution.span_context.trace_id()
            );
        }
    }
    let a_exec = &first.spans("aiki.execution")[0];
    let b_exec = &second.spans("aiki.execution")[0];
    assert_ne!(
        a_exec.span_context.trace_id(),
        b_exec.span_context.trace_id()
    );
    let tasks_on = |traced: &Traced| -> Vec<(String, String, String)> {
        traced
            .spans("aiki.task")
            .iter()
            .map(|t| (text(t, "task"), text(t, "attempt"), text(t, "outcome")))
            .collect()
    };
    let on_a = tasks_on(&first);
    assert_eq!(on_a.len(), 2, "{on_a:?}");
    assert!(on_a.contains(&("otel-first".into(), "1".into(), "completed".into())));
    assert!(
        on_a.iter()
            .any(|(task, attempt, _)| task == "otel-second" && attempt == "1"),
        "the attempt cut short by the drop is exported too: {on_a:?}"
    );
    assert_eq!(
        tasks_on(&second),
        [("otel-second".into(), "2".into(), "completed".into())],
        "the recorded first task is not run again on worker b"
    );
    let replays: Vec<String> = b_exec
        .events
        .events
        .iter()
        .filter(|event| event.name == "task replayed")
        .map(|event| {
            event
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == "task")
                .map(|kv| kv.value.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        replays,
        ["otel-first"],
        "the replay is an event, not a span"
    );
}
