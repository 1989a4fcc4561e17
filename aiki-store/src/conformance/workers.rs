//! Workers' heartbeats.

use super::*;

/// A heartbeat is upserted by worker id, and listed while it is recent.
pub async fn check_worker_heartbeats(store: &dyn Store) {
    let now = LOCAL_TIME;
    let id = format!("worker-{}", RunId::new());
    let served = vec![namespace(), namespace()];
    let beat = crate::WorkerRecord::new(&id, "host-a", 4242, served.clone(), "default", now);
    let written = store.record_worker(beat, now + 10).await.expect("record");
    assert_eq!(written.last_seen_at, now + 10);
    let mine = |workers: Vec<crate::WorkerRecord>| {
        workers
            .into_iter()
            .filter(|w| w.id == id)
            .collect::<Vec<_>>()
    };
    let live = mine(store.list_workers(now + 20, 1_000).await.expect("list"));
    assert_eq!(live, std::slice::from_ref(&written), "seen 10 ms ago");
    assert!(live[0].serves(&served[1], "default"));
    assert!(!live[0].serves(&served[1], "gpu"));
    assert!(
        mine(store.list_workers(now + 5_000, 1_000).await.expect("list")).is_empty(),
        "not seen for 4.99 s"
    );
    let again = store
        .record_worker(
            crate::WorkerRecord::new(&id, "host-a", 4242, served[..1].to_vec(), "default", now),
            now + 6_000,
        )
        .await
        .expect("record again");
    let live = mine(store.list_workers(now + 6_000, 1_000).await.expect("list"));
    assert_eq!(live, [again], "one row per worker, replaced");
    assert_eq!(live[0].namespaces, served[..1]);
}

/// A catalog entry is kept per build (version and fingerprint), the first publication winning,
/// with the tasks the build's runs were seen calling, and listed by name and version.
pub async fn check_catalog_entries(store: &dyn Store) {
    let now = LOCAL_TIME;
    let (first, second) = (namespace(), namespace());
    let schema = |n: u64| {
        crate::SchemaRecord::new(serde_json::json!({"type": "integer", "minimum": n}), "f")
    };
    let entry = |ns: &Namespace, fingerprint: &str| {
        crate::CatalogEntry::new(ns.clone(), schema(1), schema(2))
            .fingerprint(fingerprint)
            .events(vec![crate::EventDeclaration::new("approved", schema(3))])
            .retry(serde_json::json!({"kind": "never"}))
            .published_by("worker-a")
    };
    let mine = |entries: Vec<crate::CatalogEntry>| {
        entries
            .into_iter()
            .filter(|e| e.namespace == first || e.namespace == second)
            .collect::<Vec<_>>()
    };
    let written = store
        .publish_catalog(entry(&second, "v1"), now + 10)
        .await
        .expect("publish");
    assert_eq!(written.published_at, now + 10);
    store
        .publish_catalog(entry(&first, "v1"), now + 20)
        .await
        .expect("publish");
    let listed = mine(store.catalog().await.expect("catalog"));
    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(
        listed
            .iter()
            .map(|e| e.namespace.clone())
            .collect::<Vec<_>>(),
        expected,
        "by name and version"
    );
    let stored = listed.iter().find(|e| e.namespace == second).unwrap();
    assert_eq!(stored, &written, "stored as published");
    assert_eq!(
        stored.event("approved").map(|e| &e.payload),
        Some(&schema(3))
    );
    let newer = store
        .publish_catalog(entry(&second, "v2").published_by("worker-b"), now + 30)
        .await
        .expect("publish another build");
    let listed = mine(store.catalog().await.expect("catalog"));
    assert_eq!(listed.len(), 3, "one entry per build: {listed:?}");
    let builds: Vec<(&str, &str)> = listed
        .iter()
        .filter(|e| e.namespace == second)
        .map(|e| (e.fingerprint.as_str(), e.published_by.as_str()))
        .collect();
    assert_eq!(
        builds,
        [("v1", "worker-a"), ("v2", "worker-b")],
        "oldest first; the older build stays"
    );
    // An older pod restarting republishes its build: the build's first entry stands.
    let republished = store
        .publish_catalog(entry(&second, "v1").published_by("worker-c"), now + 40)
        .await
        .expect("republish");
    assert_eq!(
        (republished.published_by.as_str(), republished.published_at),
        ("worker-a", now + 10),
        "the first publication of a build wins"
    );
    let listed = mine(store.catalog().await.expect("catalog"));
    assert_eq!(listed.len(), 3);
    assert!(
        listed.contains(&newer),
        "the newer build's entry is still there"
    );
    assert!(listed.contains(&republished), "{listed:?}");
    // Tasks the build's runs call, added to its entry alone, the first declaration of a name
    // kept.
    let task = |name: &str, minimum: u64| {
        crate::TaskDeclaration::new(name, schema(minimum), serde_json::json!({"kind": "never"}))
    };
    store
        .add_catalog_tasks(&second, "v1", vec![task("charge", 5), task("audit", 6)])
        .await
        .expect("add called tasks");
    store
        .add_catalog_tasks(&second, "v1", vec![task("charge", 7)])
        .await
        .expect("add a known task again");
    let listed = mine(store.catalog().await.expect("catalog"));
    let tasks_of = |fingerprint: &str| {
        listed
            .iter()
            .find(|e| e.namespace == second && e.fingerprint == fingerprint)
            .map(|e| e.tasks.clone())
            .unwrap()
    };
    assert_eq!(
        tasks_of("v1"),
        [task("audit", 6), task("charge", 5)],
        "by name, first kept"
    );
    assert!(tasks_of("v2").is_empty(), "the other build is untouched");
    let again = store
        .publish_catalog(entry(&second, "v1"), now + 50)
        .await
        .expect("republish");
    assert_eq!(
        again.tasks.len(),
        2,
        "publishing returns the called tasks too"
    );
}

/// A heartbeat carries the worker's builds and claim timing, and its last one says it
/// stopped; workers not seen for long are pruned, the others stay.
///
/// Pruning reaches every worker row, so this check holds the `SWEEPS` lock and works at
/// [`GLOBAL_TIME`](super::GLOBAL_TIME): a prune at [`LOCAL_TIME`] deleted the rows of
/// [`check_worker_heartbeats`] running beside it on a shared database.
pub async fn check_workers_say_their_build_and_when_they_stop_and_are_pruned(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let lease = super::leader(store, now).await;
    let id = format!("worker-{}", RunId::new());
    let served = vec![namespace()];
    let builds: std::collections::BTreeMap<String, String> =
        [(served[0].to_string(), "fp-1".to_owned())].into();
    let beat = crate::WorkerRecord::new(&id, "host-a", 7, served.clone(), "default", now)
        .fingerprints(builds.clone())
        .claim_timing(30_000, 90_000);
    store
        .record_worker(beat.clone(), now + 10)
        .await
        .expect("beat");
    let stopped = store
        .record_worker(beat.stopped(now + 20), now + 20)
        .await
        .expect("last beat");
    let listed: Vec<crate::WorkerRecord> = store
        .list_workers(now + 30, 60_000)
        .await
        .expect("list")
        .into_iter()
        .filter(|w| w.id == id)
        .collect();
    assert_eq!(listed, std::slice::from_ref(&stopped));
    assert_eq!(listed[0].fingerprints, builds);
    assert_eq!(listed[0].stopped_at, Some(now + 20));
    assert_eq!(
        (listed[0].claim_refresh_ms, listed[0].claim_idle_timeout_ms),
        (Some(30_000), Some(90_000))
    );
    let other = format!("worker-{}", RunId::new());
    store
        .record_worker(
            crate::WorkerRecord::new(&other, "host-b", 8, served, "default", now),
            now + 100_000,
        )
        .await
        .expect("a younger beat");
    let pruned = store
        .prune_workers(&lease, now + 100_000, 50_000)
        .await
        .expect("prune");
    assert!(pruned >= 1, "{pruned}");
    let left: Vec<String> = store
        .list_workers(now + 100_000, 1_000_000)
        .await
        .expect("list")
        .into_iter()
        .map(|w| w.id)
        .filter(|w| *w == id || *w == other)
        .collect();
    assert_eq!(left, [other], "the old row is gone, the young one stays");
}
