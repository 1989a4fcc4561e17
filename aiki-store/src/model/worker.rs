//! Workers as the store sees them: heartbeats.

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
        }
    }

    /// Whether it can run a run of `namespace` in `pool`.
    pub fn serves(&self, namespace: &Namespace, pool: &str) -> bool {
        self.pool == pool && self.namespaces.contains(namespace)
    }
}
