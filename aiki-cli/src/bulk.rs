//! The actions that take one run or many: `runs cancel|retry|requeue|resume`. One id acts at
//! once; filter flags or `--ids-from FILE` select many, and then the command is a dry run (each
//! run checked as the action would check it: the count and the ids it would act on, which `-o
//! json` prints as a file `--ids-from` accepts, and the runs it would skip, with why) unless
//! `--yes`, which acts on them (see [`outcomes`](crate::outcomes)).

use std::io::Write;

use aiki::{BulkAction, BulkCheck, Client, RunId};
use serde_json::{Value, json};

use crate::args::{ActArgs, Cli, Format};
use crate::output::{json, text};
use crate::runs::acted;
use crate::{EXIT_USAGE, Failure};

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
        if args.rate.is_some() {
            return Err(usage(
                "`--rate` paces an action on many runs: give filter flags or `--ids-from FILE`"
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
            action.verb()
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
            let filter = crate::filter::filter(client, &args.filter).await?;
            client.bulk_plan(action, filter, max).await?
        }
    };
    if !args.yes {
        let checked = client.bulk_check(action, &ids).await?;
        return dry_run(action, &checked, format, out);
    }
    let pace = args
        .rate
        .map(|rate| std::time::Duration::from_secs(1) / rate.get());
    crate::outcomes::execute(client, action, &ids, pace, format, out).await
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

/// Prints what `--yes` would do: the runs it would act on, and those it would skip with why.
fn dry_run(
    action: BulkAction,
    checked: &BulkCheck,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let verb = action.verb();
    let skipped: Vec<Value> = checked
        .skips
        .iter()
        .map(|(id, why)| json!({"id": id, "code": why.code(), "reason": why.to_string()}))
        .collect();
    match format {
        Format::Table => {
            writeln!(out, "would {verb} {} run(s):", checked.acts.len())?;
            for id in &checked.acts {
                writeln!(out, "  {id}")?;
            }
            if !checked.skips.is_empty() {
                writeln!(out, "would skip {} run(s):", checked.skips.len())?;
                for (id, why) in &checked.skips {
                    writeln!(out, "  {id}  {}", text(&why.to_string()))?;
                }
            }
            if checked.acts.is_empty() {
                writeln!(out, "nothing to {verb}")?;
            } else {
                writeln!(out, "nothing done: add --yes to {verb} them")?;
            }
        }
        _ => json(
            out,
            format,
            &json!({
                "action": verb,
                "dry_run": true,
                "count": checked.acts.len(),
                "ids": checked.acts,
                "skipped": skipped,
            }),
        )?,
    }
    Ok(0)
}
