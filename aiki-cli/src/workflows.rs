//! `aiki workflows`: each version's runs by status, its catalog entry, the pools serving it or
//! the push endpoint its runs go to, and the builds its live workers run (two at once during a
//! rolling deploy, or a pod left behind on old code).

use std::io::Write;

use aiki::ops::VersionView;
use aiki::{Client, MigrationMode};
use serde_json::json;

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, relative, short};
use crate::runs::with_actor;

pub(crate) async fn list(cli: &Cli, format: Format, out: &mut impl Write) -> Result<u8, Failure> {
    let store = aiki::store::open(cli.url()?, MigrationMode::Check).await?;
    // Push endpoints are read on the store itself; a server does not show them.
    let endpoints = match store.clone().whole() {
        Some(whole) => Some(whole.endpoints().await?),
        None => None,
    };
    let client = with_actor(cli, Client::new(store));
    let versions = VersionView::read_all(&client, endpoints.as_deref().unwrap_or_default()).await?;
    match format {
        Format::Table => table(&versions, endpoints.is_some(), out)?,
        Format::Jsonl => {
            for version in &versions {
                json(out, format, &json!(version))?;
            }
        }
        _ => json(out, format, &json!(versions))?,
    }
    Ok(0)
}

/// The table; `endpoints_read`: whether the push endpoints could be read (not through a
/// server).
fn table(
    versions: &[VersionView],
    endpoints_read: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let mut table = Table::new(&[
        "workflow",
        "version",
        "runs by status",
        "oldest queued",
        "events",
        "tasks",
        "served by",
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
            served(version, endpoints_read),
            builds(version),
        ]);
    }
    table.print(out)
}

/// Who serves the version: the pools of its live workers, and the push endpoint its runs go
/// to; else that no live worker does (and, through a server, that endpoints are not shown).
fn served(version: &VersionView, endpoints_read: bool) -> String {
    let pools = version.pools.iter().cloned().collect::<Vec<_>>().join(", ");
    match (&version.pushed_to, pools.is_empty()) {
        (Some(url), true) => format!("pushed to {url}"),
        (Some(url), false) => format!("{pools}; pushed to {url}"),
        (None, false) => pools,
        (None, true) if endpoints_read => "no live worker".to_owned(),
        (None, true) => {
            "no live worker (push endpoints are shown on the store itself, not through a server)"
                .to_owned()
        }
    }
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
