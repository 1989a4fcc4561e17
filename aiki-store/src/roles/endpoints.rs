//! The push endpoints an aiki server's dispatcher delivers to (the operator's role: `aiki
//! endpoints` works on the store directly, as `aiki keys` does).

use std::fmt::Debug;

use async_trait::async_trait;

use crate::{EndpointRecord, Namespace, StoreError};

/// The endpoint role of the store contract: setting, reading and removing push endpoints and
/// their secrets. Dispatchers read endpoints through it; no remote caller reaches it, and no
/// route of the API returns a secret.
#[async_trait]
pub trait EndpointStore: Send + Sync + Debug + 'static {
    /// Writes `endpoint` if its revision is `expected` (`None`: only if its workflow version
    /// has no endpoint yet), incrementing the revision. Returns it as written;
    /// [`StoreError::AlreadyExists`] when another write came first (the endpoint exists, or it
    /// changed or was removed since revision `expected`; nothing written),
    /// [`StoreError::Invalid`] on a schema without endpoints.
    async fn put_endpoint(
        &self,
        endpoint: EndpointRecord,
        expected: Option<u64>,
    ) -> Result<EndpointRecord, StoreError>;

    /// Every endpoint with its secrets, by workflow and version.
    async fn endpoints(&self) -> Result<Vec<EndpointRecord>, StoreError>;

    /// Removes the endpoint of `namespace`; returns it as it was. [`StoreError::NotFound`] when
    /// there is none.
    async fn remove_endpoint(&self, namespace: &Namespace) -> Result<EndpointRecord, StoreError>;
}
