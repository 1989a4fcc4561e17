//! `aiki runs …`: the dispatch, `runs list`, and the actions on one run.

use std::io::Write;
use std::time::Duration;

use aiki::{BulkAction, Client, MigrationMode, RetryOptions, RunRecord};
use serde_json::{Value, json};

use crate::args::{Cli, Format, ListArgs, RunsCommand};
use crate::output::{Table, json, relative, run_json};
use crate::{App, Failure};

/// How often a client looks at a run it waits for.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// A client on the store opened in check mode (it never migrates), acting as `--actor`.
pub(crate) async fn client(cli: &Cli) -> Result<Client, Failure> {
    let store = aiki::store::open(cli.url()?, MigrationMode::Check).await?;
    Ok(with_actor(cli, Client::new(store)))
}

/// `client` acting as `--actor`, polling at [`POLL`].
pub(crate) fn with_actor(cli: &Cli, client: Client) -> Client {
    client.with_poll_interval(POLL).with_actor(cli.actor())
}

pub(crate) async fn run(
    app: &App,
    cli: &Cli,
    command: &RunsCommand,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    if let RunsCommand::Result { id, timeout } = command {
        // It connects by itself, riding out a store that is down.
        return crate::result::result(cli, *id, *timeout, format, out).await;
    }
    if let RunsCommand::Purge(args) = command {
        // On the database itself, under a lease of its own.
        return crate::purge::purge(cli, args, format, out).await;
    }
    let client = client(cli).await?;
    match command {
        RunsCommand::List(args) => list(cli, &client, args, format, out).await?,
        RunsCommand::Show { id, inputs } => {
            crate::show::show(cli, &client, *id, *inputs, format, out).await?;
        }
        RunsCommand::Result { .. } | RunsCommand::Purge(_) => {
            unreachable!("BUG: handled above")
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
                    let (registry, _) = app.replaying(cli, "runs fork --version").await?;
                    aiki::impact::fork_onto(&registry, &run, version, options).await?
                }
            };
            match format {
                Format::Table => writeln!(out, "forked {id} as {} ({})", fork.id, fork.status)?,
                _ => json(out, format, &run_json(&fork, cli.no_payloads))?,
            }
        }
        RunsCommand::Pause { id } => {
            let run = client.any_run(*id).pause().await?;
            match (format, run.pause_requested_at) {
                (Format::Table, Some(_)) => writeln!(
                    out,
                    "{} is running: pause requested; its executor pauses it once the tasks in \
                     flight have finished",
                    run.id
                )?,
                _ => acted(cli, run, format, out)?,
            }
        }
        RunsCommand::Resume(args) => {
            return crate::bulk::act(cli, &client, BulkAction::Resume, args, format, out).await;
        }
        RunsCommand::Wake { id } => acted(cli, client.any_run(*id).wakeup().await?, format, out)?,
        RunsCommand::Requeue(args) => {
            return crate::bulk::act(cli, &client, BulkAction::Requeue, args, format, out).await;
        }
        RunsCommand::Release { id, force } => {
            acted(cli, client.any_run(*id).release(*force).await?, format, out)?;
        }
        RunsCommand::Start(args) => crate::send::start(cli, &client, args, format, out).await?,
        RunsCommand::Send(args) => crate::send::send(&client, args, format, out).await?,
    }
    Ok(0)
}

async fn list(
    cli: &Cli,
    client: &Client,
    args: &ListArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let filter = crate::filter::filter(client, &args.filter).await?;
    let page = client.list_runs(filter, args.after, args.limit).await?;
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
