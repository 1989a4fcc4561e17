//! `aiki workflows`: each version's runs by status, its catalog entry, the pools serving it,
//! and the builds its live workers run (two at once during a rolling deploy, or a pod left
//! behind on old code).

use std::io::Write;

use aiki::ops::VersionView;
use serde_json::json;

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, relative, short};
use crate::runs::client;

pub(crate) async fn list(cli: &Cli, format: Format, out: &mut impl Write) -> Result<u8, Failure> {
    let versions = VersionView::read_all(&client(cli).await?).await?;
    match format {
        Format::Table => table(&versions, out)?,
        Format::Jsonl => {
            for version in &versions {
                json(out, format, &json!(version))?;
            }
        }
        _ => json(out, format, &json!(versions))?,
    }
    Ok(0)
}

fn table(versions: &[VersionView], out: &mut impl Write) -> Result<(), Failure> {
    let mut table = Table::new(&[
        "workflow",
        "version",
        "runs by status",
        "oldest queued",
        "events",
        "tasks",
        "served in pools",
        "live builds",
    ]);
    for version in versions {
        let by_status: Vec<String> = version
            .counts
            .iter()
            .flat_map(|counts| &counts.by_status)
            .map(|(status, count)| format!("{status} {count}"))
            .collect();
        let entry = version.catalog.as_ref();
        let names = |names: Vec<&str>| match entry {
            None => "(not in the catalog)".to_owned(),
            Some(_) => names.join(", "),
        };
        table.row(vec![
            version.workflow.clone(),
            version.version.clone(),
            by_status.join(", "),
            version.oldest_queued_at.map(relative).unwrap_or_default(),
            names(
                entry
                    .iter()
                    .flat_map(|e| &e.events)
                    .map(|e| e.name.as_str())
                    .collect(),
            ),
            names(
                entry
                    .iter()
                    .flat_map(|e| &e.tasks)
                    .map(|t| t.name.as_str())
                    .collect(),
            ),
            if version.pools.is_empty() {
                "no live worker".to_owned()
            } else {
                version.pools.iter().cloned().collect::<Vec<_>>().join(", ")
            },
            builds(version),
        ]);
    }
    table.print(out)
}

/// `3f2a9c1b7d4e`, or `MIXED: 3f2a9c1b7d4e (2 workers), 9b1c… (1 worker)`.
fn builds(version: &VersionView) -> String {
    let each: Vec<String> = version
        .live_builds()
        .into_iter()
        .map(|(fingerprint, workers)| {
            let n = workers.len();
            format!(
                "{} ({n} worker{})",
                short(fingerprint),
                if n == 1 { "" } else { "s" }
            )
        })
        .collect();
    match each.len() {
        0 => String::new(),
        1 => each.join(""),
        _ => format!("MIXED: {}", each.join(", ")),
    }
}
