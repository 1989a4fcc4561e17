//! Observability: `tracing` spans and events, OpenTelemetry traces across a recovery, and
//! metrics (Prometheus text and OpenTelemetry).

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod capture;
mod metrics;
mod otel;
mod spans;

use std::sync::LazyLock;

use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// The global meter provider of this test binary, exporting to memory.
struct Meter {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
    /// A second registered dispatcher besides each test's own. With only one, `tracing`
    /// computes a callsite's interest from whichever subscriber is the default where the
    /// callsite is first hit (none, outside a test's scope) and caches it: Aiki's spans would
    /// stay disabled under the test's capturing dispatcher.
    _second: tracing::Dispatch,
}

static METER: LazyLock<Meter> = LazyLock::new(|| {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());
    Meter {
        provider,
        exporter,
        _second: tracing::Dispatch::new(tracing_subscriber::registry()),
    }
});

/// Sets the global meter provider before anything in this binary measures: Aiki creates its
/// OpenTelemetry instruments at the first measurement. Every test calls it first.
fn init() -> &'static Meter {
    &METER
}
