//! `aiki runs show`: one run, what it does, everything it has recorded, and who changed it.

use std::io::Write;

use aiki::ops::{RunView, runtime_name};
use aiki::{Client, RunId};
use aiki_store::StatusChange;
use serde_json::Value;

use crate::args::{Cli, Format};
use crate::output::{Table, json, relative, text};
use crate::{EXIT_USAGE, Failure};

pub(crate) async fn show(
    cli: &Cli,
    client: &Client,
    id: RunId,
    inputs: bool,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    if inputs && cli.no_payloads {
        return Err(Failure {
            message: "`--inputs` shows payloads and `--no-payloads` leaves them out: give one"
                .to_owned(),
            code: EXIT_USAGE,
        });
    }
    let view = RunView::read(client, id).await?;
    match format {
        Format::Table => table(cli, &view, inputs, out),
        _ => json(out, format, &view.to_json(!cli.no_payloads)),
    }
}

fn table(cli: &Cli, view: &RunView, inputs: bool, out: &mut impl Write) -> Result<(), Failure> {
    let run = &view.run;
    let mut line = |label: &str, value: String| writeln!(out, "{label:<9} {}", text(&value));
    line("run", run.id.to_string())?;
    line(
        "workflow",
        format!("{} (pool `{}`)", run.namespace, run.pool),
    )?;
    line(
        "status",
        format!(
            "{} (attempt {}, revision {})",
            run.status, run.attempts, run.revision
        ),
    )?;
    line("", view.doing.clone())?;
    line(
        "created",
        format!(
            "{}, last change {}",
            relative(run.created_at),
            relative(run.updated_at)
        ),
    )?;
    if let Some(reference_id) = &run.reference_id {
        line("reference", reference_id.clone())?;
    }
    if let Some(parent) = &run.parent {
        line(
            "parent",
            format!("{} (at {})", parent.run_id, parent.address),
        )?;
    }
    if let Some(error) = &run.error {
        line("error", format!("{}: {}", error.kind, error.message))?;
    }
    if !cli.no_payloads {
        line("input", run.input.to_string())?;
        if let Some(output) = &run.output {
            line("output", output.to_string())?;
        }
    }
    let mut tables = Vec::new();
    tables.push(entries(view, inputs));
    let (sleeps, timeouts) = timers(view);
    tables.extend([sleeps, timeouts, events(view), children(view)]);
    tables.push(timeline(&view.timeline));
    for table in tables.iter().filter(|table| !table.is_empty()) {
        writeln!(out)?;
        table.print(out)?;
    }
    Ok(())
}

/// The entries, each with its state: a child start's is its child run's status.
fn entries(view: &RunView, inputs: bool) -> Table {
    let mut headers = vec!["address", "index", "kind", "status", "attempts", "error"];
    if inputs {
        headers.push("input");
    }
    let mut table = Table::new(&headers);
    for entry in &view.entries {
        let mut row = vec![
            entry.address.clone(),
            entry.index.to_string(),
            name(&entry.kind),
            view.entry_state(entry),
            entry.attempts.to_string(),
            entry
                .error
                .as_ref()
                .map_or(String::new(), |e| format!("{}: {}", e.kind, e.message)),
        ];
        if inputs {
            row.push(match &entry.input {
                None => String::new(),
                Some(input) => match input.get("aiki_input_omitted_bytes") {
                    Some(bytes) => format!("(not recorded: {bytes} bytes)"),
                    None => input.to_string(),
                },
            });
        }
        table.row(row);
    }
    table
}

/// The workflow's durable sleeps, and apart from them the timeouts of its event and child
/// waits (timers the runtime names for itself).
fn timers(view: &RunView) -> (Table, Table) {
    let mut sleeps = Table::new(&["sleep", "index", "wakes", "cancelled"]);
    let mut timeouts = Table::new(&["wait timeout", "index", "times out", "cancelled"]);
    for sleep in &view.sleeps {
        let (table, label) = match runtime_name(&sleep.name) {
            Some(wait) => (&mut timeouts, format!("timeout of the wait on {wait}")),
            None => (&mut sleeps, sleep.name.clone()),
        };
        table.row(vec![
            label,
            sleep.index.to_string(),
            relative(sleep.wake_at),
            sleep.cancelled.to_string(),
        ]);
    }
    (sleeps, timeouts)
}

fn events(view: &RunView) -> Table {
    let mut table = Table::new(&["event", "index", "received", "timed out", "sent by"]);
    for event in &view.events {
        table.row(vec![
            event_label(&event.name),
            event.index.to_string(),
            relative(event.received_at),
            event.timed_out.to_string(),
            event.sent_by.clone().unwrap_or_default(),
        ]);
    }
    table
}

fn children(view: &RunView) -> Table {
    let mut table = Table::new(&["child", "workflow", "status"]);
    for child in &view.children {
        table.row(vec![
            child.id.to_string(),
            child.namespace.to_string(),
            child.status.to_string(),
        ]);
    }
    table
}

fn timeline(changes: &[StatusChange]) -> Table {
    let mut table = Table::new(&["revision", "when", "change", "reason", "by"]);
    for change in changes {
        let from = change.from.map_or("·".to_owned(), |from| from.to_string());
        table.row(vec![
            change.revision.to_string(),
            relative(change.at),
            format!("{from} → {}", change.to),
            change.reason.clone(),
            change.actor.clone().unwrap_or_default(),
        ]);
    }
    table
}

/// An event queue's name for people: the runtime's own queue of a child wait (its timeout, or
/// the child outcome the run recorded) says so.
fn event_label(name: &str) -> String {
    match aiki_store::Queue::parse(name) {
        aiki_store::Queue::ChildWait(address) => format!("(wait on child {address})"),
        _ => runtime_name(name).unwrap_or_else(|| name.to_owned()),
    }
}

/// How a value names itself in JSON (`awaiting_retry`), for a table.
fn name(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn child_wait_queues_are_named_for_people() {
        assert_eq!(super::event_label("approved"), "approved");
        assert_eq!(
            super::event_label("\u{1}child:ship:1:abc"),
            "(wait on child ship:1:abc)"
        );
    }
}
