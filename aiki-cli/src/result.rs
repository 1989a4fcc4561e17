//! `aiki runs result`: waits for a run to end, riding out a store that is down (refusing
//! connections, or gone mid-call) until the timeout, and says how it ended in its exit code.

use std::io::Write;
use std::time::Duration;

use aiki::{Client, MigrationMode, RunId, RunRecord, RunStatus};
use serde_json::Value;

use crate::args::{Cli, Format};
use crate::failure::is_unreachable;
use crate::output::json;
use crate::runs::{POLL, with_actor};
use crate::{EXIT_CANCELLED, EXIT_FAILED, EXIT_TIMED_OUT, EXIT_UNREACHABLE, Failure};

/// What the wait has seen of the store: the run's status when it last answered, and the error
/// of the last attempt if it did not answer.
#[derive(Default)]
struct Seen {
    status: Option<RunStatus>,
    down: Option<String>,
}

pub(crate) async fn result(
    cli: &Cli,
    id: RunId,
    timeout: Option<Duration>,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let url = cli.url()?;
    let mut seen = Seen::default();
    let wait = wait(cli, url, id, &mut seen);
    let record = match timeout {
        None => wait.await?,
        Some(limit) => match tokio::time::timeout(limit, wait).await {
            Ok(record) => record?,
            Err(_) => return Err(timed_out(id, limit, &seen)),
        },
    };
    match record.status {
        RunStatus::Completed => {
            let output = record.output.clone().unwrap_or(Value::Null);
            match format {
                Format::Table => writeln!(out, "{output}")?,
                _ => json(out, format, &output)?,
            }
            Ok(0)
        }
        status => {
            let why = record
                .error
                .as_ref()
                .map_or(String::new(), |e| format!(": {}: {}", e.kind, e.message));
            Err(Failure {
                message: format!("run {id} ended `{status}`{why}"),
                code: if status == RunStatus::Cancelled {
                    EXIT_CANCELLED
                } else {
                    EXIT_FAILED
                },
            })
        }
    }
}

/// Connects, then looks at the run until it has ended; an unreachable store is waited out
/// (and noted in `seen`), any other error ends the wait.
async fn wait(cli: &Cli, url: &str, id: RunId, seen: &mut Seen) -> Result<RunRecord, Failure> {
    let client = loop {
        match aiki::store::open(url, MigrationMode::Check).await {
            Ok(store) => break with_actor(cli, Client::new(store)),
            Err(error) if error.is_transient() => seen.down = Some(error.to_string()),
            Err(error) => return Err(error.into()),
        }
        tokio::time::sleep(POLL * 5).await;
    };
    let run = client.any_run(id);
    loop {
        match run.record().await {
            Ok(record) => {
                seen.status = Some(record.status);
                seen.down = None;
                if record.status.is_terminal() {
                    return Ok(record);
                }
            }
            Err(error) if is_unreachable(&error) => seen.down = Some(error.to_string()),
            Err(error) => return Err(error.into()),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The timeout passed: the run had not ended when the store last answered (exit 5), or the
/// store never answered, or not at the end (exit 7).
fn timed_out(id: RunId, limit: Duration, seen: &Seen) -> Failure {
    let waited = humantime::format_duration(limit);
    let why = seen
        .down
        .as_ref()
        .map(|error| format!(": {error}"))
        .unwrap_or_default();
    match (seen.status, &seen.down) {
        (None, _) => Failure {
            message: format!(
                "the store did not answer within {waited}, so run {id}'s end is not known{why}"
            ),
            code: EXIT_UNREACHABLE,
        },
        (Some(status), Some(_)) => Failure {
            message: format!(
                "run {id} was `{status}` when the store last answered, and it has not answered \
                 since, up to the timeout of {waited}{why}"
            ),
            code: EXIT_UNREACHABLE,
        },
        (Some(status), None) => Failure {
            message: format!("run {id} is still `{status}` after {waited}"),
            code: EXIT_TIMED_OUT,
        },
    }
}
