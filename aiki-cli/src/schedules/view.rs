//! What `aiki schedules list` and `show` print: a line per schedule; one schedule's
//! definition, next occurrences and log.

use std::io::Write;

use aiki::ops::timestamp;
use aiki::store::schedule::{catchup_window, occurrences, words};
use aiki::store::{
    ClientStore, Millis, ScheduleLogKind, ScheduleOrigin, ScheduleRecord, ScheduleSpec,
    ScheduleStatus,
};
use serde_json::{Value, json};

use super::{invalid, unknown};
use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, text};

/// How many of the next occurrences `show` lists.
const NEXT: usize = 5;

/// How many rows of the log `show` lists (the latest).
const LOG_ROWS: u32 = 20;

pub(super) async fn list(
    cli: &Cli,
    store: &dyn ClientStore,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let schedules = store.schedules().await?;
    match format {
        Format::Table => {
            let mut table = Table::new(&[
                "name", "status", "spec", "workflow", "overlap", "catch-up", "next", "last run",
            ]);
            for record in &schedules {
                let definition = &record.definition;
                table.row(vec![
                    record.name.clone(),
                    record.status.as_str().to_owned(),
                    definition.spec.to_string(),
                    definition.namespace.to_string(),
                    definition.overlap.as_str().to_owned(),
                    catchup_words(record),
                    next_cell(record),
                    record
                        .last_run
                        .map_or_else(|| "-".to_owned(), |id| id.to_string()),
                ]);
            }
            table.print(out)?;
        }
        Format::Jsonl => {
            for record in &schedules {
                json(out, format, &schedule_json(record, cli.no_payloads))?;
            }
        }
        Format::Json => {
            let all: Vec<Value> = schedules
                .iter()
                .map(|record| schedule_json(record, cli.no_payloads))
                .collect();
            json(out, format, &Value::Array(all))?;
        }
    }
    Ok(())
}

pub(super) async fn show(
    cli: &Cli,
    store: &dyn ClientStore,
    name: &str,
    now: Millis,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let record = store
        .schedule(name)
        .await
        .map_err(|error| unknown(name, error))?;
    let log = store
        .schedule_log(name, LOG_ROWS)
        .await
        .map_err(|error| unknown(name, error))?;
    let next = match record.status {
        ScheduleStatus::Inactive => Vec::new(),
        _ => occurrences(&record, now, Millis::MAX, NEXT).map_err(invalid)?,
    };
    let window = catchup_window(&record, record.next_at.unwrap_or(now));
    if format != Format::Table {
        let document = json!({
            "schedule": schedule_json(&record, cli.no_payloads),
            "catchup_window_ms": window,
            "next": next,
            "log": log,
        });
        return json(out, format, &document);
    }
    let definition = &record.definition;
    let field =
        |out: &mut dyn Write, label: &str, value: &str| writeln!(out, "{label:<10}{}", text(value));
    field(out, "schedule", &record.name)?;
    let origin = match record.origin {
        ScheduleOrigin::Client => "created by a client",
        ScheduleOrigin::Code => "declared in code",
    };
    let status = format!(
        "{} (generation {}, {origin})",
        record.status.as_str(),
        record.generation
    );
    field(out, "status", &status)?;
    let spec = match &definition.spec {
        ScheduleSpec::Cron {
            expression,
            timezone,
        } => format!("cron `{expression}`, time zone {timezone}"),
        spec => spec.to_string(),
    };
    field(out, "spec", &spec)?;
    field(out, "workflow", &definition.namespace.to_string())?;
    if !cli.no_payloads {
        field(out, "input", &definition.input.to_string())?;
    }
    field(out, "pool", &definition.pool)?;
    field(out, "overlap", definition.overlap.as_str())?;
    let catchup = match definition.catchup_window_ms {
        Some(_) => words(window),
        None => format!("one interval (now {})", words(window)),
    };
    field(out, "catch-up", &catchup)?;
    let jitter = match definition.jitter_ms {
        0 => "none".to_owned(),
        ms => format!("up to {}", words(ms)),
    };
    field(out, "jitter", &jitter)?;
    field(out, "created", &timestamp(record.created_at))?;
    let last = match record.last_run {
        Some(id) => match store.get_run(id).await {
            Ok(run) => format!("{id} ({})", run.status),
            Err(_) => id.to_string(),
        },
        None => "none".to_owned(),
    };
    field(out, "last run", &last)?;
    match record.status {
        ScheduleStatus::Active if next.is_empty() => field(out, "next", "none")?,
        ScheduleStatus::Active => {
            // The sweep takes an occurrence at its time plus the jitter; a minute later it
            // should have.
            if let Some(due) = record.fire_at().filter(|due| due + 60_000 < now) {
                let overdue = format!(
                    "the occurrence at {} was due at {} and has not fired: is a process running \
                     the daemons (a worker, or `aiki server`) on this store?",
                    timestamp(record.next_at.unwrap_or(due)),
                    timestamp(due)
                );
                field(out, "overdue", &overdue)?;
            }
            for (i, at) in next.iter().enumerate() {
                field(out, if i == 0 { "next" } else { "" }, &timestamp(*at))?;
            }
        }
        ScheduleStatus::Paused => {
            let first = next.first().map_or("none".to_owned(), |at| timestamp(*at));
            field(
                out,
                "next",
                &format!("none while paused ({first} if resumed now)"),
            )?;
        }
        ScheduleStatus::Inactive => field(out, "next", "none (no longer declared in code)")?,
    }
    writeln!(out, "\nlog (the latest {LOG_ROWS} rows, oldest first):")?;
    let mut table = Table::new(&[
        "written", "kind", "nominal", "key", "run", "count", "last", "reason", "actor",
    ]);
    let time = |at: Option<Millis>| at.map_or_else(|| "-".to_owned(), timestamp);
    let or_dash = |text: Option<&str>| text.unwrap_or("-").to_owned();
    for row in &log {
        let kind = match (row.kind, row.status) {
            (ScheduleLogKind::Status, Some(status)) => format!("status: {}", status.as_str()),
            (kind, _) => kind.as_str().to_owned(),
        };
        // A gap of missed occurrences: how many, and the last (its first is the nominal time).
        let (count, last) = match row.kind {
            ScheduleLogKind::Missed => (row.count.to_string(), time(row.last_at)),
            _ => ("-".to_owned(), "-".to_owned()),
        };
        table.row(vec![
            timestamp(row.at),
            kind,
            time(row.nominal_at),
            row.key.clone(),
            row.run_id
                .map_or_else(|| "-".to_owned(), |id| id.to_string()),
            count,
            last,
            or_dash(row.reason.as_deref()),
            or_dash(row.actor.as_deref()),
        ]);
    }
    table.print(out)
}

/// A schedule as JSON, without its runs' input if payloads are left out.
pub(super) fn schedule_json(record: &ScheduleRecord, no_payloads: bool) -> Value {
    let mut value = serde_json::to_value(record).expect("BUG: schedules serialize");
    if no_payloads && let Some(definition) = value["definition"].as_object_mut() {
        definition.remove("input");
    }
    value
}

/// The next occurrence of an active schedule, in RFC 3339; `-` for one that does not fire.
pub(super) fn next_cell(record: &ScheduleRecord) -> String {
    match (record.status, record.next_at) {
        (ScheduleStatus::Active, Some(at)) => timestamp(at),
        (ScheduleStatus::Active, None) => "none".to_owned(),
        _ => "-".to_owned(),
    }
}

/// The catch-up window as defined: its length, or `one interval` by default.
fn catchup_words(record: &ScheduleRecord) -> String {
    record
        .definition
        .catchup_window_ms
        .map_or_else(|| "one interval".to_owned(), words)
}
