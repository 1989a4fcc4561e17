//! The API keys an aiki server checks requests against (the administrator's role: `aiki keys`
//! works on the store directly, so the first key needs no server).

use std::fmt::Debug;

use async_trait::async_trait;

use crate::{ApiKeyRecord, Millis, StoreError};

/// The key role of the store contract: creating, reading and revoking API keys. Servers read
/// keys through it; no remote caller reaches it.
#[async_trait]
pub trait KeyStore: Send + Sync + Debug + 'static {
    /// Keeps a new key. [`StoreError::AlreadyExists`] when its id is taken (nothing written);
    /// [`StoreError::Invalid`] on a schema without keys (migrate first).
    async fn create_key(&self, key: ApiKeyRecord) -> Result<(), StoreError>;

    /// The key of `id`, revoked or not; `None` when there is none (or no key table).
    async fn key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError>;

    /// Every key, revoked ones too, oldest first.
    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError>;

    /// Revokes the key of `id` at `now` (a key already revoked keeps its first revocation).
    /// Returns it as written; [`StoreError::NotFound`] for an unknown id.
    async fn revoke_key(&self, id: &str, now: Millis) -> Result<ApiKeyRecord, StoreError>;
}
