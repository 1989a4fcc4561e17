//! The command line.

use std::io::IsTerminal;
use std::time::Duration;

use aiki::{RunId, RunStatus};
use aiki_store::RunCursor;
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::Value;

use crate::Failure;

/// List, inspect and operate the runs of an Aiki store.
#[derive(Debug, Parser)]
#[command(name = "aiki", version, about)]
pub struct Cli {
    /// The store: `sqlite://FILE`, `postgres://…` or `memory:`.
    #[arg(long, env = "AIKI_URL", global = true)]
    pub url: Option<String>,
    /// Output: `table` (the default on a terminal), `json` (the default otherwise) or `jsonl`.
    #[arg(short = 'o', long = "output", global = true)]
    pub output: Option<Format>,
    /// Leave inputs, outputs and event data out.
    #[arg(long, global = true)]
    pub no_payloads: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The store's URL.
    pub(crate) fn url(&self) -> Result<&str, Failure> {
        self.url.as_deref().ok_or_else(|| Failure {
            message: "no store named: give `--url URL` or set `AIKI_URL`".to_owned(),
            code: crate::EXIT_USAGE,
        })
    }

    /// The output format asked for, or the default for where standard output goes.
    pub(crate) fn format(&self) -> Format {
        self.output.unwrap_or(if std::io::stdout().is_terminal() {
            Format::Table
        } else {
            Format::Json
        })
    }
}

/// How results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// One JSON document.
    Json,
    /// One JSON object per line.
    Jsonl,
}

/// The commands.
#[derive(Debug, Subcommand)]
// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Runs: list, show, wait for a result, act on one.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// The workflow versions that have runs, with their counts by status.
    Workflows,
    /// The workers seen in the last two minutes: host, pid, pool, what they serve.
    Workers,
    /// Applies pending migrations to the store's schema.
    Migrate,
    /// The pre-deploy impact report: replays every run that has not ended against the
    /// workflows compiled into this binary, writing nothing, and says which would break
    /// (exit 6) — from a binary of your own built with `aiki_cli::App::workflows`.
    Check(CheckArgs),
}

/// `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Only runs of this workflow.
    #[arg(long)]
    pub workflow: Option<String>,
    /// Only runs of this version (with `--workflow`).
    #[arg(long)]
    pub version: Option<String>,
    /// Only runs of this worker pool.
    #[arg(long)]
    pub pool: Option<String>,
    /// Also failed runs that failed within this long (`30s`, `5m`, `2h`, `1d`): what `runs
    /// retry` would revive.
    #[arg(long, value_parser = parse_duration)]
    pub failed_within: Option<Duration>,
    /// Also fail (exit 6) on: `new-work`, `sleep-changes`, `blind` (a wait the check cannot
    /// see past), `other-services` (runs of workflows this build does not register); repeat,
    /// or separate with commas.
    #[arg(long, value_delimiter = ',')]
    pub deny: Vec<Deny>,
    /// At most this many runs.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max: Option<u32>,
}

/// What else fails the check's gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Deny {
    /// A run that would start work with nothing recorded for it.
    NewWork,
    /// A sleep asked for with another duration than recorded.
    SleepChanges,
    /// A wait the check could not look past.
    Blind,
    /// Runs of workflows this build does not register.
    OtherServices,
}

impl Deny {
    /// The flag's value.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Deny::NewWork => "new-work",
            Deny::SleepChanges => "sleep-changes",
            Deny::Blind => "blind",
            Deny::OtherServices => "other-services",
        }
    }
}

/// What to do with runs.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Lists runs, newest first, one page at a time.
    List(ListArgs),
    /// Shows one run: its record, manifest entries, sleeps, events and child runs.
    Show {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Waits for a run to end; prints its output (exit 0), or says how it ended (3 failed, 4
    /// cancelled, 5 not ended within `--timeout`).
    Result {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
        /// How long to wait (`30s`, `5m`, `2h`, `1d`); without it, as long as it takes.
        #[arg(long, value_parser = parse_duration)]
        timeout: Option<Duration>,
    },
    /// Cancels a run and the child runs it started that have not ended; or, with filter flags
    /// or `--ids-from`, many runs (a dry run unless `--yes`).
    Cancel(ActArgs),
    /// Moves a failed run back to delivery after a fix: its recorded entries replay, the task
    /// call whose unhandled failure failed it runs again; or, with filter flags or `--ids-from`,
    /// many runs (a dry run unless `--yes`).
    Retry(RetryArgs),
    /// Starts a new run of the same version from an ended one, carrying its completed tasks,
    /// ended children, sleeps and received events; failed calls run again.
    Fork {
        /// The ended run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
        /// Run the entries at this address again (repeat for several).
        #[arg(long, value_name = "ADDRESS")]
        drop: Vec<String>,
        /// Run the entries at this address, and everything recorded from them on, again.
        #[arg(long, value_name = "ADDRESS")]
        drop_from: Option<String>,
        /// Fork onto this version of the workflow, after checking that what the fork carries
        /// replays on its code (from a binary built with `aiki_cli::App::workflows`).
        #[arg(long)]
        version: Option<String>,
    },
    /// Pauses a run.
    Pause {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Resumes a paused run; or, with filter flags or `--ids-from`, many (a dry run unless
    /// `--yes`).
    Resume(ActArgs),
    /// Ends a sleeping run's sleep now (the sleep returns `cancelled`).
    Wake {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Puts a stalled run back into delivery; or, with filter flags or `--ids-from`, many (a
    /// dry run unless `--yes`).
    Requeue(ActArgs),
    /// Starts a run from JSON; the input is checked against the schema the version's workers
    /// published in the catalog, as the typed API checks it.
    Start(StartArgs),
    /// Sends an event to a run; the payload is checked against the schema the run's version
    /// declares for it in the catalog.
    Send(SendArgs),
}

/// `runs start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The workflow version, `NAME@VERSION` (`NAME` alone when the catalog has one version of
    /// it).
    #[arg(value_parser = parse_workflow)]
    pub workflow: WorkflowArg,
    /// The input: JSON, or `@FILE` to read it from a file.
    #[arg(long, value_parser = parse_json, default_value = "null")]
    pub input: Value,
    /// An idempotency key: a second start with it returns the first run.
    #[arg(long)]
    pub reference_id: Option<String>,
    /// The worker pool to run it in.
    #[arg(long, default_value = "default")]
    pub pool: String,
}

/// `runs send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// The run's id.
    #[arg(value_parser = parse_run_id)]
    pub id: RunId,
    /// The event's name.
    pub event: String,
    /// The payload: JSON, or `@FILE` to read it from a file.
    #[arg(long, value_parser = parse_json, default_value = "null")]
    pub payload: Value,
    /// An idempotency key: a second send with it (to this run, for this event) is dropped.
    #[arg(long)]
    pub reference_id: Option<String>,
}

/// A workflow named on the command line: its name, and its version if given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowArg {
    /// The workflow's name.
    pub name: String,
    /// Its version, if given.
    pub version: Option<String>,
}

/// The page of `runs list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Which runs.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Runs per page (at most 1000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// The page after this cursor (printed with the previous page).
    #[arg(long)]
    pub after: Option<RunCursor>,
}

/// One run by id, or many: by the filters of `runs list`, or from a dry run's list.
#[derive(Debug, Args)]
pub struct ActArgs {
    /// The run's id (or use filter flags, or `--ids-from`, for many runs).
    #[arg(value_parser = parse_run_id)]
    pub id: Option<RunId>,
    /// Which runs, for many.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// The runs listed in this file: a dry run's `-o json` output, or one id per line.
    #[arg(long, value_name = "FILE")]
    pub ids_from: Option<std::path::PathBuf>,
    /// At most this many runs from the filter.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max: u32,
    /// Act on many runs; without it, only list the runs the action would apply to.
    #[arg(long)]
    pub yes: bool,
}

/// `runs retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// Which runs.
    #[command(flatten)]
    pub act: ActArgs,
    /// Also run again a task interrupted under an at-most-once (`never`) retry policy: it may
    /// have had its effect before its executor stopped.
    #[arg(long)]
    pub rerun_interrupted: bool,
    /// Also retry a child run whose parent has already acted on its end.
    #[arg(long)]
    pub even_if_observed: bool,
    /// For a run failed by a failed child run: retry that child with it (the same child run),
    /// in one atomic step, so that the run waits for it again instead of replaying its failure.
    #[arg(long)]
    pub rerun_child: bool,
    /// Retry even a run whose retry would replay the same failure (a child's recorded
    /// failure): for code that now handles it.
    #[arg(long)]
    pub force: bool,
}

/// The filters of `runs list` and the bulk actions.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Runs of this workflow.
    #[arg(long)]
    pub workflow: Option<String>,
    /// Runs of this version (with `--workflow`).
    #[arg(long)]
    pub version: Option<String>,
    /// Runs in this status (repeat, or separate with commas, for several).
    #[arg(long, value_delimiter = ',')]
    pub status: Vec<RunStatus>,
    /// The run with this reference id.
    #[arg(long)]
    pub reference_id: Option<String>,
    /// Child runs of this run.
    #[arg(long, value_parser = parse_run_id)]
    pub parent: Option<RunId>,
    /// Runs of this worker pool.
    #[arg(long)]
    pub pool: Option<String>,
    /// Runs whose error is of this kind (`task_failed`, `non_determinism`, ...).
    #[arg(long)]
    pub error_kind: Option<String>,
    /// Runs created within this long (`30s`, `5m`, `2h`, `1d`).
    #[arg(long, value_parser = parse_duration)]
    pub since: Option<Duration>,
}

impl FilterArgs {
    /// Whether any filter is given.
    pub(crate) fn is_empty(&self) -> bool {
        self.workflow.is_none()
            && self.version.is_none()
            && self.status.is_empty()
            && self.reference_id.is_none()
            && self.parent.is_none()
            && self.pool.is_none()
            && self.error_kind.is_none()
            && self.since.is_none()
    }
}

/// A run id: a UUID.
fn parse_run_id(text: &str) -> Result<RunId, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not a run id (a UUID such as 1b4e28ba-2fa1-41d2-883f-0016d3cca427)")
    })
}

/// `NAME@VERSION` or `NAME`.
fn parse_workflow(text: &str) -> Result<WorkflowArg, String> {
    let bad = || format!("`{text}` is not a workflow version such as order-processing@1.0.0");
    let (name, version) = match text.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (text, None),
    };
    if name.is_empty() || version.is_some_and(|v| v.is_empty() || v.contains('@')) {
        return Err(bad());
    }
    Ok(WorkflowArg {
        name: name.to_owned(),
        version: version.map(str::to_owned),
    })
}

/// JSON, or `@FILE` naming a file of JSON.
fn parse_json(text: &str) -> Result<Value, String> {
    let (source, json) = match text.strip_prefix('@') {
        Some(path) => (
            format!("file `{path}`"),
            std::fs::read_to_string(path).map_err(|e| format!("cannot read `{path}`: {e}"))?,
        ),
        None => (format!("`{text}`"), text.to_owned()),
    };
    serde_json::from_str(&json).map_err(|e| format!("{source} is not JSON: {e}"))
}

/// `30s`, `5m`, `2h`, `1d` (a number and a unit).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration such as 30s, 5m, 2h or 1d");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    // At most a century: further back than any run, and far from overflowing.
    number
        .checked_mul(seconds)
        .filter(|seconds| *seconds <= 100 * 365 * 86_400)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflows_are_a_name_and_maybe_a_version() {
        assert_eq!(
            parse_workflow("orders@1.2"),
            Ok(WorkflowArg {
                name: "orders".into(),
                version: Some("1.2".into())
            })
        );
        assert_eq!(parse_workflow("orders").unwrap().version, None);
        for bad in ["", "@1", "orders@", "a@b@c"] {
            let error = parse_workflow(bad).unwrap_err();
            assert!(error.contains("not a workflow version"), "{bad}: {error}");
        }
    }

    #[test]
    fn json_is_given_inline_or_from_a_file() {
        assert_eq!(parse_json(r#"{"n": 1}"#), Ok(serde_json::json!({"n": 1})));
        let error = parse_json("{n: 1}").unwrap_err();
        assert!(error.starts_with("`{n: 1}` is not JSON"), "{error}");
        let error = parse_json("@/nonexistent/input.json").unwrap_err();
        assert!(
            error.starts_with("cannot read `/nonexistent/input.json`"),
            "{error}"
        );
        let file = std::env::temp_dir().join(format!("aiki-cli-{}.json", std::process::id()));
        std::fs::write(&file, "[1, 2").unwrap();
        let error = parse_json(&format!("@{}", file.display())).unwrap_err();
        assert!(error.contains("is not JSON"), "{error}");
        std::fs::write(&file, "[1, 2]").unwrap();
        assert_eq!(
            parse_json(&format!("@{}", file.display())),
            Ok(serde_json::json!([1, 2]))
        );
        std::fs::remove_file(file).unwrap();
    }

    #[test]
    fn durations_have_a_number_and_a_unit() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in [
            "",
            "5",
            "m",
            "5w",
            "-5m",
            "1.5h",
            "99999999999999999999d",
            "36501d",
        ] {
            let error = parse_duration(bad).unwrap_err();
            assert!(error.contains("not a duration"), "{bad}: {error}");
        }
    }
}
