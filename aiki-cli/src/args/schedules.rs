//! `aiki schedules …`: the subcommands and their flags.

use std::time::Duration;

use aiki::store::{Millis, Namespace, OverlapPolicy};
use clap::{Args, Subcommand};
use serde_json::Value;

use super::parse::{
    namespace, parse_json, parse_text, parse_time, schedule_catchup, schedule_every,
    schedule_jitter, schedule_overlap,
};

/// What to do with schedules.
#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// Lists the schedules: name, status, when they fire, what they start, their overlap
    /// policy and catch-up window, the next occurrence and the last run.
    List,
    /// Shows one schedule: its definition, status, the next 5 occurrences, its last run and
    /// the latest 20 rows of its log (what each occurrence became: fired, skipped, missed...).
    Show {
        /// The schedule's name.
        name: String,
    },
    /// Creates a schedule that starts runs of a workflow version on a cron expression or an
    /// interval (the input is checked against the catalog, as `runs start` checks it).
    /// Creating one again with the same definition changes nothing.
    Create(CreateArgs),
    /// Pauses a schedule: nothing fires until it is resumed, and the occurrences meanwhile are
    /// not caught up.
    Pause {
        /// The schedule's name.
        name: String,
        /// Why, recorded in its log.
        #[arg(long, value_parser = parse_text)]
        reason: Option<String>,
    },
    /// Resumes a paused schedule, from its first occurrence after now.
    Resume {
        /// The schedule's name.
        name: String,
    },
    /// Starts a run of the schedule now, whatever its overlap policy; prints the run's id.
    Trigger {
        /// The schedule's name.
        name: String,
    },
    /// Starts one run per occurrence of the schedule between two past times (both included),
    /// whatever its catch-up window and its overlap policy, unless `--overlap` names a policy to
    /// apply among the backfill's runs.
    Backfill(BackfillArgs),
    /// Deletes a schedule and its log (the runs it started stay).
    Delete {
        /// The schedule's name.
        name: String,
    },
}

/// `schedules create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The schedule's name, unique in the store.
    pub name: String,
    /// The workflow version its runs are started in, `NAME@VERSION`.
    #[arg(value_parser = namespace)]
    pub workflow: Namespace,
    /// A cron expression of 5 fields (minute hour day-of-month month day-of-week) or 6
    /// (seconds first), e.g. `"0 9 * * MON-FRI"`.
    #[arg(long, value_name = "EXPR", conflicts_with = "every")]
    pub cron: Option<String>,
    /// The IANA time zone the cron expression is read in (default `UTC`), e.g.
    /// `Europe/Berlin`.
    #[arg(long, value_name = "TZ", conflicts_with = "every")]
    pub timezone: Option<String>,
    /// A fixed interval instead (`30s`, `15m`, `2h`, `1d`; at least 1s), counted from now.
    #[arg(long, value_name = "DURATION", value_parser = schedule_every, allow_hyphen_values = true)]
    pub every: Option<Duration>,
    /// The runs' input: JSON, or `@FILE` to read it from a file.
    #[arg(long, value_parser = parse_json, default_value = "null")]
    pub input: Value,
    /// What an occurrence does while the previous run has not ended: `skip` (the default),
    /// `allow`, `cancel_previous` or `buffer_one`.
    #[arg(long, value_name = "POLICY", value_parser = schedule_overlap)]
    pub overlap: Option<OverlapPolicy>,
    /// How late an occurrence may still start (`30s`, `15m`, `2h`, `1d`; at most 7d); older
    /// ones are recorded as missed. Default: one interval.
    #[arg(long, value_name = "DURATION", value_parser = schedule_catchup, allow_hyphen_values = true)]
    pub catchup: Option<Duration>,
    /// Start each occurrence up to this much later (`30s`, `5m`; at most 1h), by an offset
    /// fixed for the schedule. Default: none.
    #[arg(long, value_name = "DURATION", value_parser = schedule_jitter, allow_hyphen_values = true)]
    pub jitter: Option<Duration>,
    /// The worker pool of its runs.
    #[arg(long, default_value = "default")]
    pub pool: String,
}

/// `schedules backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// The schedule's name.
    pub name: String,
    /// The first time, RFC 3339 (`2026-03-01T00:00:00Z`, `2026-03-01T09:00:00+01:00`).
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub from: Millis,
    /// The last time, RFC 3339, included.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub to: Millis,
    /// An overlap policy to apply among the backfill's runs (`skip`, `buffer_one`,
    /// `cancel_previous`); by default each occurrence starts a run (`allow`).
    #[arg(long, value_name = "POLICY", value_parser = schedule_overlap)]
    pub overlap: Option<OverlapPolicy>,
}
