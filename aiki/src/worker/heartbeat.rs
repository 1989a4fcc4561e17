//! The worker's heartbeat: its row in the store's worker list, refreshed every claim-refresh
//! interval while the claim loop runs, so that operators (`aiki workers`) and queued runs
//! (`aiki runs show`) see who serves what. The first beat that reaches the store also publishes
//! the catalog entries of the versions the worker registers.

use std::sync::Arc;

use aiki_store::{Namespace, WorkerRecord};

use super::Shared;

/// Stops the heartbeat when the claim loop ends, however it ends.
pub(super) struct Heartbeat(tokio::task::JoinHandle<()>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Starts beating for the worker of `shared`, serving `namespaces`. A beat that fails is only
/// logged: the heartbeat informs operators, it does not fence anything.
pub(super) fn start(shared: Arc<Shared>, namespaces: Vec<Namespace>) -> Heartbeat {
    let started_at = shared.clock.now();
    let host = host_name();
    let task = tokio::spawn(crate::trace::in_current_dispatch(async move {
        let mut unpublished = shared.catalog.clone();
        loop {
            // The catalog once, at the first beat that reaches the store.
            while let Some(entry) = unpublished.last() {
                match shared
                    .store
                    .publish_catalog(entry.clone(), shared.clock.now())
                    .await
                {
                    Ok(_) => {
                        unpublished.pop();
                    }
                    Err(error) => {
                        tracing::debug!(%error, "catalog not published");
                        break;
                    }
                }
            }
            let beat = WorkerRecord::new(
                shared.worker_id.clone(),
                host.clone(),
                std::process::id(),
                namespaces.clone(),
                shared.pool.clone(),
                started_at,
            );
            if let Err(error) = shared.store.record_worker(beat, shared.clock.now()).await {
                tracing::debug!(%error, "worker heartbeat not recorded");
            }
            // Real time: the heartbeat tells people whether the process is alive.
            tokio::time::sleep(shared.claim_refresh_interval).await;
        }
    }));
    Heartbeat(task)
}

/// This machine's name: `HOSTNAME`, else the kernel's, else `unknown`.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
