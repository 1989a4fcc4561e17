//! `aiki workflows` (each version's runs by status, its catalog entry, the pools serving it)
//! and `aiki migrate`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use aiki::{MigrationMode, Namespace};
use aiki_store::{CatalogEntry, RunCounts};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, relative};
use crate::runs::client;

/// One workflow version: its runs (if any) and its catalog entry (if published).
struct Version<'a> {
    namespace: &'a Namespace,
    counts: Option<&'a RunCounts>,
    entry: Option<&'a CatalogEntry>,
    /// The pools of the live workers that serve it.
    pools: BTreeSet<&'a str>,
}

pub(crate) async fn list(cli: &Cli, format: Format, out: &mut impl Write) -> Result<u8, Failure> {
    let client = client(cli).await?;
    let counts = client.store().run_counts().await?;
    let catalog = client.catalog().await?;
    let workers = crate::workers::live(&client).await?;
    let mut versions: BTreeMap<&Namespace, Version<'_>> = BTreeMap::new();
    let version = |namespace| Version {
        namespace,
        counts: None,
        entry: None,
        pools: workers
            .iter()
            .filter(|worker| worker.namespaces.contains(namespace))
            .map(|worker| worker.pool.as_str())
            .collect(),
    };
    for count in &counts {
        versions
            .entry(&count.namespace)
            .or_insert_with(|| version(&count.namespace))
            .counts = Some(count);
    }
    for entry in &catalog {
        versions
            .entry(&entry.namespace)
            .or_insert_with(|| version(&entry.namespace))
            .entry = Some(entry);
    }
    if format == Format::Table {
        let mut table = Table::new(&[
            "workflow",
            "version",
            "runs by status",
            "oldest queued",
            "events",
            "tasks",
            "served in pools",
        ]);
        for version in versions.values() {
            let by_status: Vec<String> = version
                .counts
                .iter()
                .flat_map(|counts| &counts.by_status)
                .map(|(status, count)| format!("{status} {count}"))
                .collect();
            let names = |names: Vec<&str>| match version.entry {
                None => "(not in the catalog)".to_owned(),
                Some(_) => names.join(", "),
            };
            let entry = version.entry;
            table.row(vec![
                version.namespace.workflow.clone(),
                version.namespace.version.clone(),
                by_status.join(", "),
                version
                    .counts
                    .and_then(|counts| counts.oldest_queued_at)
                    .map(relative)
                    .unwrap_or_default(),
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
                    version.pools.iter().copied().collect::<Vec<_>>().join(", ")
                },
            ]);
        }
        table.print(out)?;
        return Ok(0);
    }
    let documents: Vec<Value> = versions
        .values()
        .map(|version| {
            let by_status: BTreeMap<String, u64> = version
                .counts
                .iter()
                .flat_map(|counts| &counts.by_status)
                .map(|(status, count)| (status.to_string(), *count))
                .collect();
            json!({
                "workflow": version.namespace.workflow,
                "version": version.namespace.version,
                "by_status": by_status,
                "oldest_queued_at": version.counts.and_then(|counts| counts.oldest_queued_at),
                "catalog": version.entry,
                "pools": version.pools,
            })
        })
        .collect();
    if format == Format::Jsonl {
        for document in &documents {
            json(out, format, document)?;
        }
        return Ok(0);
    }
    json(out, format, &json!(documents))?;
    Ok(0)
}

pub(crate) async fn migrate(cli: &Cli, out: &mut impl Write) -> Result<u8, Failure> {
    let store = aiki::connect_with_mode(cli.url()?, MigrationMode::Apply).await?;
    drop(store);
    // Not the URL: it may hold a password.
    writeln!(out, "the store's schema is up to date")?;
    Ok(0)
}
