//! The OpenTelemetry side of the trace context (feature `otel`): a run's stored traceparent
//! as a span link, and the current context as a traceparent.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::Traceparent;

/// Links `span` to the span a traceparent names.
pub(super) fn link(span: &tracing::Span, traceparent: &Traceparent) {
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(traceparent.trace_id()),
        SpanId::from_hex(traceparent.span_id()),
    ) else {
        return;
    };
    span.add_link(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(traceparent.flags()),
        true,
        TraceState::default(),
    ));
}

/// The traceparent of the current `tracing` span's OpenTelemetry context (or of the current
/// OpenTelemetry context, for code that does not use `tracing` spans).
pub(super) fn current() -> Option<Traceparent> {
    let from_span = tracing::Span::current().context();
    let context = from_span.span().span_context().clone();
    let context = if context.is_valid() {
        context
    } else {
        opentelemetry::Context::current()
            .span()
            .span_context()
            .clone()
    };
    if !context.is_valid() {
        return None;
    }
    Traceparent::from_parts(
        &context.trace_id().to_string(),
        &context.span_id().to_string(),
        context.trace_flags().to_u8(),
    )
    .ok()
}
