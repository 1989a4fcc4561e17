//! `aiki workers`: the workers seen lately.

use std::io::Write;
use std::time::Duration;

use aiki::Client;
use aiki_store::WorkerRecord;

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, relative};
use crate::runs::client;

/// A worker counts as live when its heartbeat is at most this old: four beats at the default
/// claim-refresh interval (30 s).
pub(crate) const LIVE_WITHIN: Duration = Duration::from_secs(120);

/// The live workers.
pub(crate) async fn live(client: &Client) -> Result<Vec<WorkerRecord>, Failure> {
    Ok(client.live_workers(LIVE_WITHIN).await?)
}

pub(crate) async fn list(cli: &Cli, format: Format, out: &mut impl Write) -> Result<u8, Failure> {
    let workers = live(&client(cli).await?).await?;
    match format {
        Format::Table => {
            let mut table = Table::new(&["id", "host", "pid", "pool", "serves", "started", "seen"]);
            for worker in &workers {
                let serves: Vec<String> = worker.namespaces.iter().map(|n| n.to_string()).collect();
                table.row(vec![
                    worker.id.clone(),
                    worker.host.clone(),
                    worker.pid.to_string(),
                    worker.pool.clone(),
                    serves.join(", "),
                    relative(worker.started_at),
                    relative(worker.last_seen_at),
                ]);
            }
            table.print(out)?;
            if workers.is_empty() {
                writeln!(
                    out,
                    "no worker seen in the last {} s",
                    LIVE_WITHIN.as_secs()
                )?;
            }
        }
        Format::Json => json(out, format, &serde_json::to_value(&workers)?)?,
        Format::Jsonl => {
            for worker in &workers {
                json(out, format, &serde_json::to_value(worker)?)?;
            }
        }
    }
    Ok(0)
}
