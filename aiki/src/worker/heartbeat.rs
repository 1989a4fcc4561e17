//! The worker's heartbeat: its row in the store's worker list, refreshed every claim-refresh
//! interval while the claim loop runs, so that operators (`aiki workers`) and queued runs
//! (`aiki runs show`) see who serves what, which build it runs and how it times its claims. The
//! first beat that reaches the store also publishes the catalog entries of the versions the
//! worker registers, and later beats the tasks its runs were seen calling that it does not
//! declare; a graceful shutdown ends with a beat that says the worker stopped.

use std::sync::Arc;

use aiki_store::{Namespace, WorkerRecord};

use super::Shared;

/// Stops the heartbeat when the claim loop ends, however it ends.
pub(super) struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
    shared: Arc<Shared>,
    namespaces: Vec<Namespace>,
    started_at: aiki_store::Millis,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Heartbeat {
    /// The last beat of a worker that shuts down gracefully: it says it stopped, so operators
    /// see it gone at once, not once its heartbeat goes stale.
    pub(super) async fn stopped(mut self) {
        self.task.abort();
        // Until the beating task has ended: a beat in flight landing after this last one would
        // say the worker is alive again (and keep its builds live in the catalog).
        let _ = (&mut self.task).await;
        let now = self.shared.exec().clock.now();
        let beat = beat(&self.shared, &self.namespaces, self.started_at).stopped(now);
        if let Err(error) = self.shared.exec().store.record_worker(beat, now).await {
            tracing::debug!(%error, "the worker's last heartbeat was not recorded");
        }
    }
}

/// One heartbeat of the worker of `shared`.
fn beat(shared: &Shared, namespaces: &[Namespace], started_at: aiki_store::Millis) -> WorkerRecord {
    let builds = shared
        .catalog
        .iter()
        .map(|entry| (entry.namespace.to_string(), entry.fingerprint.clone()))
        .collect();
    WorkerRecord::new(
        shared.exec().id.clone(),
        host_name(),
        std::process::id(),
        namespaces.to_vec(),
        shared.pool.clone(),
        started_at,
    )
    .fingerprints(builds)
    .claim_timing(
        crate::clock::millis(shared.exec().claim_refresh_interval),
        shared
            .exec()
            .claim_idle_timeout_ms
            .load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Starts beating for the worker of `shared`, serving `namespaces`. A beat that fails is only
/// logged: the heartbeat informs operators, it does not fence anything.
pub(super) fn start(shared: Arc<Shared>, namespaces: Vec<Namespace>) -> Heartbeat {
    let started_at = shared.exec().clock.now();
    let beating = (shared.clone(), namespaces.clone());
    let task = tokio::spawn(crate::trace::in_current_dispatch(async move {
        let (shared, namespaces) = beating;
        // The catalog and the beats wait for the first claim pass's runs (see `startup`); but
        // if it claimed any, one beat goes at once, so that operators see who holds them.
        if shared.startup.claimed().await {
            record(&shared, &namespaces, started_at).await;
        }
        shared.startup.settled().await;
        let mut unpublished = shared.catalog.clone();
        let mut called: Vec<(Namespace, Vec<aiki_store::TaskDeclaration>)> = Vec::new();
        loop {
            // The catalog once, at the first beat that reaches the store.
            while let Some(entry) = unpublished.last() {
                match shared
                    .exec()
                    .store
                    .publish_catalog(entry.clone(), shared.exec().clock.now())
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
            // The tasks the runs were seen calling since, added to their build's entry.
            called.extend(shared.exec().called.take_new());
            while let Some((namespace, tasks)) = called.last() {
                let Some(build) = shared.catalog.iter().find(|e| &e.namespace == namespace) else {
                    called.pop();
                    continue;
                };
                match shared
                    .exec()
                    .store
                    .add_catalog_tasks(namespace, &build.fingerprint, tasks.clone())
                    .await
                {
                    Ok(()) => {
                        called.pop();
                    }
                    Err(error) => {
                        tracing::debug!(%error, "called tasks not added to the catalog");
                        break;
                    }
                }
            }
            record(&shared, &namespaces, started_at).await;
            // Real time: the heartbeat tells people whether the process is alive.
            tokio::time::sleep(shared.exec().claim_refresh_interval).await;
        }
    }));
    Heartbeat {
        task,
        shared,
        namespaces,
        started_at,
    }
}

/// Records one heartbeat; one that fails is only logged.
async fn record(shared: &Shared, namespaces: &[Namespace], started_at: aiki_store::Millis) {
    let beat = beat(shared, namespaces, started_at);
    if let Err(error) = shared
        .exec()
        .store
        .record_worker(beat, shared.exec().clock.now())
        .await
    {
        tracing::debug!(%error, "worker heartbeat not recorded");
    }
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
