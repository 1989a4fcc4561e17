//! `aiki workers`: the workers seen lately, whether each is live, stopped or gone, what it
//! serves with which build, and how it times its claims.

use std::io::Write;
use std::time::Duration;

use aiki::ops::WorkerView;
use aiki_store::WorkerRecord;
use serde_json::json;

use crate::Failure;
use crate::args::{Cli, Format, WorkersArgs};
use crate::output::{Table, json, relative, short, span};
use crate::runs::client;

/// The workers `aiki workers` lists by default: those seen within the last hour.
const RECENT: Duration = Duration::from_secs(3600);

/// Far enough back for every heartbeat a store keeps (and far from overflowing a clock).
const EVER: Duration = Duration::from_secs(100 * 365 * 86_400);

pub(crate) async fn list(
    cli: &Cli,
    args: &WorkersArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let within = match (args.all, args.within) {
        (true, _) => EVER,
        (false, within) => within.unwrap_or(RECENT),
    };
    let now = aiki::Clock::now(&aiki::SystemClock);
    let workers: Vec<WorkerView> = client(cli)
        .await?
        .live_workers(within)
        .await?
        .into_iter()
        .map(|worker| WorkerView::new(worker, now))
        .collect();
    match format {
        Format::Table => {
            let mut table = Table::new(&[
                "id",
                "state",
                "host",
                "pid",
                "pool",
                "serves (build)",
                "claims",
                "started",
                "seen",
            ]);
            for view in &workers {
                let worker = &view.worker;
                table.row(vec![
                    worker.id.clone(),
                    view.state(now),
                    worker.host.clone(),
                    worker.pid.to_string(),
                    worker.pool.clone(),
                    serves(worker),
                    claims(worker),
                    relative(worker.started_at),
                    relative(worker.last_seen_at),
                ]);
            }
            table.print(out)?;
            if workers.is_empty() {
                let when = if args.all {
                    "ever".to_owned()
                } else {
                    format!("in the last {}", span(millis(within)))
                };
                writeln!(out, "no worker seen {when}")?;
            }
        }
        Format::Json => json(out, format, &json!(workers))?,
        Format::Jsonl => {
            for worker in &workers {
                json(out, format, &json!(worker))?;
            }
        }
    }
    Ok(0)
}

/// The versions it registers, each with the short fingerprint of the build it runs.
fn serves(worker: &WorkerRecord) -> String {
    let serves: Vec<String> = worker
        .namespaces
        .iter()
        .map(|namespace| {
            let name = namespace.to_string();
            match worker.fingerprints.get(&name) {
                Some(fingerprint) => format!("{name} ({})", short(fingerprint)),
                None => name,
            }
        })
        .collect();
    serves.join(", ")
}

/// How it times its claims: its refresh interval and idle timeout, if it said.
fn claims(worker: &WorkerRecord) -> String {
    match (worker.claim_refresh_ms, worker.claim_idle_timeout_ms) {
        (None, None) => "defaults".to_owned(),
        (refresh, idle) => {
            let ms = |value: Option<i64>| match value {
                None => "default".to_owned(),
                Some(ms) if ms < 1000 => format!("{ms} ms"),
                Some(ms) => span(ms),
            };
            format!("refresh {}, idle {}", ms(refresh), ms(idle))
        }
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
