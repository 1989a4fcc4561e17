//! The command line.

use std::io::IsTerminal;
use std::time::Duration;

use aiki::{RunId, RunStatus};
use aiki_store::RunCursor;
use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// Cancels a run and the child runs it started that have not ended.
    Cancel {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Pauses a run.
    Pause {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Resumes a paused run.
    Resume {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Ends a sleeping run's sleep now (the sleep returns `cancelled`).
    Wake {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
    /// Puts a stalled run back into delivery.
    Requeue {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
    },
}

/// The filters and page of `runs list`.
#[derive(Debug, Args)]
pub struct ListArgs {
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
    /// Runs per page (at most 1000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// The page after this cursor (printed with the previous page).
    #[arg(long)]
    pub after: Option<RunCursor>,
}

/// A run id: a UUID.
fn parse_run_id(text: &str) -> Result<RunId, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not a run id (a UUID such as 1b4e28ba-2fa1-41d2-883f-0016d3cca427)")
    })
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
