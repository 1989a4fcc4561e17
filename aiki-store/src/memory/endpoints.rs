//! The memory store's push endpoints.

use async_trait::async_trait;

use super::MemoryStore;
use crate::model::written_meanwhile;
use crate::{EndpointRecord, EndpointStore, Namespace, StoreError};

#[async_trait]
impl EndpointStore for MemoryStore {
    async fn put_endpoint(
        &self,
        mut endpoint: EndpointRecord,
        expected: Option<u64>,
    ) -> Result<EndpointRecord, StoreError> {
        let mut state = self.lock();
        let key = (
            endpoint.namespace.workflow.clone(),
            endpoint.namespace.version.clone(),
        );
        let held = state.endpoints.get(&key).map(|held| held.revision);
        if held != expected {
            return Err(written_meanwhile(&endpoint.namespace, expected));
        }
        endpoint.revision = expected.map_or(1, |revision| revision + 1);
        state.endpoints.insert(key, endpoint.clone());
        Ok(endpoint)
    }

    async fn endpoints(&self) -> Result<Vec<EndpointRecord>, StoreError> {
        Ok(self.lock().endpoints.values().cloned().collect())
    }

    async fn remove_endpoint(&self, namespace: &Namespace) -> Result<EndpointRecord, StoreError> {
        self.lock()
            .endpoints
            .remove(&(namespace.workflow.clone(), namespace.version.clone()))
            .ok_or_else(|| StoreError::NotFound {
                what: format!("a push endpoint of {namespace}"),
            })
    }
}
