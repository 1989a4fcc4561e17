//! API keys: who may call an aiki server, and for what. The store keeps each key's id, the
//! SHA-256 of its secret (never the secret) and its scopes, so that every server in front of
//! one store checks requests against the same keys.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Millis, StoreError};

/// What a key may do: one scope per role of the contract a caller uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// A worker's operations ([`ExecutorStore`](crate::ExecutorStore)), and the reads.
    Executor,
    /// Starting runs, sending events and acting on runs
    /// ([`ClientStore`](crate::ClientStore)), and the reads.
    Operator,
    /// The reads only ([`ReadStore`](crate::ReadStore)): dashboards, monitoring.
    Read,
}

impl Scope {
    /// Every scope.
    pub const ALL: &'static [Scope] = &[Scope::Executor, Scope::Operator, Scope::Read];

    /// The scope's name (`executor`, `operator`, `read`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Executor => "executor",
            Scope::Operator => "operator",
            Scope::Read => "read",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = StoreError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .iter()
            .copied()
            .find(|scope| scope.as_str() == name)
            .ok_or_else(|| StoreError::Invalid {
                message: format!(
                    "`{name}` is not a key scope; the scopes are executor, operator and read"
                ),
            })
    }
}

/// An API key as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApiKeyRecord {
    /// The key's public id (the part of `aiki_<id>_<secret>` before the secret): what the
    /// timeline records as the actor of what the key did.
    pub id: String,
    /// A name for people (`billing-workers`, `alice's laptop`).
    pub name: String,
    /// The SHA-256 of the secret, in lowercase hex.
    pub secret_sha256: String,
    /// What the key may do.
    pub scopes: Vec<Scope>,
    /// When it was created (ms since the epoch).
    pub created_at: Millis,
    /// When it was revoked; a revoked key opens nothing.
    pub revoked_at: Option<Millis>,
}

impl ApiKeyRecord {
    /// A key of `id`, named `name`, whose secret hashes to `secret_sha256`, created at `now`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        secret_sha256: impl Into<String>,
        scopes: Vec<Scope>,
        now: Millis,
    ) -> Self {
        ApiKeyRecord {
            id: id.into(),
            name: name.into(),
            secret_sha256: secret_sha256.into(),
            scopes,
            created_at: now,
            revoked_at: None,
        }
    }

    /// Whether the key is in force and holds `scope`.
    pub fn allows(&self, scope: Scope) -> bool {
        self.revoked_at.is_none() && self.scopes.contains(&scope)
    }

    /// The scopes as stored: their names, comma-separated.
    pub fn scope_list(&self) -> String {
        let names: Vec<&str> = self.scopes.iter().map(|scope| scope.as_str()).collect();
        names.join(",")
    }

    /// Scopes from their stored form.
    pub fn parse_scopes(list: &str) -> Result<Vec<Scope>, StoreError> {
        let mut scopes = list
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::parse)
            .collect::<Result<Vec<Scope>, StoreError>>()?;
        scopes.sort_unstable();
        scopes.dedup();
        Ok(scopes)
    }
}
