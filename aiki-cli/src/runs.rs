//! `aiki runs …`.

use std::io::Write;
use std::time::Duration;

use aiki::{BulkAction, Client, MigrationMode, RetryOptions, RunRecord, RunStatus};
use aiki_store::{History, RunFilter, StatusChange, TimeRange};
use serde_json::{Value, json};

use crate::args::{Cli, FilterArgs, Format, ListArgs, RunsCommand};
use crate::output::{Table, json, relative, run_json};
use crate::waits::doing;
use crate::{App, EXIT_CANCELLED, EXIT_FAILED, EXIT_TIMED_OUT, Failure};

/// Opens the store in check mode (it never migrates).
pub(crate) async fn client(cli: &Cli) -> Result<Client, Failure> {
    let store = aiki::connect_with_mode(cli.url()?, MigrationMode::Check).await?;
    Ok(Client::new(store).with_poll_interval(Duration::from_millis(100)))
}

pub(crate) async fn run(
    app: &App,
    cli: &Cli,
    command: &RunsCommand,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let client = client(cli).await?;
    match command {
        RunsCommand::List(args) => list(cli, &client, args, format, out).await?,
        RunsCommand::Show { id } => {
            let history = client.store().load_history(*id).await?;
            let timeline = client.store().timeline(*id).await?;
            let workers = crate::workers::live(&client).await?;
            show(cli, &history, &timeline, &workers, format, out)?;
        }
        RunsCommand::Result { id, timeout } => {
            return result(&client, *id, *timeout, format, out).await;
        }
        RunsCommand::Cancel(args) => {
            return crate::bulk::act(cli, &client, BulkAction::Cancel, args, format, out).await;
        }
        RunsCommand::Retry(args) => {
            let mut options = RetryOptions::default();
            if args.rerun_interrupted {
                options = options.rerun_interrupted();
            }
            if args.rerun_child {
                options = options.rerun_child();
            }
            if args.force {
                options = options.force();
            }
            if args.even_if_observed {
                options = options.even_if_observed();
            }
            let action = BulkAction::Retry(options);
            return crate::bulk::act(cli, &client, action, &args.act, format, out).await;
        }
        RunsCommand::Fork {
            id,
            drop,
            drop_from,
            version,
        } => {
            let mut options = aiki::ForkOptions::default();
            for address in drop {
                options = options.drop(address.clone());
            }
            if let Some(address) = drop_from {
                options = options.drop_from(address.clone());
            }
            let run = client.any_run(*id);
            let fork = match version {
                None => run.fork(options).await?,
                Some(version) => {
                    let worker = app.worker(cli, "runs fork --version").await?;
                    aiki::impact::fork_onto(&worker, &run, version, options).await?
                }
            };
            match format {
                Format::Table => writeln!(out, "forked {id} as {} ({})", fork.id, fork.status)?,
                _ => json(out, format, &run_json(&fork, cli.no_payloads))?,
            }
        }
        RunsCommand::Pause { id } => acted(cli, client.any_run(*id).pause().await?, format, out)?,
        RunsCommand::Resume(args) => {
            return crate::bulk::act(cli, &client, BulkAction::Resume, args, format, out).await;
        }
        RunsCommand::Wake { id } => acted(cli, client.any_run(*id).wakeup().await?, format, out)?,
        RunsCommand::Requeue(args) => {
            return crate::bulk::act(cli, &client, BulkAction::Requeue, args, format, out).await;
        }
        RunsCommand::Start(args) => crate::send::start(cli, &client, args, format, out).await?,
        RunsCommand::Send(args) => crate::send::send(&client, args, format, out).await?,
    }
    Ok(0)
}

/// The store's filter for the filter flags.
pub(crate) fn filter(args: &FilterArgs) -> RunFilter {
    let mut filter = RunFilter::default();
    filter.workflow = args.workflow.clone();
    filter.version = args.version.clone();
    filter.statuses = args.status.clone();
    filter.reference_id = args.reference_id.clone();
    filter.parent = args.parent;
    filter.pool = args.pool.clone();
    filter.error_kind = args.error_kind.clone();
    if let Some(since) = args.since {
        let now = aiki::Clock::now(&aiki::SystemClock);
        filter.created = TimeRange {
            from: Some(now.saturating_sub(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))),
            until: None,
        };
    }
    filter
}

async fn list(
    cli: &Cli,
    client: &Client,
    args: &ListArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let page = client
        .list_runs(filter(&args.filter), args.after, args.limit)
        .await?;
    let next = page.next.map(|cursor| cursor.to_string());
    match format {
        Format::Table => {
            let mut table = Table::new(&[
                "id", "workflow", "version", "status", "created", "updated", "error",
            ]);
            for run in &page.runs {
                table.row(vec![
                    run.id.to_string(),
                    run.namespace.workflow.clone(),
                    run.namespace.version.clone(),
                    run.status.to_string(),
                    relative(run.created_at),
                    relative(run.updated_at),
                    run.error.as_ref().map_or(String::new(), |e| e.kind.clone()),
                ]);
            }
            table.print(out)?;
            if let Some(next) = &next {
                writeln!(out, "next page: --after {next}")?;
            }
        }
        Format::Json => {
            let runs: Vec<Value> = page
                .runs
                .iter()
                .map(|run| run_json(run, cli.no_payloads))
                .collect();
            json(out, format, &json!({ "runs": runs, "next": next }))?;
        }
        Format::Jsonl => {
            for run in &page.runs {
                json(out, format, &run_json(run, cli.no_payloads))?;
            }
            if let Some(next) = next {
                json(out, format, &json!({ "next": next }))?;
            }
        }
    }
    Ok(())
}

fn show(
    cli: &Cli,
    history: &History,
    timeline: &[StatusChange],
    workers: &[aiki_store::WorkerRecord],
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let run = &history.run;
    if format != Format::Table {
        let mut entries = serde_json::to_value(&history.entries)?;
        let mut events = serde_json::to_value(&history.events)?;
        if cli.no_payloads {
            for entry in entries.as_array_mut().into_iter().flatten() {
                entry.as_object_mut().map(|o| o.remove("output"));
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
        let document = json!({
            "run": run_json(run, cli.no_payloads),
            "doing": doing(history, workers),
            "serving_workers": workers
                .iter()
                .filter(|worker| worker.serves(&run.namespace, &run.pool))
                .map(|worker| worker.id.as_str())
                .collect::<Vec<_>>(),
            "entries": entries,
            "sleeps": history.sleeps,
            "events": events,
            "children": children,
            "timeline": timeline,
        });
        return json(out, format, &document);
    }
    writeln!(out, "run       {}", run.id)?;
    writeln!(out, "workflow  {} (pool `{}`)", run.namespace, run.pool)?;
    writeln!(
        out,
        "status    {} (attempt {}, revision {})",
        run.status, run.attempts, run.revision
    )?;
    writeln!(out, "          {}", doing(history, workers))?;
    writeln!(
        out,
        "created   {}, last change {}",
        relative(run.created_at),
        relative(run.updated_at)
    )?;
    if let Some(reference_id) = &run.reference_id {
        writeln!(out, "reference {reference_id}")?;
    }
    if let Some(parent) = &run.parent {
        writeln!(out, "parent    {} (at {})", parent.run_id, parent.address)?;
    }
    if let Some(error) = &run.error {
        writeln!(out, "error     {}: {}", error.kind, error.message)?;
    }
    if !cli.no_payloads {
        writeln!(out, "input     {}", run.input)?;
        if let Some(output) = &run.output {
            writeln!(out, "output    {output}")?;
        }
    }
    if !history.entries.is_empty() {
        writeln!(out)?;
        let mut table = Table::new(&["address", "index", "kind", "status", "attempts", "error"]);
        for entry in &history.entries {
            table.row(vec![
                entry.address.clone(),
                entry.index.to_string(),
                name(&entry.kind),
                name(&entry.status),
                entry.attempts.to_string(),
                entry
                    .error
                    .as_ref()
                    .map_or(String::new(), |e| format!("{}: {}", e.kind, e.message)),
            ]);
        }
        table.print(out)?;
    }
    if !history.sleeps.is_empty() {
        writeln!(out)?;
        let mut table = Table::new(&["sleep", "index", "wakes", "cancelled"]);
        for sleep in &history.sleeps {
            table.row(vec![
                sleep.name.clone(),
                sleep.index.to_string(),
                relative(sleep.wake_at),
                sleep.cancelled.to_string(),
            ]);
        }
        table.print(out)?;
    }
    if !history.events.is_empty() {
        writeln!(out)?;
        let mut table = Table::new(&["event", "index", "received", "timed out"]);
        for event in &history.events {
            table.row(vec![
                event_label(&event.name),
                event.index.to_string(),
                relative(event.received_at),
                event.timed_out.to_string(),
            ]);
        }
        table.print(out)?;
    }
    if !history.children.is_empty() {
        writeln!(out)?;
        let mut table = Table::new(&["child", "workflow", "status"]);
        for child in &history.children {
            table.row(vec![
                child.id.to_string(),
                child.namespace.to_string(),
                child.status.to_string(),
            ]);
        }
        table.print(out)?;
    }
    if !timeline.is_empty() {
        writeln!(out)?;
        let mut table = Table::new(&["revision", "when", "change", "reason", "by"]);
        for change in timeline {
            let from = change.from.map_or("·".to_owned(), |from| from.to_string());
            table.row(vec![
                change.revision.to_string(),
                relative(change.at),
                format!("{from} → {}", change.to),
                change.reason.clone(),
                change.actor.clone().unwrap_or_default(),
            ]);
        }
        table.print(out)?;
    }
    Ok(())
}

/// An event queue's name for people: the runtime's own queue of a child wait (its timeout, or
/// the child outcome the run recorded) says so.
fn event_label(name: &str) -> String {
    match name.strip_prefix("\u{1}child:") {
        Some(address) => format!("(wait on child {address})"),
        None => name.to_owned(),
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

/// Prints a run after an action.
pub(crate) fn acted(
    cli: &Cli,
    run: RunRecord,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    match format {
        Format::Table => writeln!(out, "{} is now {}", run.id, run.status)?,
        _ => json(out, format, &run_json(&run, cli.no_payloads))?,
    }
    Ok(())
}

async fn result(
    client: &Client,
    id: aiki::RunId,
    timeout: Option<Duration>,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let run = client.any_run(id);
    let wait = async { Ok::<RunRecord, Failure>(run.wait_until_ended().await?) };
    let record = match timeout {
        Some(limit) => match tokio::time::timeout(limit, wait).await {
            Ok(record) => record?,
            Err(_) => {
                let status = run.record().await?.status;
                return Err(Failure {
                    message: format!("run {id} is still `{status}` after {limit:?}"),
                    code: EXIT_TIMED_OUT,
                });
            }
        },
        None => wait.await?,
    };
    match record.status {
        RunStatus::Completed => {
            let output = record.output.clone().unwrap_or(Value::Null);
            match format {
                Format::Table => writeln!(out, "{output}")?,
                _ => json(out, format, &output)?,
            }
            Ok(0)
        }
        status => {
            let why = record
                .error
                .as_ref()
                .map_or(String::new(), |e| format!(": {}: {}", e.kind, e.message));
            Err(Failure {
                message: format!("run {id} ended `{status}`{why}"),
                code: if status == RunStatus::Cancelled {
                    EXIT_CANCELLED
                } else {
                    EXIT_FAILED
                },
            })
        }
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
