//! Workers as the store sees them: heartbeats.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Millis, Namespace};

/// A worker's heartbeat: who it is, what it serves, when it was last seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkerRecord {
    /// The worker's id (the owner it claims runs as).
    pub id: String,
    /// The machine it runs on.
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// The workflow versions it registers.
    pub namespaces: Vec<Namespace>,
    /// The pool it serves.
    pub pool: String,
    /// When it started.
    pub started_at: Millis,
    /// Its last heartbeat (on PostgreSQL, by the server's clock unless told otherwise).
    pub last_seen_at: Millis,
    /// Which build it runs: the catalog fingerprint of each version it registers, by
    /// `workflow@version`. Empty for a worker of a release that did not say.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fingerprints: BTreeMap<String, String>,
    /// When it stopped, having said so (a graceful shutdown); `None` while it runs, and for a
    /// worker that died without a word (its heartbeat goes stale instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<Millis>,
    /// How often it refreshes its heartbeat and its claims (ms), if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_refresh_ms: Option<i64>,
    /// After how long without a refresh its claims are released (ms), if it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_idle_timeout_ms: Option<i64>,
}

impl WorkerRecord {
    /// A heartbeat of worker `id`, started at `started_at`; `last_seen_at` is set by the store.
    pub fn new(
        id: impl Into<String>,
        host: impl Into<String>,
        pid: u32,
        namespaces: Vec<Namespace>,
        pool: impl Into<String>,
        started_at: Millis,
    ) -> Self {
        WorkerRecord {
            id: id.into(),
            host: host.into(),
            pid,
            namespaces,
            pool: pool.into(),
            started_at,
            last_seen_at: started_at,
            fingerprints: BTreeMap::new(),
            stopped_at: None,
            claim_refresh_ms: None,
            claim_idle_timeout_ms: None,
        }
    }

    /// Says which build it runs (see [`fingerprints`](WorkerRecord::fingerprints)).
    pub fn fingerprints(mut self, fingerprints: BTreeMap<String, String>) -> Self {
        self.fingerprints = fingerprints;
        self
    }

    /// Says how it times its claims.
    pub fn claim_timing(mut self, refresh_ms: i64, idle_timeout_ms: i64) -> Self {
        self.claim_refresh_ms = Some(refresh_ms);
        self.claim_idle_timeout_ms = Some(idle_timeout_ms);
        self
    }

    /// Says it stopped at `at` (its last heartbeat, on a graceful shutdown).
    pub fn stopped(mut self, at: Millis) -> Self {
        self.stopped_at = Some(at);
        self
    }

    /// Whether it can run a run of `namespace` in `pool`.
    pub fn serves(&self, namespace: &Namespace, pool: &str) -> bool {
        self.pool == pool && self.namespaces.contains(namespace)
    }
}
