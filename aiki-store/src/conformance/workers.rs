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
