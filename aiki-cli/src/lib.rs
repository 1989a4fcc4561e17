//! The `aiki` command: list, inspect and operate the runs of an Aiki store.
//!
//! ```text
//! aiki --url sqlite://aiki.db runs list --status failed --failed-task charge
//! aiki runs show 1b4e28ba-2fa1-11d2-883f-0016d3cca427 --inputs
//! aiki runs retry --workflow checkout --error-contains "HTTP 503" --yes --rate 20
//! aiki runs release 1b4e28ba-2fa1-11d2-883f-0016d3cca427
//! aiki workflows
//! aiki workers --all
//! aiki runs start order-processing@1.0.0 --input '{"order_id": 7}' --reference-id order-7
//! aiki runs send 1b4e28ba-2fa1-11d2-883f-0016d3cca427 payment_received --payload '{"cents": 700}'
//! aiki migrate
//! aiki config set daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs 120000
//! aiki keys create --name billing-workers --scope executor
//! aiki --url postgres://db/app server --listen 0.0.0.0:9850
//! AIKI_API_KEY=aiki_… aiki --url http://aiki.internal:9850 runs list
//! ```
//!
//! # The store, the actor, the output
//!
//! The store is named by `--url` or `AIKI_URL` (a `sqlite://`, `postgres://` or `memory:`
//! URL, or an aiki server's `http://host:port`, with the key in `AIKI_API_KEY`). Every command
//! but `migrate` and `server` opens it in check mode: it never migrates, and refuses a schema
//! it would misread. `aiki migrate` applies pending migrations and says what it found
//! and applied (the versions and descriptions), that the schema was already up to date, or
//! that a newer release migrated it and admits this one.
//!
//! `aiki config` shows the store's runtime configuration (each key's value in force, its
//! default and its range; JSON: one object of the keys' names and values; JSONL: one line per
//! key, `{key, value, default, min, max, safe_min}`) and `aiki config set KEY VALUE` sets one
//! key: the daemons' timings and limits, which every worker and server on the store follows. A
//! claim idle timeout not above twice the refresh interval of a live worker is refused unless
//! `--force`d; a run retention below an hour (`safe_min`) unless `--allow-short-retention` (a
//! trial or a test).
//!
//! `runs purge --finished-before AGE|TIME [--dry-run] [--limit N] [--allow-short-retention]`
//! deletes ended runs on the database itself; runs ended within the last hour stay unless
//! `--allow-short-retention`. Its dry run prints `{"dry_run": true, "ended_before",
//! "purgeable_now", "purgeable_later", "last_purgeable_at", "runs": [{"id", "workflow",
//! "version", "status", "ended_at", "purgeable_at"}]}`: what would go now, and what becomes
//! purgeable later and when.
//!
//! `aiki server` (feature `server`, on by default) serves the store over HTTP to remote workers
//! and clients and runs the daemons; it refuses to start until the store holds an API key
//! (`aiki keys create --name NAME --scope executor,operator,read`, shown once; `aiki keys
//! list`, `aiki keys revoke ID`), unless told `--insecure-no-auth`. `aiki keys` works on the
//! store itself, never through a server. The API: `aiki_server::reference`.
//!
//! Who acts is `--actor NAME` or `AIKI_ACTOR`, else `USER@HOST` (`USER` or `LOGNAME`; the host
//! from `HOSTNAME` or `/proc/sys/kernel/hostname`). It is recorded on the timeline of every run
//! a command starts, forks or acts on (cancel, pause, resume, wake, requeue, retry, release, and
//! the bulk forms) and with every event it sends, and in the log of every schedule it creates or
//! acts on; `runs show` says who made each change and who sent each event, `schedules show` who
//! created, paused, resumed, triggered or backfilled a schedule.
//!
//! Output: `-o table` (the default when standard output is a terminal; there, with a bold
//! header and statuses in colour unless `NO_COLOR` is set), `-o json` (the default otherwise)
//! or `-o jsonl` (one object per line); `--no-payloads` leaves inputs, outputs and event data
//! out. Nothing read from the store reaches a terminal as a control character: tables and error
//! lines show U+0001 as `␁`, a newline as `␊`, an escape as `␛` (JSON keeps the text as it is,
//! escaped as JSON escapes it). A reader that goes away (`aiki runs list | head -1`) ends the
//! command quietly, with exit code 0.
//!
//! # Runs
//!
//! `runs list` pages through runs, newest first, by `--workflow`, `--version`, `--status`,
//! `--reference-id`, `--parent`, `--pool`, `--error-kind`, `--failed-task NAME` (runs failed by
//! a call of that task), `--error-contains TEXT` (in the error's message) and `--since`. A
//! workflow (or version) with no runs and no catalog entry, and an error kind that neither the
//! runtime records nor any run has, are refused naming the known ones, not answered with an
//! empty list.
//!
//! `runs show ID` says what the run does in one line: its wait set; who holds a running run,
//! and whether that worker is gone ("held by worker-7, gone since 40 s; released at the latest
//! in 50 s"); a pause asked for ("pause requested by ana@ops at 2025-03-01T10:00:00Z"); for a
//! failed run, the failing call and the command that retries it (`aiki runs retry ID`, with
//! `--rerun-child` when a child's failure failed it, `--rerun-interrupted` when an at-most-once
//! task was interrupted). Then its entries (with `--inputs`, what each task call was given),
//! its sleeps, the timeouts of its event and child waits (apart from the sleeps), its events
//! (with who sent them), its children and its timeline (with who made each change).
//!
//! `runs start NAME@VERSION --input JSON` and `runs send ID EVENT --payload JSON` (`@FILE`
//! reads the JSON from a file) work without the workflow's code: the catalog the workers
//! publish holds the schemas, and a value that breaks them is refused with the typed API's own
//! error. A version no worker has published is refused.
//!
//! `runs retry ID` moves a failed run back to delivery after a fix: its recorded entries replay
//! and only the task call whose unhandled failure failed it runs again (`--rerun-interrupted`
//! lets it re-run a task interrupted under an at-most-once policy, `--even-if-observed` retry a
//! child whose parent acted on its end, `--rerun-child` retry with it the failed child whose
//! recorded failure failed it, `--force` retry even a run that would replay the same failure).
//! `runs release ID [--force]` releases a running run whose executor is gone, once claim
//! recovery has confirmed its claim stale (refused in one line until then, saying when); with
//! `--force`, at once. `runs fork ID [--drop ADDRESS]... [--drop-from ADDRESS]` starts a new
//! run of the same version from an ended one and prints it; the same options give the same
//! fork.
//!
//! `runs cancel|retry|requeue|resume` take one id, or select many with the filter flags of
//! `runs list` (or `--ids-from FILE`, at most `--max`): then they only check each run as the
//! action would and print the count and the ids of those it would act on, and those it would
//! skip with why (a retry that needs `--rerun-child`, a run whose status no longer qualifies):
//! `{"action", "dry_run": true, "count", "ids", "skipped": [{"id", "code", "reason"}]}`, a file
//! `--ids-from` reads; unless `--yes`, which acts on them (`--rate N`: at most N runs a second) and prints each outcome as
//! it happens: a table row, or with `-o jsonl` a line `{"id", "outcome": "done" | "skipped" |
//! "failed", "status" | "reason" | "error"}`, then the summary `{"action", "done", "skipped",
//! "failed", "not_attempted", "interrupted", "error"}` (`-o json`: the summary with `"results":
//! [OUTCOME, ...]`, printed at the end, an interrupted action included). A run that no longer
//! qualifies is skipped, not changed. Ctrl-C (SIGINT) stops the action between runs: those in
//! flight finish and are printed, no other starts, and the summary counts those not attempted.
//! A failure that is not a run's own (the store refuses the write: a read-only role) stops the
//! action at the first run, and is said once. An action that did nothing (every run skipped,
//! or none selected) exits 1.
//!
//! # Workflows and workers
//!
//! `workflows` lists every version with runs, a catalog entry or a push endpoint: its runs by
//! status, the pools of its live workers or the endpoint its runs are pushed to (read on the
//! store itself: through a server, endpoints are not shown), and the builds (catalog fingerprints) they run, flagged when they
//! differ (a rolling deploy in progress, or a worker left behind on old code). `workers` lists
//! the workers seen in the last hour (`--within D`, or `--all` for every heartbeat kept): live,
//! stopped (said so at shutdown) or gone (silent for two refresh intervals), their pool, the
//! versions they serve with their builds, and how they time their claims.
//!
//! # Schedules
//!
//! `schedules create NAME NAME@VERSION (--cron "EXPR" [--timezone TZ] | --every 15m)` makes a
//! schedule that starts runs of a workflow version (`--input JSON`, `--pool P`, `--overlap
//! skip|allow|cancel_previous|buffer_one`, `--catchup 1h`, `--jitter 30s`); the input is checked
//! against the catalog as `runs start` checks it, and creating it again with the same definition
//! changes nothing. `schedules list` shows each one's status, when it fires, its policy and
//! catch-up window, its next occurrence and last run; `schedules show NAME` its definition, the
//! next 5 occurrences and the latest 20 rows of its log (fired, skipped, buffered, missed gaps,
//! status changes, with who made them). `pause [--reason]`, `resume`, `trigger` (a run now),
//! `backfill --from RFC3339 --to RFC3339 [--overlap P]` and `delete` act on one. An invalid cron
//! expression, time zone, interval or range, and an unknown schedule, are usage errors.
//!
//! # JSON documents
//!
//! `runs list` prints `{"runs": [RUN, ...], "next": CURSOR}` (`jsonl`: one `RUN` per line, then
//! `{"next": CURSOR}` if there is a next page); `runs show` prints `{"run": RUN, "doing":
//! "what it does, in words", "retry_command": "aiki runs retry …" or null, "serving_workers":
//! [WORKER_ID, ...], "entries": [ENTRY_RECORD with "state", ...], "sleeps": [...], "events":
//! [...], "children": [RUN, ...], "timeline": [CHANGE, ...]}` (the runtime's own timer and queue
//! names, which start with U+0001, as they are); the actions, `runs release` and `runs start`
//! print the run as it is afterwards; `runs send` prints `{"run_id", "event", "delivered"}`
//! (`delivered` is `false` when the reference id was used before); `workflows` prints
//! `[{"workflow", "version", "by_status": {STATUS: COUNT}, "oldest_queued_at", "catalog":
//! CATALOG_ENTRY or null, "pools": [POOL, ...], "pushed_to": URL or null, "builds":
//! [{"fingerprint", "published_by", "published_at", "live_workers": [WORKER_ID, ...]}],
//! "mixed_builds": BOOL}]` (`catalog`: the build starts are checked against first; `pushed_to`
//! is null through a server); `workers` prints `[WORKER, ...]`; `migrate` prints
//! `{"outcome": "created" | "migrated" | "up_to_date" | "newer" | "no_schema", "found",
//! "applied": [{"version", "description"}], "version", "release"}`; `schedules list` prints
//! `[SCHEDULE, ...]`, `schedules show` `{"schedule": SCHEDULE, "catchup_window_ms", "next":
//! [MS, ...], "log": [LOG_ROW, ...]}`, `schedules create` `{"outcome": "created" | "existing",
//! "schedule": SCHEDULE}` and the actions `{"schedule": SCHEDULE, "runs": [RUN_ID, ...], "log":
//! [LOG_ROW, ...]}` (`backfill` adds `"started"` and `"skipped"` counts), a `SCHEDULE` being
//! `aiki::store::ScheduleRecord` and a `LOG_ROW` a `ScheduleLogEntry`, as JSON. The documents of `runs
//! show`, `workflows` and `workers` are the views of `aiki::ops` (`RunView`, `VersionView`,
//! `WorkerView`), which other tools can read the same way.
//!
//! A `RUN` is the store's run record (`aiki::RunRecord`: its wait set under `wait` while it is
//! suspended, `pause_requested_at` and `pause_requested_by` while a pause is pending); an
//! `ENTRY_RECORD` an `EntryRecord` (`address`, `index`, `kind`, `status`, `output`, `attempts`,
//! `error`, `input`: what a task call was given, `{"aiki_input_omitted_bytes": N}` when it was
//! too large to record; `runs show` adds `state`: the status, or for a child start the child
//! run's, `child failed`); an event an `EventRecord` (`name`, `index`, `data`, `timed_out`,
//! `sent_by`); a `CHANGE` a `StatusChange` (`from`, `to`, `reason`, `cause`, `revision`,
//! `actor`, `at`); a `WORKER` a `WorkerRecord` (`id`, `host`, `pid`, `namespaces`, `pool`,
//! `started_at`, `last_seen_at`, `fingerprints`, `stopped_at`, `claim_refresh_ms`,
//! `claim_idle_timeout_ms`) with `"liveness": {"state": "live"} | {"state": "stopped", "at"} |
//! {"state": "gone", "since"}`; a `CATALOG_ENTRY` a `CatalogEntry` (`namespace`, `fingerprint`,
//! `input`, `output`, `events`, `retry`, `tasks`, `published_by`, `published_at`), as JSON.
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done (`runs result`: the run completed, its output is printed) |
//! | 1 | the command failed, and trying it again as it is will not change that; one line on standard error says why (a bulk action: a run failed, the store refused the action, or nothing was done) |
//! | 2 | a usage error: an unknown flag, a malformed value, a workflow or error kind the store does not know |
//! | 3 | `runs result`: the run failed |
//! | 4 | `runs result`: the run was cancelled |
//! | 5 | `runs result`: the run had not ended when `--timeout` passed |
//! | 6 | `check`: a run would diverge, be stranded, mismatch or break (or fail what `--deny` adds) |
//! | 7 | the store could not be reached; the same command may work once it is back (`runs result --timeout`: it never answered, or not at the end) |
//! | 130 | a bulk action interrupted by Ctrl-C; the summary says what was done and what was not attempted |
//!
//! # Your own binary
//!
//! [`main`] is the whole program. Two commands need the workflows' code and run only from a
//! binary of your own built with [`App`]: `check`, the pre-deploy impact report (see
//! `aiki::impact`), and `runs fork ID --version V`, which forks onto another version after
//! checking that what the fork carries replays on it:
//!
//! ```no_run
//! # #[aiki::workflow(name = "quickstart", version = "1")]
//! # async fn quickstart(_run: &aiki::Run, _n: u64) -> Result<u64, aiki::WorkflowError> { Ok(1) }
//! use std::process::ExitCode;
//!
//! fn main() -> ExitCode {
//!     // `my-app aiki check --url URL`: the `aiki` commands with this build's workflows.
//!     if std::env::args().nth(1).as_deref() == Some("aiki") {
//!         let registry = aiki::Registry::builder().register(Quickstart).build();
//!         let app = aiki_cli::App::new().registry(registry.expect("the registry"));
//!         return app.main(std::env::args_os().skip(1));
//!     }
//!     // ... the service itself
//!     ExitCode::SUCCESS
//! }
//! ```
//!
//! `check -o table` prints a summary per workflow version, then one line per group of runs
//! that would do the same at the same call site, with their count and one of them (`-o json`
//! lists every run: `{"passed", "deny", "checked_at", "summary": [{"namespace", "runs",
//! "by_verdict", "sleep_changes"}], "failing": [RUN_ID, ...], "runs": [IMPACT, ...],
//! "other_services": [{"run_id", "namespace", "status"}]}`, an `IMPACT` being
//! `aiki::impact::RunImpact` as JSON: `run_id`, `namespace`, `status`, `revision`, `verdict`
//! (`{"kind": "safe" | "new_work" | "diverges" | "mismatch" | "stranded" | "broken" | "ends",
//! ...}`), `new_work`, `resumes`, `sleeps`, `waits`, `blind`). It opens the store in check mode
//! like every command here, so it runs against a read-only database role, and against the
//! schema of the release deployed now, down to the oldest this release reads.

mod args;
mod bulk;
mod check;
mod config;
#[cfg(feature = "server")]
mod endpoints;
mod failure;
mod filter;
#[cfg(feature = "server")]
mod keys;
mod migrate;
mod outcomes;
mod output;
mod purge;
mod result;
mod runs;
mod schedules;
mod send;
#[cfg(feature = "server")]
mod server;
mod show;
mod workers;
mod workflows;

use std::ffi::OsString;
use std::process::ExitCode;

use aiki::Registry;
use clap::Parser;

pub use args::Cli;
pub use failure::Failure;

/// Exit code: a command failed (and trying again as it is will not change that).
pub const EXIT_ERROR: u8 = 1;
/// Exit code: a usage error (an unknown flag, a malformed value, a workflow or error kind the
/// store does not know).
pub const EXIT_USAGE: u8 = 2;
/// Exit code of `runs result`: the run failed.
pub const EXIT_FAILED: u8 = 3;
/// Exit code of `runs result`: the run was cancelled.
pub const EXIT_CANCELLED: u8 = 4;
/// Exit code of `runs result`: the run had not ended when `--timeout` passed.
pub const EXIT_TIMED_OUT: u8 = 5;
/// Exit code of `check`: a run would diverge, be stranded, mismatch or break under this build
/// (or fail what `--deny` adds).
pub const EXIT_UNSAFE: u8 = 6;
/// Exit code: the store could not be reached (refused, timed out, went away); the same command
/// may succeed once it is back. `runs result --timeout` exits so when the store never answered
/// before the timeout.
pub const EXIT_UNREACHABLE: u8 = 7;
/// Exit code of a bulk action stopped by Ctrl-C (SIGINT): the runs in flight finished, the
/// rest were not attempted; the summary says how many of each.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs the `aiki` command with these arguments (the first is the program's name), printing
/// to standard output and error; returns the exit code. The commands that need the workflows'
/// code (`check`, `runs fork --version`) say so: run them through an [`App`].
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    App::new().main(args)
}

/// Runs a parsed command; the exit code, or the failure to report.
pub async fn run(cli: Cli) -> Result<u8, Failure> {
    App::new().run(cli).await
}

/// The `aiki` commands in a binary of your own, with your workflows compiled in: everything
/// [`main`] does, plus `check` and `runs fork --version`, which replay runs against this
/// build's code (writing nothing). See the [crate docs](crate) for how a `main` hands its
/// `aiki …` arguments over.
#[derive(Debug, Default)]
pub struct App {
    registry: Option<Registry>,
}

impl App {
    /// The commands of [`main`], without workflows.
    pub fn new() -> Self {
        App::default()
    }

    /// The workflow versions (and tasks) of this build, the registry its workers serve. Nothing
    /// is executed from it: `check` and `runs fork --version` replay runs against its code,
    /// writing nothing.
    pub fn registry(mut self, registry: Registry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Runs the command these arguments give (the first is the program's name, as `aiki`
    /// would see it), printing to standard output and error; returns the exit code.
    pub fn main<I, T>(&self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(error) => return usage(error),
        };
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => return fail(Failure::error(error)),
        };
        match runtime.block_on(self.run(cli)) {
            Ok(code) => ExitCode::from(code),
            Err(failure) => fail(failure),
        }
    }

    /// Runs a parsed command; the exit code, or the failure to report. Standard output closed
    /// by its reader ends the command quietly, with exit code 0.
    pub async fn run(&self, cli: Cli) -> Result<u8, Failure> {
        let mut out = std::io::stdout().lock();
        let format = cli.format();
        let result = match &cli.command {
            args::Command::Runs(command) => runs::run(self, &cli, command, format, &mut out).await,
            args::Command::Workflows => workflows::list(&cli, format, &mut out).await,
            args::Command::Workers(args) => workers::list(&cli, args, format, &mut out).await,
            args::Command::Schedules(command) => {
                schedules::schedules(&cli, command, format, &mut out).await
            }
            args::Command::Migrate => migrate::migrate(&cli, format, &mut out).await,
            args::Command::Config(args) => config::config(&cli, args, format, &mut out).await,
            args::Command::Check(args) => check::check(self, &cli, args, format, &mut out).await,
            #[cfg(feature = "server")]
            args::Command::Server(args) => server::serve(&cli, args, &mut out).await,
            #[cfg(feature = "server")]
            args::Command::Keys(command) => keys::keys(&cli, command, format, &mut out).await,
            #[cfg(feature = "server")]
            args::Command::Endpoints(command) => {
                endpoints::endpoints(&cli, command, format, &mut out).await
            }
        };
        let result = result.and_then(|code| {
            std::io::Write::flush(&mut out)?;
            Ok(code)
        });
        match result {
            Err(failure) if failure.is_reader_gone() => Ok(0),
            other => other,
        }
    }

    /// This build's registry, and a client on the store in check mode (it migrates nothing).
    pub(crate) async fn replaying(
        &self,
        cli: &Cli,
        command: &str,
    ) -> Result<(Registry, aiki::Client), Failure> {
        let Some(registry) = &self.registry else {
            return Err(Failure::error(format!(
                "`aiki {command}` needs the workflows' code, and this binary has none: run it \
                 from your own binary, built with `aiki_cli::App::new().registry(registry)` \
                 (see the aiki-cli docs)"
            )));
        };
        let store = aiki::store::open(cli.url()?, aiki::MigrationMode::Check).await?;
        Ok((registry.clone(), aiki::Client::new(store)))
    }
}

/// Prints a usage error in one line (help and version go to standard output as they are).
fn usage(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            eprintln!("error: a command is required (see --help)");
            return ExitCode::from(EXIT_USAGE);
        }
        _ => {}
    }
    let text = error.to_string();
    let line = text.lines().next().unwrap_or("usage error");
    eprintln!("{} (see --help)", output::text(line));
    ExitCode::from(EXIT_USAGE)
}

/// Prints a failure in one line, with nothing a terminal would act on.
fn fail(failure: Failure) -> ExitCode {
    if failure.is_reader_gone() {
        return ExitCode::SUCCESS;
    }
    let line = failure.message.replace('\n', " ");
    eprintln!("error: {}", output::text(&line));
    ExitCode::from(failure.code)
}
