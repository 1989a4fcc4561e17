//! `aiki workflows`: each version's runs by status, its catalog entry, the pools serving it,
//! and the builds its live workers run (two at once during a rolling deploy, or a pod left
//! behind on old code).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use aiki::{Liveness, Namespace};
use aiki_store::{CatalogEntry, RunCounts, WorkerRecord};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, relative, short};
use crate::runs::client;

/// How far back workers are read; only the live ones count.
const WORKERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(3600);

/// What live workers that say nothing of their build run.
const UNKNOWN_BUILD: &str = "unknown";

/// One workflow version: its runs (if any), its catalog entries (one per build published),
/// and what its live workers run.
struct Version<'a> {
    namespace: &'a Namespace,
    counts: Option<&'a RunCounts>,
    /// Newest published first.
    builds: Vec<&'a CatalogEntry>,
    /// The pools of the live workers that serve it.
    pools: BTreeSet<&'a str>,
    /// The builds its live workers run: fingerprint, and the workers running it.
    live: BTreeMap<&'a str, Vec<&'a str>>,
}

impl Version<'_> {
    /// The entry that starts and events are checked against first: the newest build a live
    /// worker runs, else the newest published.
    fn entry(&self) -> Option<&CatalogEntry> {
        self.builds
            .iter()
            .find(|entry| self.live.contains_key(entry.fingerprint.as_str()))
            .or(self.builds.first())
            .copied()
    }

    /// Whether its live workers run different builds.
    fn mixed(&self) -> bool {
        self.live.len() > 1
    }
}

pub(crate) async fn list(cli: &Cli, format: Format, out: &mut impl Write) -> Result<u8, Failure> {
    let client = client(cli).await?;
    let counts = client.store().run_counts().await?;
    let mut catalog = client.catalog().await?;
    catalog.sort_by_key(|entry| std::cmp::Reverse(entry.published_at));
    let now = aiki::Clock::now(&aiki::SystemClock);
    let workers: Vec<WorkerRecord> = client
        .live_workers(WORKERS_WITHIN)
        .await?
        .into_iter()
        .filter(|worker| Liveness::of(worker, now).is_live())
        .collect();
    let mut versions: BTreeMap<&Namespace, Version<'_>> = BTreeMap::new();
    let version = |namespace: &'_ Namespace| {
        let serving: Vec<&WorkerRecord> = workers
            .iter()
            .filter(|worker| worker.namespaces.contains(namespace))
            .collect();
        let mut live: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for worker in &serving {
            let build = worker
                .fingerprints
                .get(&namespace.to_string())
                .map_or(UNKNOWN_BUILD, String::as_str);
            live.entry(build).or_default().push(worker.id.as_str());
        }
        (serving.iter().map(|w| w.pool.as_str()).collect(), live)
    };
    for count in &counts {
        let (pools, live) = version(&count.namespace);
        versions.entry(&count.namespace).or_insert(Version {
            namespace: &count.namespace,
            counts: None,
            builds: Vec::new(),
            pools,
            live,
        });
        versions.get_mut(&count.namespace).expect("inserted").counts = Some(count);
    }
    for entry in &catalog {
        let (pools, live) = version(&entry.namespace);
        versions
            .entry(&entry.namespace)
            .or_insert(Version {
                namespace: &entry.namespace,
                counts: None,
                builds: Vec::new(),
                pools,
                live,
            })
            .builds
            .push(entry);
    }
    match format {
        Format::Table => table(&versions, out)?,
        _ => {
            let documents: Vec<Value> = versions.values().map(document).collect();
            if format == Format::Jsonl {
                for document in &documents {
                    json(out, format, document)?;
                }
            } else {
                json(out, format, &json!(documents))?;
            }
        }
    }
    Ok(0)
}

fn document(version: &Version<'_>) -> Value {
    let by_status: BTreeMap<String, u64> = version
        .counts
        .iter()
        .flat_map(|counts| &counts.by_status)
        .map(|(status, count)| (status.to_string(), *count))
        .collect();
    let mut builds: Vec<Value> = version
        .builds
        .iter()
        .map(|entry| {
            json!({
                "fingerprint": entry.fingerprint,
                "published_by": entry.published_by,
                "published_at": entry.published_at,
                "live_workers": version.live.get(entry.fingerprint.as_str()).cloned().unwrap_or_default(),
            })
        })
        .collect();
    for (fingerprint, workers) in &version.live {
        if !version.builds.iter().any(|e| e.fingerprint == *fingerprint) {
            builds.push(json!({
                "fingerprint": fingerprint,
                "published_by": null,
                "published_at": null,
                "live_workers": workers,
            }));
        }
    }
    json!({
        "workflow": version.namespace.workflow,
        "version": version.namespace.version,
        "by_status": by_status,
        "oldest_queued_at": version.counts.and_then(|counts| counts.oldest_queued_at),
        "catalog": version.entry(),
        "pools": version.pools,
        "builds": builds,
        "mixed_builds": version.mixed(),
    })
}

fn table(
    versions: &BTreeMap<&Namespace, Version<'_>>,
    out: &mut impl Write,
) -> Result<(), Failure> {
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
    for version in versions.values() {
        let by_status: Vec<String> = version
            .counts
            .iter()
            .flat_map(|counts| &counts.by_status)
            .map(|(status, count)| format!("{status} {count}"))
            .collect();
        let entry = version.entry();
        let names = |names: Vec<&str>| match entry {
            None => "(not in the catalog)".to_owned(),
            Some(_) => names.join(", "),
        };
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
            builds(version),
        ]);
    }
    table.print(out)
}

/// `3f2a9c1b7d4e`, or `MIXED: 3f2a9c1b7d4e (2 workers), 9b1c… (1 worker)`.
fn builds(version: &Version<'_>) -> String {
    let each: Vec<String> = version
        .live
        .iter()
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
