//! The command line: the global flags and the commands; `runs` has a module of its own.

use std::io::IsTerminal;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::Failure;

#[cfg(feature = "server")]
mod endpoints;
mod parse;
mod runs;
mod schedules;

#[cfg(feature = "server")]
pub(crate) use endpoints::EndpointsCommand;

pub(crate) use parse::parse_duration;
pub(crate) use runs::{
    ActArgs, Before, FilterArgs, ListArgs, PurgeArgs, RunsCommand, SendArgs, StartArgs, WorkflowArg,
};
pub(crate) use schedules::{BackfillArgs, CreateArgs, SchedulesCommand};

/// List, inspect and operate the runs of an Aiki store.
#[derive(Debug, Parser)]
#[command(name = "aiki", version, about)]
pub struct Cli {
    /// The store: `sqlite://FILE`, `postgres://…` or `memory:`, or an aiki server's
    /// `http://host:port` (every command but `migrate` and `server`).
    #[arg(long, env = "AIKI_URL", global = true)]
    pub url: Option<String>,
    /// Output: `table` (the default on a terminal), `json` (the default otherwise) or `jsonl`.
    #[arg(short = 'o', long = "output", global = true)]
    pub output: Option<Format>,
    /// Leave inputs, outputs and event data out.
    #[arg(long, global = true)]
    pub no_payloads: bool,
    /// Who acts: recorded on the timeline of every run this command starts, forks, sends an
    /// event to or acts on, and in the log of a schedule it creates or acts on (default:
    /// `USER@HOST`).
    #[arg(long, env = "AIKI_ACTOR", global = true, value_parser = parse::parse_actor)]
    pub actor: Option<String>,
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

    /// The URL, which must name a database: `command` (e.g. `aiki keys`) works on the store
    /// itself, not through a server; `instead` says what to do there, if anything.
    pub(crate) fn database_url(&self, command: &str, instead: &str) -> Result<&str, Failure> {
        let url = self.url()?;
        if url.starts_with("http://") || url.starts_with("https://") {
            return Err(Failure::error(format!(
                "`{command}` works on the store itself (`--url sqlite://…` or `postgres://…`), \
                 not through a server{instead}"
            )));
        }
        Ok(url)
    }

    /// The output format asked for, or the default for where standard output goes.
    pub(crate) fn format(&self) -> Format {
        self.output.unwrap_or(if std::io::stdout().is_terminal() {
            Format::Table
        } else {
            Format::Json
        })
    }

    /// Who acts: `--actor`, `AIKI_ACTOR`, else `USER@HOST`.
    pub(crate) fn actor(&self) -> String {
        self.actor.clone().unwrap_or_else(|| {
            let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
            default_actor(
                var("USER").or_else(|| var("LOGNAME")),
                var("HOSTNAME").or_else(|| {
                    std::fs::read_to_string("/proc/sys/kernel/hostname")
                        .ok()
                        .map(|name| name.trim().to_owned())
                        .filter(|name| !name.is_empty())
                }),
            )
        })
    }
}

/// `user@host`, with `unknown` for what is not known, cleaned of what cannot be printed.
fn default_actor(user: Option<String>, host: Option<String>) -> String {
    let clean = |text: Option<String>| {
        text.map(|text| text.chars().filter(|c| !c.is_control()).collect::<String>())
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| "unknown".to_owned())
    };
    format!("{}@{}", clean(user), clean(host))
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
    /// Runs: list, show, wait for a result, act on one or many.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// The workflow versions that have runs or a catalog entry: counts by status, the pools
    /// serving them, and whether their live workers run different builds.
    Workflows,
    /// The workers seen lately (the last hour by default): live, stopped or gone, what they
    /// serve and which build, how they time their claims.
    Workers(WorkersArgs),
    /// Schedules: start runs of a workflow version on a cron expression or an interval. List,
    /// show (with the next occurrences and the log of what each became), create, pause,
    /// resume, trigger now, backfill a past range, delete.
    #[command(subcommand)]
    Schedules(SchedulesCommand),
    /// Applies pending migrations to the store's schema and says what it found and applied.
    Migrate,
    /// The store's runtime configuration (the daemons' timings and limits, which every worker
    /// and server on the store follows): shows it, or sets one key.
    Config(ConfigArgs),
    /// The pre-deploy impact report: replays every run that has not ended against the
    /// workflows compiled into this binary, writing nothing, and says which would break
    /// (exit 6) — from a binary of your own built with `aiki_cli::App::registry`.
    Check(CheckArgs),
    /// Serves the store over HTTP, the API remote workers and clients use (`--url
    /// http://…`), and runs the daemons (wake-ups, claim recovery, stalling) under the store's
    /// leader lease. Several servers may front one PostgreSQL database. Stops on Ctrl-C or
    /// SIGTERM, letting requests in flight finish.
    #[cfg(feature = "server")]
    Server(ServerArgs),
    /// The API keys aiki servers check requests against: create one (its secret is shown once),
    /// list them, revoke one. Works on the store directly (`--url sqlite://…` or
    /// `postgres://…`), so the first key needs no server.
    #[cfg(feature = "server")]
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The push endpoints an aiki server delivers runs to (signed HTTP push, for serverless
    /// platforms): set one for a workflow version, list them, rotate a secret, remove one.
    /// Works on the store directly, as `keys` does.
    #[cfg(feature = "server")]
    #[command(subcommand)]
    Endpoints(EndpointsCommand),
}

/// `keys` subcommands.
#[cfg(feature = "server")]
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Creates a key and prints it once: `aiki_<id>_<secret>`, for `Authorization: Bearer`
    /// (or `AIKI_API_KEY` for the CLI and `HttpStore::with_key`). The store keeps only its hash.
    Create {
        /// A name for people, e.g. `billing-workers`.
        #[arg(long)]
        name: String,
        /// What the key may do, one or more of `executor` (workers), `operator` (start, send,
        /// act) and `read` (list and show); comma-separated or repeated. Executor and operator
        /// keys read too.
        #[arg(long = "scope", value_delimiter = ',', required = true, value_parser = parse::scope)]
        scopes: Vec<aiki::store::Scope>,
    },
    /// Lists the keys: id, name, scopes, when created and revoked (never a secret).
    List,
    /// Revokes a key: every server refuses it within a few seconds.
    Revoke {
        /// The key's id (the part after `aiki_`, before the next `_`).
        id: String,
    },
}

/// `server`.
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The address to listen on (`127.0.0.1:0` picks a free port; the first line printed
    /// says which).
    #[arg(long, default_value = "127.0.0.1:9850")]
    pub listen: std::net::SocketAddr,
    /// Leave the daemons (due wake-ups, claim recovery, stalls, schedules, retention) to
    /// another process: a worker or another server on the same store. The push dispatcher
    /// still runs (only servers deliver pushes; one at a time holds its lease).
    #[arg(long)]
    pub no_daemons: bool,
    /// Once asked to stop (SIGTERM, Ctrl-C), let the requests in flight finish for this long
    /// (`10s`, `1m`; `0s` drops them at once) before dropping their connections; waiting long
    /// polls are answered at once and new requests refused with 503 and `Retry-After`.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse::parse_duration)]
    pub shutdown_grace: std::time::Duration,
    /// Serve every route without an API key: anyone who reaches the address may do anything.
    /// Without it the server refuses to start until the store holds a key (`aiki keys
    /// create`), on any address: a loopback one behind a TLS proxy is a public one.
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Allow each API key this many requests a second on average (bursts of twice as many);
    /// over it, requests are answered 429 and clients retry after a pause. Default: no limit.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate_limit: Option<std::num::NonZeroU32>,
    /// Keep at most this many connections open (fewer when `ulimit -n` allows fewer). At the
    /// cap a new connection closes the one idle the longest, or is closed when none is idle.
    #[arg(long, value_name = "N", default_value_t = std::num::NonZeroUsize::new(aiki_server::DEFAULT_MAX_CONNECTIONS).expect("BUG: a cap above 0"))]
    pub max_connections: std::num::NonZeroUsize,
    /// Close a connection whose next request's head has not arrived within this many seconds
    /// (an idle keep-alive connection too).
    #[arg(long, value_name = "SECONDS", default_value_t = std::num::NonZeroU64::new(aiki_server::DEFAULT_HEADER_READ_TIMEOUT.as_secs()).expect("BUG: a timeout above 0"))]
    pub header_read_timeout: std::num::NonZeroU64,
    /// Publish every queued run into this Redis (`redis://host:port/db`), a sorted set per
    /// workflow version and pool, for workers with a `RedisSubscriber`.
    #[cfg(feature = "redis")]
    #[arg(long, value_name = "URL", value_parser = parse::redis_url)]
    pub redis_url: Option<String>,
}

/// `config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// What to do (default: show the configuration in force).
    #[command(subcommand)]
    pub command: Option<ConfigCommand>,
}

/// `config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Shows every key: its value in force, its default and its range.
    Show,
    /// Sets one key, e.g. `aiki config set daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs
    /// 120000`; the daemons follow it from their next pass, workers with their next claim.
    Set {
        /// The key (`aiki config show` lists them).
        #[arg(value_parser = parse::config_key)]
        key: aiki::ConfigKey,
        /// Its new value, a whole number (milliseconds for the keys ending in `Ms`).
        #[arg(allow_negative_numbers = true)]
        value: i64,
        /// Set a claim idle timeout even if it is not above twice the claim refresh interval of
        /// a live worker (whose runs claim recovery may then take from it).
        #[arg(long)]
        force: bool,
        /// Set a run retention (`daemons.purgeEndedRuns.retentionMs`) below an hour, down to a
        /// second: for a trial or a test that wants to see ended runs purged. A handle
        /// awaiting a run's result, a parent or a start by reference id may then find the run
        /// gone.
        #[arg(long)]
        allow_short_retention: bool,
    },
}

/// `workers`.
#[derive(Debug, Args)]
pub struct WorkersArgs {
    /// Every worker the store has a heartbeat of, however old.
    #[arg(long, conflicts_with = "within")]
    pub all: bool,
    /// The workers seen within this long (`30s`, `5m`, `2h`, `1d`; default `1h`).
    #[arg(long, value_parser = parse_duration)]
    pub within: Option<Duration>,
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

#[cfg(test)]
mod tests {
    use super::default_actor;

    #[test]
    fn the_default_actor_is_user_at_host() {
        assert_eq!(
            default_actor(Some("ana".into()), Some("box".into())),
            "ana@box"
        );
        assert_eq!(default_actor(None, None), "unknown@unknown");
        assert_eq!(
            default_actor(Some("a\u{1}na".into()), Some("\n".into())),
            "ana@unknown"
        );
    }
}
