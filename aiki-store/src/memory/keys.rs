//! The memory store's API keys.

use async_trait::async_trait;

use super::MemoryStore;
use crate::{ApiKeyRecord, KeyStore, Millis, StoreError};

#[async_trait]
impl KeyStore for MemoryStore {
    async fn create_key(&self, key: ApiKeyRecord) -> Result<(), StoreError> {
        let mut state = self.lock();
        if state.keys.iter().any(|held| held.id == key.id) {
            return Err(StoreError::AlreadyExists {
                what: format!("API key {}", key.id),
            });
        }
        state.keys.push(key);
        Ok(())
    }

    async fn key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        Ok(self.lock().keys.iter().find(|key| key.id == id).cloned())
    }

    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        Ok(self.lock().keys.clone())
    }

    async fn revoke_key(&self, id: &str, now: Millis) -> Result<ApiKeyRecord, StoreError> {
        let mut state = self.lock();
        let key = state
            .keys
            .iter_mut()
            .find(|key| key.id == id)
            .ok_or_else(|| StoreError::NotFound {
                what: format!("API key {id}"),
            })?;
        key.revoked_at.get_or_insert(now);
        Ok(key.clone())
    }
}
