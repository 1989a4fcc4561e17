//! The `aiki` command: list, inspect and operate the runs of an Aiki store.
//!
//! ```text
//! aiki --url sqlite://aiki.db runs list --status failed
//! aiki runs show 1b4e28ba-2fa1-11d2-883f-0016d3cca427
//! aiki workflows
//! aiki workers
//! aiki runs start order-processing@1.0.0 --input '{"order_id": 7}' --reference-id order-7
//! aiki runs send 1b4e28ba-2fa1-11d2-883f-0016d3cca427 payment_received --payload '{"cents": 700}'
//! ```
//!
//! The store is named by `--url` or `AIKI_URL` (a `sqlite://`, `postgres://` or `memory:`
//! URL). Every command but `migrate` opens it in check mode: it never migrates, and refuses a
//! schema it would misread; `aiki migrate` applies pending migrations.
//!
//! Output: `-o table` (the default when standard output is a terminal; there, with a bold
//! header and statuses in colour unless `NO_COLOR` is set), `-o json` (the default
//! otherwise) or `-o jsonl` (one object per line); `--no-payloads` leaves inputs, outputs and
//! event data out. JSON documents: `runs list` prints `{"runs": [RUN, ...], "next": CURSOR}`
//! (`jsonl`: one `RUN` per line, then `{"next": CURSOR}` if there is a next page); `runs show`
//! prints `{"run": RUN, "doing": "what it does, in words", "serving_workers": [WORKER_ID, ...],
//! "entries": [...], "sleeps": [...], "events": [...], "children": [RUN, ...],
//! "timeline": [CHANGE, ...]}`; the actions and `runs start` print the run as it is
//! afterwards; `runs send` prints `{"run_id", "event", "delivered"}` (`delivered` is `false`
//! when the reference id was used before); `workflows` prints `[{"workflow", "version",
//! "by_status": {STATUS: COUNT}, "oldest_queued_at", "catalog": ENTRY or null, "pools":
//! [POOL, ...]}]` for every version that has runs or a catalog entry (`pools`: those of its
//! live workers); `workers` prints the workers seen in the last two minutes, `[WORKER, ...]`.
//! A `RUN` is the store's run record (`aiki::RunRecord`, its wait set under `wait` while it is
//! suspended), a `CHANGE` a `StatusChange` (`from`, `to`, `reason`, `revision`, `actor`, `at`),
//! a `WORKER` a `WorkerRecord` (`id`, `host`, `pid`, `namespaces`, `pool`, `started_at`,
//! `last_seen_at`), an `ENTRY` a `CatalogEntry` (`namespace`, `fingerprint`, `input`,
//! `output`, `events`, `retry`, `tasks`, `published_by`, `published_at`), as JSON.
//!
//! `runs start NAME@VERSION --input JSON` and `runs send ID EVENT --payload JSON` (`@FILE`
//! reads the JSON from a file) work without the workflow's code: the catalog the workers
//! publish holds the schemas, and a value that breaks them is refused with the typed API's own
//! error. A version no worker has published is refused.
//!
//! `runs retry ID` moves a failed run back to delivery after a fix: its recorded entries replay
//! and only the task call whose unhandled failure failed it runs again (`--rerun-interrupted`
//! lets it re-run a task interrupted under an at-most-once policy, `--even-if-observed` retry a
//! child whose parent acted on its end). `runs cancel|retry|requeue|resume` take one id, or
//! select many with the filter flags of `runs list` (or `--ids-from FILE`, at most `--max`):
//! then they only print the count and the ids (`{"action", "dry_run": true, "count", "ids"}`,
//! a file `--ids-from` reads) unless `--yes`, which acts on each run and prints one outcome per
//! run (`{"action", "done", "skipped", "failed", "results": [{"id", "outcome": "done" |
//! "skipped" | "failed", "status" | "reason" | "error"}]}`; exit 1 when any failed). A run that
//! no longer qualifies is skipped, not changed. `runs fork ID [--drop ADDRESS]... [--drop-from
//! ADDRESS]` starts a new run of the same version from an ended one (completed tasks, ended
//! children, sleeps and received events carried; failed calls run again) and prints it; the
//! same options give the same fork.
//!
//! Exit codes: 0 done; 1 the command failed (one line on standard error says why; for `check`:
//! the check could not run); 2 a usage error (an unknown flag, a malformed id, an unknown
//! status). `runs result`: 0 completed (the output is printed), 3 failed, 4 cancelled, 5 still
//! running when `--timeout` passed. `check`: 0 the gate passed, 6 a run would diverge, be
//! stranded, mismatch or break (or fail what `--deny` adds).
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
//!         let app = aiki_cli::App::new().workflows(|worker| worker.register(Quickstart));
//!         return app.main(std::env::args_os().skip(1));
//!     }
//!     // ... the service itself
//!     ExitCode::SUCCESS
//! }
//! ```
//!
//! `check` prints a summary per workflow version and each run with something to say (`-o
//! json`: `{"passed", "deny", "checked_at", "summary": [{"namespace", "runs", "by_verdict",
//! "sleep_changes"}], "failing": [RUN_ID, ...], "runs": [IMPACT, ...], "other_services":
//! [{"run_id", "namespace", "status"}]}`, an `IMPACT` being `aiki::impact::RunImpact` as JSON:
//! `run_id`, `namespace`, `status`, `revision`, `verdict` (`{"kind": "safe" | "new_work" |
//! "diverges" | "mismatch" | "stranded" | "broken" | "ends", ...}`), `new_work`, `resumes`,
//! `sleeps`, `waits`, `blind`). It opens the store in check mode like every command here, so it
//! runs against a read-only database role, and against the schema of the release deployed
//! now, down to the oldest this release reads.

mod args;
mod bulk;
mod check;
mod output;
mod runs;
mod send;
mod waits;
mod workers;
mod workflows;

use std::ffi::OsString;
use std::process::ExitCode;

use aiki::{Worker, WorkerBuilder};
use clap::Parser;

pub use args::Cli;

/// Exit code: a command failed.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: a usage error.
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

/// A failed command: the one line to print, and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong, and what to do.
    pub message: String,
    /// The exit code.
    pub code: u8,
}

impl Failure {
    pub(crate) fn error(message: impl std::fmt::Display) -> Self {
        Failure {
            message: message.to_string(),
            code: EXIT_ERROR,
        }
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure::error(error)
    }
}

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

type Configure = dyn Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync;

/// The `aiki` commands in a binary of your own, with your workflows compiled in: everything
/// [`main`] does, plus `check` and `runs fork --version`, which replay runs against this
/// build's code (writing nothing). See the [crate docs](crate) for how a `main` hands its
/// `aiki …` arguments over.
#[derive(Default)]
pub struct App {
    workflows: Option<Box<Configure>>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("workflows", &self.workflows.is_some())
            .finish()
    }
}

impl App {
    /// The commands of [`main`], without workflows.
    pub fn new() -> Self {
        App::default()
    }

    /// The workflows (and tasks) of this build: `configure` registers them on a worker
    /// builder, as the service's own worker does (`|w| w.register(Checkout)`). The worker is
    /// never started and no task runs; a task declared with `.task(T)` that reads state still
    /// needs a value of the state's type given (`.state(..)`), as `build` checks.
    pub fn workflows(
        mut self,
        configure: impl Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync + 'static,
    ) -> Self {
        self.workflows = Some(Box::new(configure));
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

    /// Runs a parsed command; the exit code, or the failure to report.
    pub async fn run(&self, cli: Cli) -> Result<u8, Failure> {
        let mut out = std::io::stdout().lock();
        let format = cli.format();
        match &cli.command {
            args::Command::Runs(command) => runs::run(self, &cli, command, format, &mut out).await,
            args::Command::Workflows => workflows::list(&cli, format, &mut out).await,
            args::Command::Workers => workers::list(&cli, format, &mut out).await,
            args::Command::Migrate => workflows::migrate(&cli, &mut out).await,
            args::Command::Check(args) => check::check(self, &cli, args, format, &mut out).await,
        }
    }

    /// A worker (never started) on the store, in check mode, with this build's workflows.
    pub(crate) async fn worker(&self, cli: &Cli, command: &str) -> Result<Worker, Failure> {
        let Some(configure) = &self.workflows else {
            return Err(Failure::error(format!(
                "`aiki {command}` needs the workflows' code, and this binary has none: run it \
                 from your own binary, built with `aiki_cli::App::new().workflows(|w| \
                 w.register(..))` (see the aiki-cli docs)"
            )));
        };
        let store = aiki::connect_with_mode(cli.url()?, aiki::MigrationMode::Check).await?;
        let builder = Worker::builder(store).worker_id(format!("aiki-{command}"));
        Ok(configure(builder).build()?)
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
    eprintln!("{line} (see --help)");
    ExitCode::from(EXIT_USAGE)
}

fn fail(failure: Failure) -> ExitCode {
    let line = failure.message.replace('\n', " ");
    eprintln!("error: {line}");
    ExitCode::from(failure.code)
}
