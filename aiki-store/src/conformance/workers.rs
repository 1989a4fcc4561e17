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

/// A catalog entry is upserted by workflow version and listed by name and version.
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
    let replaced = store
        .publish_catalog(entry(&second, "v2").published_by("worker-b"), now + 30)
        .await
        .expect("publish again");
    let listed = mine(store.catalog().await.expect("catalog"));
    assert_eq!(listed.len(), 2, "one entry per version");
    let stored = listed.iter().find(|e| e.namespace == second).unwrap();
    assert_eq!(stored, &replaced);
    assert_eq!(
        (stored.fingerprint.as_str(), stored.published_by.as_str()),
        ("v2", "worker-b")
    );
}
