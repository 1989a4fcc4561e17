//! Push endpoints: where the runs of a workflow version are delivered by signed HTTP push,
//! and the secrets that sign the deliveries.

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};
use crate::StoreError;

/// The execution budget an endpoint is given when none is named: 60 s, a common request
/// timeout of serverless platforms.
pub const DEFAULT_BUDGET_MS: Millis = 60_000;

/// The most secrets active at once on one endpoint: the current one and, during a rotation,
/// the one it replaces.
pub const MAX_ACTIVE_SECRETS: usize = 2;

/// A push endpoint: the URL the runs of one workflow version are posted to, signed with its
/// active secrets. Kept in the store, so that every server in front of it agrees. Written
/// through [`EndpointStore`](crate::EndpointStore) by operators; no read of the API returns it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EndpointRecord {
    /// The workflow version delivered to it.
    pub namespace: Namespace,
    /// Where runs are posted (`http://` or `https://`).
    pub url: String,
    /// The endpoint's execution budget (the platform's request timeout), in ms: the endpoint
    /// hands a run back before it runs out, and the dispatcher waits this long and a margin
    /// before it counts a delivery as lost.
    pub budget_ms: Millis,
    /// Its secrets, oldest first; those not expired sign each delivery.
    pub secrets: Vec<EndpointSecret>,
    /// Grows with every write (compare-and-set, see
    /// [`EndpointStore::put_endpoint`](crate::EndpointStore::put_endpoint)).
    pub revision: u64,
    /// When it was first set.
    pub created_at: Millis,
    /// When it was last written.
    pub updated_at: Millis,
}

impl std::fmt::Debug for EndpointRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointRecord")
            .field("namespace", &self.namespace)
            .field("url", &self.url)
            .field("budget_ms", &self.budget_ms)
            .field("secrets", &self.secrets)
            .field("revision", &self.revision)
            .finish_non_exhaustive()
    }
}

impl EndpointRecord {
    /// A new endpoint of `namespace` at `url` with one secret, set at `now` (revision 0 until
    /// written).
    pub fn new(
        namespace: Namespace,
        url: impl Into<String>,
        budget_ms: Millis,
        secret: EndpointSecret,
        now: Millis,
    ) -> Self {
        EndpointRecord {
            namespace,
            url: url.into(),
            budget_ms,
            secrets: vec![secret],
            revision: 0,
            created_at: now,
            updated_at: now,
        }
    }

    /// The secrets that sign deliveries at `now`: those not expired.
    pub fn active_secrets(&self, now: Millis) -> impl Iterator<Item = &EndpointSecret> {
        self.secrets
            .iter()
            .filter(move |secret| secret.active_at(now))
    }

    /// Rotates at `now`: `secret` becomes the current secret, every secret active now expires
    /// at `now + overlap_ms` (the overlap in which the endpoint learns the new one), and
    /// secrets already expired are forgotten. More than [`MAX_ACTIVE_SECRETS`] would then be
    /// active: an error naming when the oldest expires.
    pub fn rotate(
        &mut self,
        secret: EndpointSecret,
        overlap_ms: Millis,
        now: Millis,
    ) -> Result<(), String> {
        self.secrets.retain(|held| held.active_at(now));
        if self.secrets.len() >= MAX_ACTIVE_SECRETS {
            let until = self
                .secrets
                .iter()
                .filter_map(|held| held.expires_at)
                .min()
                .unwrap_or(now);
            return Err(format!(
                "{} secrets of this endpoint are active (at most {MAX_ACTIVE_SECRETS}); rotate \
                 again once the older expires (at {until} ms since the epoch)",
                self.secrets.len()
            ));
        }
        let expires = now.saturating_add(overlap_ms.max(0));
        for held in &mut self.secrets {
            held.expires_at = Some(held.expires_at.map_or(expires, |at| at.min(expires)));
        }
        self.secrets.push(secret);
        self.updated_at = now;
        Ok(())
    }
}

/// One secret of an endpoint. Its `secret` is shown once, when it is made, and never read back
/// by a listing.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EndpointSecret {
    /// A public id naming it in listings (`sec_` and 8 hex digits).
    pub id: String,
    /// The secret itself (`whsec_` and 48 hex digits), the HMAC key.
    pub secret: String,
    /// When it was made.
    pub created_at: Millis,
    /// When it stops signing (set by a rotation); `None` while current.
    pub expires_at: Option<Millis>,
}

impl std::fmt::Debug for EndpointSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSecret")
            .field("id", &self.id)
            .field("created_at", &self.created_at)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl EndpointSecret {
    /// A fresh random secret made at `now`.
    pub fn generate(now: Millis) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let secret = format!(
            "whsec_{}{}",
            uuid::Uuid::new_v4().simple(),
            &uuid::Uuid::new_v4().simple().to_string()[..16]
        );
        EndpointSecret {
            id: format!("sec_{}", &id[..8]),
            secret,
            created_at: now,
            expires_at: None,
        }
    }

    /// Whether it signs at `now`.
    pub fn active_at(&self, now: Millis) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// The refusal of a write that another came before.
pub(crate) fn written_meanwhile(namespace: &Namespace, expected: Option<u64>) -> StoreError {
    let what = match expected {
        None => format!("a push endpoint of {namespace}"),
        Some(revision) => format!(
            "a change of the push endpoint of {namespace} since revision {revision} (written or \
             removed meanwhile); read it again and retry"
        ),
    };
    StoreError::AlreadyExists { what }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> EndpointRecord {
        EndpointRecord::new(
            Namespace::new("orders", "1"),
            "http://127.0.0.1:1/",
            DEFAULT_BUDGET_MS,
            EndpointSecret::generate(0),
            0,
        )
    }

    #[test]
    fn a_rotation_keeps_the_old_secret_for_the_overlap_only() {
        let mut endpoint = endpoint();
        let old = endpoint.secrets[0].id.clone();
        endpoint
            .rotate(EndpointSecret::generate(100), 1_000, 100)
            .unwrap();
        let active: Vec<_> = endpoint.active_secrets(500).map(|s| s.id.clone()).collect();
        assert_eq!(active.len(), 2);
        assert_eq!(active[0], old);
        let after: Vec<_> = endpoint
            .active_secrets(1_100)
            .map(|s| s.id.clone())
            .collect();
        assert_eq!(after.len(), 1);
        assert_ne!(after[0], old);
    }

    #[test]
    fn a_third_active_secret_is_refused() {
        let mut endpoint = endpoint();
        endpoint
            .rotate(EndpointSecret::generate(1), 1_000, 1)
            .unwrap();
        let error = endpoint
            .rotate(EndpointSecret::generate(2), 1_000, 2)
            .unwrap_err();
        assert!(error.contains("at most 2"), "{error}");
        // Once the older expired, a rotation is allowed again, and the expired one forgotten.
        endpoint
            .rotate(EndpointSecret::generate(2_000), 0, 2_000)
            .unwrap();
        assert_eq!(endpoint.secrets.len(), 2);
    }

    #[test]
    fn debug_never_shows_a_secret() {
        let endpoint = endpoint();
        let shown = format!("{endpoint:?}");
        assert!(!shown.contains(&endpoint.secrets[0].secret), "{shown}");
    }
}
