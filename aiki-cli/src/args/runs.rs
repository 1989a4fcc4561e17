//! `aiki runs …`: the subcommands and their flags.

use std::num::NonZeroU32;
use std::time::Duration;

use aiki::{RunId, RunStatus};
use aiki_store::RunCursor;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::parse::{parse_duration, parse_json, parse_run_id, parse_text, parse_workflow};

/// What to do with runs.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Lists runs, newest first, one page at a time.
    List(ListArgs),
    /// Shows one run: what it does, its record, manifest entries, sleeps, wait timeouts,
    /// events, child runs and timeline (with who made each change).
    Show {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
        /// Also show what each task call was given (in the table; JSON always has it).
        #[arg(long)]
        inputs: bool,
    },
    /// Waits for a run to end, riding out a store outage; prints its output (exit 0), or says
    /// how it ended (3 failed, 4 cancelled, 5 not ended within `--timeout`, 7 the store did
    /// not answer).
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
        /// replays on its code (from a binary built with `aiki_cli::App::registry`).
        #[arg(long)]
        version: Option<String>,
    },
    /// Pauses a run (a running one at its next durable point: its tasks in flight finish).
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
    /// Releases a `running` run whose executor is gone, back to `queued` for another worker,
    /// once claim recovery has confirmed its claim stale (or at once with `--force`).
    Release {
        /// The run's id.
        #[arg(value_parser = parse_run_id)]
        id: RunId,
        /// Release it now, before its claim is confirmed stale: only when you know its
        /// executor is dead (a task it had in flight may run again).
        #[arg(long)]
        force: bool,
    },
    /// Starts a run from JSON; the input is checked against the schema the version's workers
    /// published in the catalog, as the typed API checks it.
    Start(StartArgs),
    /// Sends an event to a run; the payload is checked against the schema the run's version
    /// declares for it in the catalog.
    Send(SendArgs),
    /// Deletes ended runs (completed, failed, cancelled) with everything recorded for them,
    /// the oldest first; a child goes with or after its parent, and runs ended within the
    /// last hour stay (unless `--allow-short-retention`). Works on the database itself, not
    /// through a server (whose daemons purge by `daemons.purgeEndedRuns.retentionMs`), in
    /// batches of 500 with a pause as long as each batch after it, so that the application's
    /// writes go on meanwhile. `--dry-run` lists what would go now, and what becomes
    /// purgeable later and when.
    Purge(PurgeArgs),
}

/// `runs purge`.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Purge the runs that ended before this time (RFC 3339, e.g. `2026-03-01T00:00:00Z`),
    /// or this long ago (`30d`, `12h`); at least an hour ago, unless
    /// `--allow-short-retention`.
    #[arg(long, value_parser = parse_before)]
    pub finished_before: Before,
    /// List the runs that would go (at most `--limit`) and change nothing: those purgeable
    /// now, and those that ended before `--finished-before` but within the last hour, with
    /// when each becomes purgeable.
    #[arg(long)]
    pub dry_run: bool,
    /// Purge runs that ended within the last hour too (down to a second ago): for a trial or a
    /// test. A handle awaiting such a run's result, its parent or a start by its reference id
    /// may then find it gone.
    #[arg(long)]
    pub allow_short_retention: bool,
    /// Purge (or list) at most this many runs.
    #[arg(long)]
    pub limit: Option<NonZeroU32>,
}

/// A `--finished-before`: an instant, or an age to count back from the store's now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before {
    /// An instant (ms since the epoch).
    At(aiki::Millis),
    /// This long before the store's now.
    Ago(Duration),
}

/// An RFC 3339 time or a duration back from now.
fn parse_before(text: &str) -> Result<Before, String> {
    if let Ok(ago) = parse_duration(text) {
        return Ok(Before::Ago(ago));
    }
    super::parse::parse_time(text).map(Before::At).map_err(|_| {
        format!("`{text}` is neither an RFC 3339 time (2026-03-01T00:00:00Z) nor an age (30d, 12h)")
    })
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
    /// With `--yes`: act on at most this many runs per second (the workers it wakes take
    /// them in at that rate).
    #[arg(long, value_name = "N")]
    pub rate: Option<NonZeroU32>,
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
    /// Runs of this workflow (one with runs or a catalog entry).
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
    /// Runs whose error is of this kind (`task_failed`, `non_determinism`, `child_failed`,
    /// `interrupted`, `corrupt_history`, ...).
    #[arg(long)]
    pub error_kind: Option<String>,
    /// Runs failed by a call of this task (the task's name, as in `aiki runs show`).
    #[arg(long, value_name = "TASK", value_parser = parse_text)]
    pub failed_task: Option<String>,
    /// Runs whose error message contains this text (case-sensitive).
    #[arg(long, value_name = "TEXT", value_parser = parse_text)]
    pub error_contains: Option<String>,
    /// Runs started by this schedule (fired, triggered or backfilled).
    #[arg(long, value_name = "NAME", value_parser = parse_text)]
    pub schedule: Option<String>,
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
            && self.failed_task.is_none()
            && self.error_contains.is_none()
            && self.schedule.is_none()
            && self.since.is_none()
    }
}
