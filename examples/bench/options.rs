//! The command line: which phases on which backends, or which worker process this is.

use std::path::PathBuf;

use anyhow::Context as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) quick: bool,
    pub(crate) tracing_cost: bool,
    pub(crate) list: bool,
    pub(crate) gather: bool,
    pub(crate) impact: bool,
    pub(crate) idle_fleet: bool,
    pub(crate) wake: bool,
    pub(crate) scale: bool,
    pub(crate) recovery: bool,
    pub(crate) json: Option<PathBuf>,
    pub(crate) backends: Vec<Backend>,
}

impl Options {
    pub(crate) fn runs(&self) -> u64 {
        if self.quick { 100 } else { 1000 }
    }
    pub(crate) fn fan_out(&self) -> u64 {
        if self.quick { 100 } else { 1000 }
    }
    pub(crate) fn replay(&self) -> u64 {
        if self.quick { 1000 } else { 10_000 }
    }
    pub(crate) fn latency_runs(&self) -> usize {
        if self.quick { 50 } else { 200 }
    }
    pub(crate) fn wake_runs(&self) -> usize {
        if self.quick { 5 } else { 20 }
    }
    pub(crate) fn long_run(&self) -> u64 {
        if self.quick { 1000 } else { 10_000 }
    }
    pub(crate) fn raw_seconds(&self) -> f64 {
        if self.quick { 1.0 } else { 3.0 }
    }
}

/// What this process is: the bench, or one of the worker processes it starts.
pub(crate) enum Mode {
    Bench(Options),
    /// `--worker <url>`.
    Worker(String),
    /// `--idle-worker <url>`.
    IdleWorker(String),
    /// `--remote-worker <server url> <key>`.
    RemoteWorker(String, String),
    /// `--wake-worker <url> <poll|hints>`.
    WakeWorker(String, String),
    /// `--sleep-worker <url>`.
    SleepWorker(String),
}

pub(crate) fn parse_args() -> anyhow::Result<Mode> {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        quick: false,
        tracing_cost: false,
        list: false,
        gather: false,
        impact: false,
        idle_fleet: false,
        wake: false,
        scale: false,
        recovery: false,
        json: None,
        backends: vec![Backend::Sqlite, Backend::Postgres],
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--worker" => {
                let url = args.next().context("--worker needs a store URL")?;
                return Ok(Mode::Worker(url));
            }
            "--remote-worker" => {
                let url = args.next().context("--remote-worker needs a server URL")?;
                let key = args.next().context("--remote-worker needs an API key")?;
                return Ok(Mode::RemoteWorker(url, key));
            }
            "--idle-worker" => {
                let url = args.next().context("--idle-worker needs a store URL")?;
                return Ok(Mode::IdleWorker(url));
            }
            "--idle-fleet" => options.idle_fleet = true,
            "--wake" => options.wake = true,
            "--wake-worker" => {
                let url = args.next().context("--wake-worker needs a store URL")?;
                let discovery = args.next().context("--wake-worker needs poll or hints")?;
                return Ok(Mode::WakeWorker(url, discovery));
            }
            "--scale" => options.scale = true,
            "--sleep-worker" => {
                let url = args.next().context("--sleep-worker needs a store URL")?;
                return Ok(Mode::SleepWorker(url));
            }
            "--quick" => options.quick = true,
            "--tracing-cost" => options.tracing_cost = true,
            "--list" => options.list = true,
            "--gather" => options.gather = true,
            "--impact" => options.impact = true,
            "--recovery" => options.recovery = true,
            "--json" => options.json = Some(args.next().context("--json needs a path")?.into()),
            "--backends" => {
                options.backends = args
                    .next()
                    .context("--backends needs a list")?
                    .split(',')
                    .map(|name| match name.trim() {
                        "sqlite" => Ok(Backend::Sqlite),
                        "postgres" => Ok(Backend::Postgres),
                        other => Err(anyhow::anyhow!(
                            "unknown backend `{other}` (sqlite, postgres)"
                        )),
                    })
                    .collect::<anyhow::Result<_>>()?;
            }
            other => anyhow::bail!(
                "unknown argument `{other}`; usage: bench [--quick] [--tracing-cost | --list | --gather | --impact | --idle-fleet | --wake | --scale | --recovery] \
                 [--json out.json] [--backends sqlite,postgres]"
            ),
        }
    }
    Ok(Mode::Bench(options))
}
