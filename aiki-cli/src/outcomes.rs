//! A bulk action executed (`--yes`): each run's outcome printed as it happens (a table row, or
//! a JSON line), a Ctrl-C that stops it cleanly between runs (the runs in flight finish, no
//! other starts), a store that refuses every write reported once, and always a summary of how
//! many runs were done, skipped, failed and not attempted. An action that did nothing (every
//! run skipped, or none selected) exits non-zero.

use std::io::Write;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aiki::{BulkAction, BulkOutcome, Client, RunId};
use serde_json::{Value, json};

use crate::args::Format;
use crate::failure::is_broken_pipe;
use crate::output::{json, text};
use crate::{EXIT_ERROR, EXIT_INTERRUPTED, Failure};

/// The detail of a run stopped by a store failure that is not its own: the failure is said
/// once, at the end.
const SEE_BELOW: &str = "the store refused (see the error at the end)";

/// The counts so far, and why the action stopped early.
#[derive(Default)]
struct Tally {
    done: usize,
    skipped: usize,
    failed: usize,
    /// The first failure that is not a run's own.
    fatal: Option<String>,
    /// Standard output could not be written any more.
    output: Option<Failure>,
    /// The JSON rows, for `-o json`'s one document.
    rows: Vec<Value>,
}

/// Acts on `ids`, printing each outcome as it comes, then the summary. Exit code 0 when every
/// run was done or skipped and at least one was done, [`EXIT_INTERRUPTED`] after a Ctrl-C,
/// [`EXIT_ERROR`] when a run failed, the store refused the action (said once, on standard
/// error), or nothing was done.
pub(crate) async fn execute(
    client: &Client,
    action: BulkAction,
    ids: &[RunId],
    pace: Option<Duration>,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let verb = action.verb();
    let interrupted = AtomicBool::new(false);
    let stop = async {
        match tokio::signal::ctrl_c().await {
            Ok(()) => interrupted.store(true, Ordering::SeqCst),
            // No signal to listen to: nothing stops it but the end of the list.
            Err(_) => std::future::pending().await,
        }
    };
    let mut tally = Tally::default();
    if format == Format::Table {
        write_line(
            out,
            &mut tally,
            format_args!("{}", table_row("ID", "OUTCOME", "DETAIL")),
        );
    }
    let left = client
        .bulk_each(action, ids, pace, stop, |id, outcome| {
            let row = tally.count(id, &outcome);
            match format {
                Format::Json => tally.rows.push(row),
                Format::Jsonl => write_line(out, &mut tally, format_args!("{row}")),
                Format::Table => {
                    let detail = ["status", "reason", "error"]
                        .iter()
                        .find_map(|key| row[key].as_str())
                        .unwrap_or_default();
                    let outcome = row["outcome"].as_str().unwrap_or_default();
                    let line = table_row(&id.to_string(), outcome, &text(detail));
                    write_line(out, &mut tally, format_args!("{line}"));
                }
            }
            if tally.output.is_some() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await;
    let interrupted = interrupted.load(Ordering::SeqCst);
    let not_attempted = left.len();
    if let Some(failure) = tally.output {
        // Nobody reads the outcomes any more: the action stopped, and standard error says so.
        let cause = if failure.is_reader_gone() {
            "standard output was closed".to_owned()
        } else {
            format!("standard output failed ({})", failure.message)
        };
        return Err(Failure::error(format!(
            "{cause}: {verb} stopped with {} done, {} skipped, {} failed, {not_attempted} not \
             attempted",
            tally.done, tally.skipped, tally.failed
        )));
    }
    let summary = json!({
        "action": verb,
        "done": tally.done,
        "skipped": tally.skipped,
        "failed": tally.failed,
        "not_attempted": not_attempted,
        "interrupted": interrupted,
        "error": tally.fatal,
    });
    match format {
        Format::Table => {
            let why = match (&tally.fatal, interrupted) {
                (Some(_), _) => " (stopped at a failure of the store, below)",
                (None, true) => " (interrupted)",
                (None, false) => "",
            };
            writeln!(
                out,
                "{verb}: {} done, {} skipped, {} failed, {not_attempted} not attempted{why}",
                tally.done, tally.skipped, tally.failed
            )?;
        }
        Format::Jsonl => json(out, format, &summary)?,
        Format::Json => {
            let mut document = summary;
            document["results"] = Value::Array(std::mem::take(&mut tally.rows));
            json(out, format, &document)?;
        }
    }
    out.flush()?;
    if let Some(error) = tally.fatal {
        return Err(Failure::error(format!(
            "{verb} stopped at the first failure that is not a run's own (every other run would \
             fail the same way), {not_attempted} run(s) not attempted: {error}"
        )));
    }
    if interrupted {
        return Err(Failure {
            message: format!(
                "interrupted: {not_attempted} run(s) not attempted; the outcomes printed are \
                 what was done"
            ),
            code: EXIT_INTERRUPTED,
        });
    }
    if tally.failed > 0 {
        return Err(Failure {
            message: format!(
                "{} run(s) failed (their errors are above); they may be tried again",
                tally.failed
            ),
            code: EXIT_ERROR,
        });
    }
    if tally.done == 0 {
        return Err(Failure::error(if ids.is_empty() {
            format!("nothing done: no run was selected to {verb}")
        } else {
            format!(
                "nothing done: every run selected ({}) was skipped; the reasons are above",
                tally.skipped
            )
        }));
    }
    Ok(0)
}

impl Tally {
    /// Counts an outcome; its JSON row (`{"id", "outcome", "status" | "reason" | "error"}`).
    fn count(&mut self, id: RunId, outcome: &BulkOutcome) -> Value {
        let (word, key, detail) = match outcome {
            BulkOutcome::Done(run) => {
                self.done += 1;
                ("done", "status", run.status.to_string())
            }
            BulkOutcome::Skipped(error) => {
                self.skipped += 1;
                ("skipped", "reason", error.to_string())
            }
            BulkOutcome::Failed(error) if outcome.is_fatal() => {
                self.failed += 1;
                self.fatal.get_or_insert_with(|| error.to_string());
                ("failed", "error", SEE_BELOW.to_owned())
            }
            BulkOutcome::Failed(error) => {
                self.failed += 1;
                ("failed", "error", error.to_string())
            }
            _ => {
                self.failed += 1;
                (
                    "failed",
                    "error",
                    "an outcome this release does not know".to_owned(),
                )
            }
        };
        json!({"id": id, "outcome": word, key: detail})
    }
}

/// Writes one line at once (so that an interruption loses none); a failure to write is kept
/// in the tally, which stops the action.
fn write_line(out: &mut impl Write, tally: &mut Tally, line: std::fmt::Arguments<'_>) {
    if tally.output.is_some() {
        return;
    }
    if let Err(error) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        tally.output = Some(if is_broken_pipe(&error) {
            Failure::reader_gone()
        } else {
            Failure::error(error)
        });
    }
}

/// A table row of fixed widths: a run id is 36 characters, an outcome at most 7.
fn table_row(id: &str, outcome: &str, detail: &str) -> String {
    format!("{id:<36}  {outcome:<7}  {detail}")
        .trim_end()
        .to_owned()
}
