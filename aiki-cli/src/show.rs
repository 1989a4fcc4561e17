//! `aiki runs show`: one run, what it does, everything it has recorded, and who changed it.

use std::io::Write;

use aiki::{Client, RetryPlan, RunId, RunStatus};
use aiki_store::{EntryRecord, History, StatusChange, WorkerRecord};
use serde_json::{Value, json};

use crate::args::{Cli, Format};
use crate::output::{Table, json, relative, run_json, text};
use crate::waits::{Seen, doing, retry_command, runtime_name};
use crate::{EXIT_USAGE, Failure};

/// How far back the heartbeats of a run's owner are looked for: as far as a worker's record is
/// kept.
const WORKERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// What `runs show` reads.
struct Shown {
    history: History,
    timeline: Vec<StatusChange>,
    workers: Vec<WorkerRecord>,
    plan: Option<RetryPlan>,
    now: aiki::Millis,
}

impl Shown {
    fn seen(&self) -> Seen<'_> {
        Seen {
            workers: &self.workers,
            plan: self.plan.as_ref(),
            now: self.now,
        }
    }
}

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
    let history = client.store().load_history(id).await?;
    let plan = match history.run.status {
        // A run that moved on meanwhile has no plan: the line then says the plain command.
        RunStatus::Failed => client.any_run(id).retry_plan().await.ok(),
        _ => None,
    };
    let shown = Shown {
        timeline: client.store().timeline(id).await?,
        workers: client.live_workers(WORKERS_WITHIN).await?,
        history,
        plan,
        now: aiki::Clock::now(&aiki::SystemClock),
    };
    match format {
        Format::Table => table(cli, &shown, inputs, out),
        _ => json(out, format, &document(cli, &shown)?),
    }
}

/// The JSON document: the store's records as they are (names included), and what the run
/// does in words.
fn document(cli: &Cli, shown: &Shown) -> Result<Value, Failure> {
    let history = &shown.history;
    let run = &history.run;
    let mut entries = serde_json::to_value(&history.entries)?;
    let mut events = serde_json::to_value(&history.events)?;
    if cli.no_payloads {
        for entry in entries.as_array_mut().into_iter().flatten() {
            if let Some(entry) = entry.as_object_mut() {
                entry.remove("output");
                entry.remove("input");
            }
        }
        for event in events.as_array_mut().into_iter().flatten() {
            event.as_object_mut().map(|o| o.remove("data"));
        }
    }
    let children: Vec<Value> = history
        .children
        .iter()
        .map(|child| run_json(child, cli.no_payloads))
        .collect();
    let seen = shown.seen();
    Ok(json!({
        "run": run_json(run, cli.no_payloads),
        "doing": doing(history, &seen),
        "retry_command": shown.plan.as_ref().and_then(|plan| retry_command(run.id, plan).ok()),
        "serving_workers": seen.serving(run).collect::<Vec<_>>(),
        "entries": entries,
        "sleeps": history.sleeps,
        "events": events,
        "children": children,
        "timeline": shown.timeline,
    }))
}

fn table(cli: &Cli, shown: &Shown, inputs: bool, out: &mut impl Write) -> Result<(), Failure> {
    let history = &shown.history;
    let run = &history.run;
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
    line("", doing(history, &shown.seen()))?;
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
    tables.push(entries(&history.entries, inputs));
    let (sleeps, timeouts) = timers(history);
    tables.extend([sleeps, timeouts, events(history), children(history)]);
    tables.push(timeline(&shown.timeline));
    for table in tables.iter().filter(|table| !table.is_empty()) {
        writeln!(out)?;
        table.print(out)?;
    }
    Ok(())
}

fn entries(entries: &[EntryRecord], inputs: bool) -> Table {
    let mut headers = vec!["address", "index", "kind", "status", "attempts", "error"];
    if inputs {
        headers.push("input");
    }
    let mut table = Table::new(&headers);
    for entry in entries {
        let mut row = vec![
            entry.address.clone(),
            entry.index.to_string(),
            name(&entry.kind),
            name(&entry.status),
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
fn timers(history: &History) -> (Table, Table) {
    let mut sleeps = Table::new(&["sleep", "index", "wakes", "cancelled"]);
    let mut timeouts = Table::new(&["wait timeout", "index", "times out", "cancelled"]);
    for sleep in &history.sleeps {
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

fn events(history: &History) -> Table {
    let mut table = Table::new(&["event", "index", "received", "timed out", "sent by"]);
    for event in &history.events {
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

fn children(history: &History) -> Table {
    let mut table = Table::new(&["child", "workflow", "status"]);
    for child in &history.children {
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
    match name.strip_prefix("\u{1}child:") {
        Some(address) => format!("(wait on child {address})"),
        None => runtime_name(name).unwrap_or_else(|| name.to_owned()),
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
