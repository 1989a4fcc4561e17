//! A `tracing` layer that keeps every span (name, parent, fields, including those recorded
//! later) and every event (level, message, fields, the span it happened in).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Fields by name, as text.
pub type Fields = BTreeMap<String, String>;

#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub id: u64,
    pub name: &'static str,
    pub parent: Option<u64>,
    pub fields: Fields,
}

#[derive(Clone, Debug)]
pub struct EventRecord {
    pub level: Level,
    pub span: Option<u64>,
    pub fields: Fields,
}

impl EventRecord {
    pub fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

#[derive(Debug, Default)]
struct Log {
    spans: Vec<SpanRecord>,
    events: Vec<EventRecord>,
}

/// What a capturing dispatcher saw.
#[derive(Clone, Debug, Default)]
pub struct Captured(Arc<Mutex<Log>>);

impl Captured {
    /// A dispatcher that records into a new capture.
    pub fn dispatch() -> (tracing::Dispatch, Captured) {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::registry().with(Capture(captured.clone()));
        (tracing::Dispatch::new(subscriber), captured)
    }

    pub fn spans(&self, name: &str) -> Vec<SpanRecord> {
        let log = self.0.lock().unwrap();
        log.spans
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }

    pub fn events(&self, message: &str) -> Vec<EventRecord> {
        let log = self.0.lock().unwrap();
        log.events
            .iter()
            .filter(|e| e.message() == message)
            .cloned()
            .collect()
    }
}

struct Capture(Captured);

struct Visitor<'a>(&'a mut Fields);

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        attrs.record(&mut Visitor(&mut fields));
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.id().into_u64());
        self.0.0.lock().unwrap().spans.push(SpanRecord {
            id: id.into_u64(),
            name: attrs.metadata().name(),
            parent,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut log = self.0.0.lock().unwrap();
        if let Some(span) = log.spans.iter_mut().rev().find(|s| s.id == id.into_u64()) {
            values.record(&mut Visitor(&mut span.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::new();
        event.record(&mut Visitor(&mut fields));
        let span = ctx.event_span(event).map(|span| span.id().into_u64());
        self.0.0.lock().unwrap().events.push(EventRecord {
            level: *event.metadata().level(),
            span,
            fields,
        });
    }
}
