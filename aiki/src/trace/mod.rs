//! What the runtime tells a `tracing` subscriber: one span per execution attempt of a run
//! (`aiki.execution`), one per task attempt that actually runs (`aiki.task`, inside which the
//! task's own logs land), and events for replayed tasks, suspensions, divergences, schema
//! mismatches, lost claims and failed attempts. Span and field names are part of the API.

mod dispatched;
#[cfg(feature = "otel")]
mod otel;
mod traceparent;

use aiki_store::RunRecord;
use tracing::Span;
use tracing::field::Empty;

pub(crate) use dispatched::in_current_dispatch;
pub use traceparent::{InvalidTraceparent, Traceparent};

/// The span of one execution attempt of a run. Its `outcome` is recorded when the execution
/// ends; with the `otel` feature it links to the run's stored `traceparent`.
pub(crate) fn execution_span(run: &RunRecord, worker: &str) -> Span {
    let span = tracing::info_span!(
        "aiki.execution",
        run_id = %run.id,
        workflow = %run.namespace.workflow,
        version = %run.namespace.version,
        attempt = run.attempts,
        revision = run.revision,
        worker = %worker,
        traceparent = Empty,
        outcome = Empty,
    );
    if let Some(traceparent) = &run.traceparent {
        span.record("traceparent", traceparent.as_str());
        #[cfg(feature = "otel")]
        if let Ok(traceparent) = traceparent.parse::<Traceparent>() {
            otel::link(&span, &traceparent);
        }
    }
    span
}

/// The span of one task attempt that runs (replayed tasks get an event instead). Its
/// `outcome` (`completed`, `failed`, `panicked`) is recorded when the attempt ends.
pub(crate) fn task_span(task: &'static str, address: &str, attempt: u32) -> Span {
    tracing::info_span!(
        "aiki.task",
        task,
        address = %address,
        attempt,
        outcome = Empty,
    )
}

/// The `traceparent` of the current span's OpenTelemetry context, if the `otel` feature is on
/// and a sampled or unsampled span is current.
pub(crate) fn current_traceparent() -> Option<Traceparent> {
    #[cfg(feature = "otel")]
    {
        otel::current()
    }
    #[cfg(not(feature = "otel"))]
    {
        None
    }
}
