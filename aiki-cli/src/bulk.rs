//! The actions that take one run or many: `runs cancel|retry|requeue|resume`. One id acts at
//! once; filter flags or `--ids-from FILE` select many, and then the command is a dry run (the
//! count and the ids, which `-o json` prints as a file `--ids-from` accepts) unless `--yes`.

use std::io::Write;

use aiki::{BulkAction, BulkOutcome, Client, RunId};
use serde_json::{Value, json};

use crate::args::{ActArgs, Cli, Format};
use crate::output::{Table, json};
use crate::runs::{acted, filter};
use crate::{EXIT_USAGE, Failure};

fn name(action: BulkAction) -> &'static str {
    match action {
        BulkAction::Cancel => "cancel",
        BulkAction::Retry(_) => "retry",
        BulkAction::Requeue => "requeue",
        BulkAction::Resume => "resume",
        _ => "act on",
    }
}

fn usage(message: String) -> Failure {
    Failure {
        message,
        code: EXIT_USAGE,
    }
}

pub(crate) async fn act(
    cli: &Cli,
    client: &Client,
    action: BulkAction,
    args: &ActArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let many = !args.filter.is_empty() || args.ids_from.is_some();
    if let Some(id) = args.id {
        if many {
            return Err(usage(
                "give one run id, or filter flags or `--ids-from FILE` for many runs, not both"
                    .to_owned(),
            ));
        }
        let run = client.any_run(id);
        let record = match action {
            BulkAction::Cancel => run.cancel().await?,
            BulkAction::Retry(options) => run.retry(options).await?,
            BulkAction::Requeue => run.requeue().await?,
            BulkAction::Resume => run.resume().await?,
            _ => return Err(Failure::error("this action takes no single run")),
        };
        acted(cli, record, format, out)?;
        return Ok(0);
    }
    if !many {
        return Err(usage(format!(
            "name the runs to {}: a run id, filter flags (as for `runs list`), or `--ids-from \
             FILE`",
            name(action)
        )));
    }
    if args.ids_from.is_some() && !args.filter.is_empty() {
        return Err(usage(
            "give filter flags or `--ids-from FILE`, not both".to_owned(),
        ));
    }
    let ids = match &args.ids_from {
        Some(path) => read_ids(path)?,
        None => {
            let max = usize::try_from(args.max).unwrap_or(usize::MAX);
            client.bulk_plan(action, filter(&args.filter), max).await?
        }
    };
    if !args.yes {
        return dry_run(action, &ids, format, out);
    }
    let outcomes = client.bulk(action, &ids).await;
    report(action, &outcomes, format, out)
}

/// The ids of a dry run's JSON (`{"ids": [...]}`), or one id per line.
fn read_ids(path: &std::path::Path) -> Result<Vec<RunId>, Failure> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|error| usage(format!("cannot read `{shown}`: {error}")))?;
    let words: Vec<String> = match serde_json::from_str::<Value>(&text) {
        Ok(document) => document["ids"]
            .as_array()
            .ok_or_else(|| usage(format!("`{shown}` is JSON without an `ids` array")))?
            .iter()
            .map(|id| {
                id.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| id.to_string())
            })
            .collect(),
        Err(_) => text.split_whitespace().map(str::to_owned).collect(),
    };
    words
        .iter()
        .map(|word| {
            word.parse()
                .map_err(|_| usage(format!("`{shown}` holds `{word}`, which is not a run id")))
        })
        .collect()
}

fn dry_run(
    action: BulkAction,
    ids: &[RunId],
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let verb = name(action);
    match format {
        Format::Table => {
            writeln!(out, "would {verb} {} run(s):", ids.len())?;
            for id in ids {
                writeln!(out, "  {id}")?;
            }
            writeln!(out, "nothing done: add --yes to {verb} them")?;
        }
        _ => json(
            out,
            format,
            &json!({"action": verb, "dry_run": true, "count": ids.len(), "ids": ids}),
        )?,
    }
    Ok(0)
}

fn report(
    action: BulkAction,
    outcomes: &[(RunId, BulkOutcome)],
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let mut rows = Vec::new();
    let (mut done, mut skipped, mut failed) = (0, 0, 0);
    for (id, outcome) in outcomes {
        let (word, detail) = match outcome {
            BulkOutcome::Done(run) => {
                done += 1;
                ("done", json!({"status": run.status}))
            }
            BulkOutcome::Skipped(error) => {
                skipped += 1;
                ("skipped", json!({"reason": error.to_string()}))
            }
            BulkOutcome::Failed(error) => {
                failed += 1;
                ("failed", json!({"error": error.to_string()}))
            }
            _ => ("unknown", Value::Null),
        };
        let mut row = json!({"id": id, "outcome": word});
        if let (Some(row), Some(detail)) = (row.as_object_mut(), detail.as_object()) {
            row.extend(detail.clone());
        }
        rows.push(row);
    }
    let verb = name(action);
    match format {
        Format::Table => {
            let mut table = Table::new(&["id", "outcome", "detail"]);
            for row in &rows {
                let detail = ["status", "reason", "error"]
                    .iter()
                    .find_map(|key| row[key].as_str())
                    .unwrap_or_default();
                table.row(vec![
                    row["id"].as_str().unwrap_or_default().to_owned(),
                    row["outcome"].as_str().unwrap_or_default().to_owned(),
                    detail.to_owned(),
                ]);
            }
            table.print(out)?;
            writeln!(
                out,
                "{verb}: {done} done, {skipped} skipped, {failed} failed"
            )?;
        }
        Format::Jsonl => {
            for row in &rows {
                json(out, format, row)?;
            }
        }
        Format::Json => json(
            out,
            format,
            &json!({"action": verb, "done": done, "skipped": skipped, "failed": failed,
                "results": rows}),
        )?,
    }
    Ok(if failed > 0 { crate::EXIT_ERROR } else { 0 })
}
