//! `aiki schedules …`: list, show, create and act on the schedules of a store, on the database
//! or through an aiki server. Bad input (a cron expression, a time zone, an interval, a range)
//! is refused before the store is opened; nothing is written then.

mod view;

use std::io::Write;
use std::time::Duration;

use aiki::ops::timestamp;
use aiki::store::schedule::check;
use aiki::store::{
    ClientStore, Millis, ScheduleActed, ScheduleAction, ScheduleCreated, ScheduleDefinition,
    ScheduleLogEntry, ScheduleLogKind, ScheduleOrigin, ScheduleRecord, ScheduleSpec, StoreError,
    UTC,
};
use aiki::{Client, ClientError};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::{BackfillArgs, Cli, CreateArgs, Format, SchedulesCommand};
use crate::output::{json, text};
use view::{next_cell, schedule_json};

pub(crate) async fn schedules(
    cli: &Cli,
    command: &SchedulesCommand,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    // Bad input is refused before the store is opened.
    let definition = match command {
        SchedulesCommand::Create(args) => Some(definition(args)?),
        SchedulesCommand::Backfill(args) if args.from > args.to => {
            return Err(Failure::usage(format!(
                "--from {} is after --to {}: give the earlier time as --from",
                timestamp(args.from),
                timestamp(args.to)
            )));
        }
        _ => None,
    };
    let client = crate::runs::client(cli).await?;
    let store = client.store().as_ref();
    let now = aiki::Clock::now(&aiki::SystemClock);
    match command {
        SchedulesCommand::List => view::list(cli, store, format, out).await?,
        SchedulesCommand::Show { name } => view::show(cli, store, name, now, format, out).await?,
        SchedulesCommand::Create(args) => {
            let definition = definition.expect("BUG: checked above");
            let created = create(cli, &client, args, definition, now).await?;
            match (&created, format) {
                (ScheduleCreated::Created(record), Format::Table) => {
                    let line = format!(
                        "created schedule `{}`: {}, runs of {}; next at {}",
                        record.name,
                        record.definition.spec,
                        record.definition.namespace,
                        next_cell(record)
                    );
                    writeln!(out, "{}", text(&line))?;
                }
                (ScheduleCreated::Existing(record), Format::Table) => writeln!(
                    out,
                    "schedule `{}` exists (same definition); nothing changed",
                    text(&record.name)
                )?,
                (created, _) => {
                    let outcome = match created {
                        ScheduleCreated::Created(_) => "created",
                        ScheduleCreated::Existing(_) => "existing",
                    };
                    let schedule = schedule_json(created.record(), cli.no_payloads);
                    json(
                        out,
                        format,
                        &json!({"outcome": outcome, "schedule": schedule}),
                    )?;
                }
            }
        }
        SchedulesCommand::Pause { name, reason } => {
            let reason = reason.clone();
            let acted = act(cli, store, name, ScheduleAction::Pause { reason }, now).await?;
            let said = |reason: &str| format!(" ({})", text(reason));
            let line = format!(
                "paused schedule `{name}`{}: nothing fires until `aiki schedules resume {name}`",
                acted_reason(&acted).map(said).unwrap_or_default()
            );
            acted_out(cli, &acted, &line, format, out)?;
        }
        SchedulesCommand::Resume { name } => {
            let acted = act(cli, store, name, ScheduleAction::Resume, now).await?;
            let line = format!(
                "resumed schedule `{name}`; next at {}",
                next_cell(&acted.schedule)
            );
            acted_out(cli, &acted, &line, format, out)?;
        }
        SchedulesCommand::Trigger { name } => {
            let acted = act(cli, store, name, ScheduleAction::Trigger, now).await?;
            let runs: Vec<String> = acted.runs.iter().map(ToString::to_string).collect();
            let line = format!(
                "triggered schedule `{name}`: started run {}",
                runs.join(", ")
            );
            acted_out(cli, &acted, &line, format, out)?;
        }
        SchedulesCommand::Backfill(args) => backfill(cli, store, args, now, format, out).await?,
        SchedulesCommand::Delete { name } => {
            let acted = act(cli, store, name, ScheduleAction::Delete, now).await?;
            let line = format!("deleted schedule `{name}` and its log; the runs it started stay");
            acted_out(cli, &acted, &line, format, out)?;
        }
    }
    Ok(0)
}

/// The definition `create` asks for, checked (its input hash is the catalog's business).
fn definition(args: &CreateArgs) -> Result<ScheduleDefinition, Failure> {
    let spec = match (&args.cron, args.every) {
        (Some(expression), None) => ScheduleSpec::Cron {
            expression: expression.clone(),
            timezone: args.timezone.clone().unwrap_or_else(|| UTC.to_owned()),
        },
        (None, Some(every)) => ScheduleSpec::Every {
            every_ms: millis(every),
        },
        (Some(_), Some(_)) => {
            return Err(Failure::usage(
                "give one of `--cron` and `--every`, not both",
            ));
        }
        (None, None) => {
            return Err(Failure::usage(
                "say when the schedule fires: give `--cron \"EXPR\"` (with `--timezone TZ`; UTC \
                 by default) or `--every DURATION` (e.g. --every 15m)",
            ));
        }
    };
    let definition = ScheduleDefinition {
        spec,
        namespace: args.workflow.clone(),
        input: args.input.clone(),
        input_hash: String::new(),
        pool: args.pool.clone(),
        overlap: args.overlap.unwrap_or_default(),
        catchup_window_ms: args.catchup.map(millis),
        jitter_ms: args.jitter.map_or(0, millis),
    };
    check(&args.name, &definition).map_err(invalid)?;
    Ok(definition)
}

/// Checks the workflow version and the input against the catalog as `runs start` does, hashes
/// the input as a start of it would (`Client::check_schedule_json`), and creates the schedule.
async fn create(
    cli: &Cli,
    client: &Client,
    args: &CreateArgs,
    definition: ScheduleDefinition,
    now: Millis,
) -> Result<ScheduleCreated, Failure> {
    let definition = client
        .check_schedule_json(definition)
        .await
        .map_err(|error| match error {
            ClientError::NotInCatalog { .. } | ClientError::InvalidInput { .. } => {
                Failure::usage(error)
            }
            other => Failure::from(other),
        })?;
    let record = ScheduleRecord::new(
        args.name.clone(),
        definition,
        ScheduleOrigin::Client,
        1,
        now,
    )
    .map_err(invalid)?;
    Ok(client
        .store()
        .create_schedule(record, Some(cli.actor()))
        .await?)
}

async fn backfill(
    cli: &Cli,
    store: &dyn ClientStore,
    args: &BackfillArgs,
    now: Millis,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let action = ScheduleAction::Backfill {
        from: args.from,
        to: args.to,
        overlap: args.overlap,
    };
    let acted = store
        .act_on_schedule(&args.name, action, Some(cli.actor()), now)
        .await
        // A range the store refuses (one holding too many occurrences) is bad input too.
        .map_err(|error| match error {
            StoreError::Invalid { message } => Failure::usage(message),
            other => unknown(&args.name, other),
        })?;
    let skipped: Vec<&ScheduleLogEntry> = acted
        .log
        .iter()
        .filter(|row| row.kind == ScheduleLogKind::Skipped)
        .collect();
    if format != Format::Table {
        let mut document = acted_json(&acted, cli.no_payloads);
        document["started"] = json!(acted.runs.len());
        document["skipped"] = json!(skipped.len());
        return json(out, format, &document);
    }
    writeln!(
        out,
        "backfilled schedule `{}` from {} to {}: started {} runs, skipped {}",
        args.name,
        timestamp(args.from),
        timestamp(args.to),
        acted.runs.len(),
        skipped.len()
    )?;
    for row in &acted.log {
        let at = row.nominal_at.map_or_else(|| "-".to_owned(), timestamp);
        match (row.kind, row.run_id) {
            (ScheduleLogKind::Skipped, _) => writeln!(
                out,
                "  {at}  skipped: {}",
                text(
                    row.reason
                        .as_deref()
                        .unwrap_or("the previous run has not ended")
                )
            )?,
            (kind, Some(run)) => writeln!(out, "  {at}  {}  {run}", kind.as_str())?,
            (kind, None) => writeln!(out, "  {at}  {}", kind.as_str())?,
        }
    }
    Ok(())
}

/// Applies `action` to the schedule `name`, as `--actor`.
async fn act(
    cli: &Cli,
    store: &dyn ClientStore,
    name: &str,
    action: ScheduleAction,
    now: Millis,
) -> Result<ScheduleActed, Failure> {
    store
        .act_on_schedule(name, action, Some(cli.actor()), now)
        .await
        .map_err(|error| unknown(name, error))
}

/// The reason of the status change an action wrote, if any.
fn acted_reason(acted: &ScheduleActed) -> Option<&str> {
    acted
        .log
        .iter()
        .find(|row| row.kind == ScheduleLogKind::Status)
        .and_then(|row| row.reason.as_deref())
        .filter(|reason| *reason != "paused")
}

/// Prints what an action did: `line` in a table, else the schedule, runs and log as JSON.
fn acted_out(
    cli: &Cli,
    acted: &ScheduleActed,
    line: &str,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    match format {
        Format::Table => writeln!(out, "{}", text(line))?,
        _ => json(out, format, &acted_json(acted, cli.no_payloads))?,
    }
    Ok(())
}

fn acted_json(acted: &ScheduleActed, no_payloads: bool) -> Value {
    json!({
        "schedule": schedule_json(&acted.schedule, no_payloads),
        "runs": acted.runs,
        "log": acted.log,
    })
}

/// The store's refusal of a definition as a usage error (its message says what to do).
fn invalid(error: StoreError) -> Failure {
    match error {
        StoreError::Invalid { message } => Failure::usage(message),
        other => Failure::from(other),
    }
}

/// An unknown schedule as a usage error naming where the known ones are.
fn unknown(name: &str, error: StoreError) -> Failure {
    match error {
        StoreError::NotFound { .. } => Failure::usage(format!(
            "there is no schedule named `{name}`: `aiki schedules list` lists them"
        )),
        other => Failure::from(other),
    }
}

fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}
