//! Checks of push endpoints: written by compare-and-set, listed with their secrets, removed.

use super::LOCAL_TIME;
use crate::{EndpointRecord, EndpointSecret, Namespace, RunId, Store, StoreError};

/// An endpoint is written only as new or at the revision last read (a write that came between
/// is refused and changes nothing), listed with its secrets as written, and removed once.
pub async fn check_endpoints_are_written_by_compare_and_set(store: &dyn Store) {
    let namespace = Namespace::new(format!("push-{}", RunId::new()), "1");
    let secret = EndpointSecret::generate(LOCAL_TIME);
    let new = EndpointRecord::new(
        namespace.clone(),
        "http://127.0.0.1:9/push",
        5_000,
        secret.clone(),
        LOCAL_TIME,
    );
    let written = store.put_endpoint(new.clone(), None).await.expect("put");
    assert_eq!(written.revision, 1);
    assert!(
        matches!(
            store.put_endpoint(new, None).await,
            Err(StoreError::AlreadyExists { .. })
        ),
        "a second new endpoint of the version is refused"
    );
    let mut rotated = written.clone();
    rotated
        .rotate(
            EndpointSecret::generate(LOCAL_TIME + 1),
            60_000,
            LOCAL_TIME + 1,
        )
        .unwrap();
    let rotated = store
        .put_endpoint(rotated, Some(1))
        .await
        .expect("put at revision 1");
    assert_eq!(rotated.revision, 2);
    let mut stale = written.clone();
    stale.url = "http://127.0.0.1:9/elsewhere".to_owned();
    assert!(
        matches!(
            store.put_endpoint(stale, Some(1)).await,
            Err(StoreError::AlreadyExists { .. })
        ),
        "a write at a revision no longer held is refused"
    );
    let listed: Vec<EndpointRecord> = store
        .endpoints()
        .await
        .expect("endpoints")
        .into_iter()
        .filter(|endpoint| endpoint.namespace == namespace)
        .collect();
    assert_eq!(listed, vec![rotated.clone()], "as written, secrets and all");
    assert_eq!(listed[0].secrets[0].secret, secret.secret);
    assert_eq!(listed[0].active_secrets(LOCAL_TIME + 2).count(), 2);
    let removed = store.remove_endpoint(&namespace).await.expect("remove");
    assert_eq!(removed, rotated);
    assert!(matches!(
        store.remove_endpoint(&namespace).await,
        Err(StoreError::NotFound { .. })
    ));
}
