//! Checks of API keys: kept as given, found by id, listed, revoked once, ids unique.

use super::LOCAL_TIME;
use crate::{ApiKeyRecord, RunId, Scope, Store, StoreError};

/// A key is kept as given, found by its id, listed, and revoked once (a second revocation
/// keeps the first time); a taken id is refused and an unknown one is not found.
pub async fn check_api_keys_are_kept_found_and_revoked(store: &dyn Store) {
    let id = format!(
        "k{}",
        RunId::new().to_string().replace('-', "")[..12].to_owned()
    );
    let key = ApiKeyRecord::new(
        id.clone(),
        "billing workers",
        "ab".repeat(32),
        vec![Scope::Executor, Scope::Read],
        LOCAL_TIME,
    );
    store.create_key(key.clone()).await.expect("create_key");
    assert_eq!(store.key(&id).await.expect("key"), Some(key.clone()));
    assert!(key.allows(Scope::Executor) && !key.allows(Scope::Operator));
    let listed = store.keys().await.expect("keys");
    assert_eq!(
        listed.iter().filter(|listed| listed.id == id).count(),
        1,
        "listed once: {listed:?}"
    );
    let mut again = key.clone();
    again.name = "someone else".to_owned();
    assert!(
        matches!(
            store.create_key(again).await,
            Err(StoreError::AlreadyExists { .. })
        ),
        "a taken id is refused"
    );
    assert_eq!(
        store.key(&id).await.unwrap(),
        Some(key.clone()),
        "unchanged"
    );
    let revoked = store.revoke_key(&id, LOCAL_TIME + 5).await.expect("revoke");
    assert_eq!(revoked.revoked_at, Some(LOCAL_TIME + 5));
    assert!(
        !revoked.allows(Scope::Executor),
        "a revoked key opens nothing"
    );
    let twice = store.revoke_key(&id, LOCAL_TIME + 9).await.expect("revoke");
    assert_eq!(
        twice.revoked_at,
        Some(LOCAL_TIME + 5),
        "the first revocation stands"
    );
    assert_eq!(store.key(&id).await.unwrap(), Some(twice));
    assert_eq!(store.key("k-unknown").await.expect("key"), None);
    assert!(matches!(
        store.revoke_key("k-unknown", LOCAL_TIME).await,
        Err(StoreError::NotFound { .. })
    ));
}
