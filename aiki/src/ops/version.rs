//! The catalog view: each workflow version's runs by status, the catalog entry in force, the
//! pools serving it, the push endpoint its runs go to, and the builds its live workers run.

use std::collections::{BTreeMap, BTreeSet};

use aiki_store::{CatalogEntry, EndpointRecord, Millis, Namespace, RunCounts, WorkerRecord};
use serde::Serialize;

use crate::liveness::Liveness;
use crate::{Client, ClientError};

/// How far back workers are read; only the live ones count.
const WORKERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(3600);

/// What live workers that say nothing of their build run.
const UNKNOWN_BUILD: &str = "unknown";

/// One workflow version as an operator sees it. Its JSON shape is `aiki workflows --format
/// json`'s.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct VersionView {
    /// The workflow's name.
    pub workflow: String,
    /// The version.
    pub version: String,
    /// Its runs, counted by status (statuses with none left out).
    pub by_status: BTreeMap<String, u64>,
    /// When its oldest queued run was queued.
    pub oldest_queued_at: Option<Millis>,
    /// The entry that starts and events are checked against first: the newest build a live
    /// worker runs, else the newest published.
    pub catalog: Option<CatalogEntry>,
    /// The pools of the live workers that serve it.
    pub pools: BTreeSet<String>,
    /// The URL of the push endpoint its runs are delivered to (`aiki endpoints set`), if one is
    /// set: it is served without a live worker. Always `None` when the endpoints were not read
    /// (through an aiki server, which does not show them).
    pub pushed_to: Option<String>,
    /// Its builds: each published one, newest first, then those live workers run unpublished.
    pub builds: Vec<BuildView>,
    /// Whether its live workers run different builds (a rolling deploy, or a pod left behind
    /// on old code).
    pub mixed_builds: bool,
    /// Its run counts, as the store gave them.
    #[serde(skip)]
    pub counts: Option<RunCounts>,
}

/// One build of a workflow version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct BuildView {
    /// The build's fingerprint (`unknown` for workers that do not say).
    pub fingerprint: String,
    /// The worker that published it first (`None`: not published).
    pub published_by: Option<String>,
    /// When (`None`: not published).
    pub published_at: Option<Millis>,
    /// The live workers running it.
    pub live_workers: Vec<String>,
}

impl VersionView {
    /// Every version with runs, a catalog entry or a push endpoint, read through `client`, by
    /// name and version, judged at the client's clock. `endpoints` are the store's push
    /// endpoints ([`EndpointStore::endpoints`](aiki_store::EndpointStore::endpoints), read on
    /// the store itself; none through a server).
    pub async fn read_all(
        client: &Client,
        endpoints: &[EndpointRecord],
    ) -> Result<Vec<VersionView>, ClientError> {
        let counts = client.store().run_counts().await?;
        let catalog = client.catalog().await?;
        let workers = client.live_workers(WORKERS_WITHIN).await?;
        Ok(VersionView::of(
            counts,
            catalog,
            &workers,
            endpoints,
            client.clock.now(),
        ))
    }

    /// The views of what was read: run `counts`, the `catalog`, the `workers` seen lately, the
    /// push `endpoints`, at `now` (by the clock heartbeats are timed by).
    pub fn of(
        counts: Vec<RunCounts>,
        mut catalog: Vec<CatalogEntry>,
        workers: &[WorkerRecord],
        endpoints: &[EndpointRecord],
        now: Millis,
    ) -> Vec<VersionView> {
        catalog.sort_by_key(|entry| std::cmp::Reverse(entry.published_at));
        let live: Vec<&WorkerRecord> = workers
            .iter()
            .filter(|worker| Liveness::of(worker, now).is_live())
            .collect();
        type Read = (Option<RunCounts>, Vec<CatalogEntry>);
        let mut read: BTreeMap<Namespace, Read> = BTreeMap::new();
        for count in counts {
            let namespace = count.namespace.clone();
            read.entry(namespace).or_default().0 = Some(count);
        }
        for entry in catalog {
            read.entry(entry.namespace.clone())
                .or_default()
                .1
                .push(entry);
        }
        for endpoint in endpoints {
            read.entry(endpoint.namespace.clone()).or_default();
        }
        read.into_iter()
            .map(|(namespace, (counts, entries))| {
                let mut view = VersionView::new(&namespace, counts, entries, &live);
                view.pushed_to = endpoints
                    .iter()
                    .find(|endpoint| endpoint.namespace == namespace)
                    .map(|endpoint| endpoint.url.clone());
                view
            })
            .collect()
    }

    /// The view of one version: its `counts`, its catalog `entries` (newest first), and the
    /// `live` workers.
    fn new(
        namespace: &Namespace,
        counts: Option<RunCounts>,
        entries: Vec<CatalogEntry>,
        live: &[&WorkerRecord],
    ) -> VersionView {
        let serving: Vec<&WorkerRecord> = live
            .iter()
            .copied()
            .filter(|worker| worker.namespaces.contains(namespace))
            .collect();
        let mut running: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for worker in &serving {
            let build = worker
                .fingerprints
                .get(&namespace.to_string())
                .map_or(UNKNOWN_BUILD, String::as_str);
            running
                .entry(build.to_owned())
                .or_default()
                .push(worker.id.clone());
        }
        let mut builds: Vec<BuildView> = entries
            .iter()
            .map(|entry| BuildView {
                fingerprint: entry.fingerprint.clone(),
                published_by: Some(entry.published_by.clone()),
                published_at: Some(entry.published_at),
                live_workers: running.get(&entry.fingerprint).cloned().unwrap_or_default(),
            })
            .collect();
        let mixed_builds = running.len() > 1;
        for (fingerprint, live_workers) in running {
            if !entries.iter().any(|entry| entry.fingerprint == fingerprint) {
                builds.push(BuildView {
                    fingerprint,
                    published_by: None,
                    published_at: None,
                    live_workers,
                });
            }
        }
        let is_live = |entry: &&CatalogEntry| {
            builds
                .iter()
                .any(|b| b.fingerprint == entry.fingerprint && !b.live_workers.is_empty())
        };
        let catalog = entries.iter().find(is_live).or(entries.first()).cloned();
        VersionView {
            workflow: namespace.workflow.clone(),
            version: namespace.version.clone(),
            by_status: counts
                .iter()
                .flat_map(|counts| &counts.by_status)
                .map(|(status, n)| (status.to_string(), *n))
                .collect(),
            oldest_queued_at: counts.as_ref().and_then(|counts| counts.oldest_queued_at),
            catalog,
            pools: serving.iter().map(|worker| worker.pool.clone()).collect(),
            pushed_to: None,
            builds,
            mixed_builds,
            counts,
        }
    }

    /// The builds its live workers run, by fingerprint.
    pub fn live_builds(&self) -> BTreeMap<&str, &[String]> {
        let mut live = BTreeMap::new();
        for build in self.builds.iter().filter(|b| !b.live_workers.is_empty()) {
            live.entry(build.fingerprint.as_str())
                .or_insert(build.live_workers.as_slice());
        }
        live
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use aiki_store::{CatalogEntry, Namespace, RunCounts, RunStatus, SchemaRecord, WorkerRecord};
    use serde_json::json;

    use super::VersionView;

    const NOW: i64 = 1_000_000;

    fn build(namespace: &Namespace, fingerprint: &str, at: i64) -> CatalogEntry {
        let schema = SchemaRecord::new(json!({}), "s");
        let mut entry = CatalogEntry::new(namespace.clone(), schema.clone(), schema)
            .fingerprint(fingerprint)
            .published_by("w-publisher");
        entry.published_at = at;
        entry
    }

    fn worker(id: &str, namespace: &Namespace, fingerprint: &str) -> WorkerRecord {
        let builds = BTreeMap::from([(namespace.to_string(), fingerprint.to_owned())]);
        WorkerRecord::new(id, "host", 1, vec![namespace.clone()], "default", NOW)
            .fingerprints(builds)
    }

    #[test]
    fn the_entry_in_force_is_the_newest_build_a_live_worker_runs() {
        let ns = Namespace::new("orders", "1");
        let mut counts = RunCounts::new(ns.clone());
        counts.record(RunStatus::Queued, 2);
        let catalog = vec![build(&ns, "old", 10), build(&ns, "new", 20)];
        let mut gone = worker("w-gone", &ns, "new");
        gone.last_seen_at = 0;
        let workers = [
            worker("w-a", &ns, "old"),
            gone,
            worker("w-b", &ns, "unpublished"),
        ];
        let views = VersionView::of(vec![counts], catalog, &workers, &[], NOW);
        assert_eq!(views.len(), 1);
        let view = &views[0];
        assert_eq!(view.by_status.get("queued"), Some(&2));
        assert_eq!(
            view.catalog.as_ref().map(|c| c.fingerprint.as_str()),
            Some("old"),
            "the newer build's only worker is gone: the live build is in force"
        );
        let builds: Vec<(&str, Vec<&str>)> = view
            .builds
            .iter()
            .map(|b| {
                let workers = b.live_workers.iter().map(String::as_str).collect();
                (b.fingerprint.as_str(), workers)
            })
            .collect();
        assert_eq!(
            builds,
            [
                ("new", vec![]),
                ("old", vec!["w-a"]),
                ("unpublished", vec!["w-b"])
            ],
            "published builds newest first, then the unpublished one live workers run"
        );
        assert!(view.mixed_builds);
        assert_eq!(view.pools.iter().collect::<Vec<_>>(), ["default"]);
    }

    #[test]
    fn without_live_workers_the_newest_published_build_is_in_force() {
        let ns = Namespace::new("orders", "2");
        let catalog = vec![build(&ns, "a", 10), build(&ns, "b", 20)];
        let views = VersionView::of(Vec::new(), catalog, &[], &[], NOW);
        let view = &views[0];
        assert_eq!(
            view.catalog.as_ref().map(|c| c.fingerprint.as_str()),
            Some("b")
        );
        assert!(view.by_status.is_empty() && view.pools.is_empty() && !view.mixed_builds);
        assert_eq!(
            serde_json::to_value(view).unwrap()["builds"][0]["published_by"],
            json!("w-publisher")
        );
    }
}
