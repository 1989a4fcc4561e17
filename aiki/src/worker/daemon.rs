//! The server runtime's daemons: due wake-ups, claim recovery, stalling, and the retention of
//! the worker list.
//!
//! Claim recovery survives store outages and restarts without mass releases: the store records
//! it in two phases (see [`Store::release_stale_claims`](aiki_store::Store::release_stale_claims)):
//! a sweep marks the claims it finds stale, and a later sweep releases only those still
//! unrefreshed one refresh interval (and a margin) after the mark. While the store is
//! unreachable no executor can refresh its claim, so the heartbeats found when it answers again
//! are stale through no fault of their owners; the live ones refresh within that window, and
//! whichever process sweeps (even one started just now) leaves their runs alone.

use aiki_store::{ClaimTiming, Millis, StoreError};

use super::Worker;

/// How often the daemons prune the worker list.
const PRUNE_EVERY: Millis = 10 * 60 * 1000;

impl Worker {
    /// Runs the timer daemons once: due wake-ups, claim recovery, stalling. Returns how many
    /// runs they moved.
    pub(super) async fn daemons_once(&self) -> Result<u64, StoreError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let woken = self.sweep(shared.store.wake_due(now)).await?;
        let released = self
            .sweep(shared.store.release_stale_claims(now, claim_timing(shared)))
            .await?;
        for id in &released {
            tracing::warn!(run_id = %id, "claim went stale; run released for recovery");
        }
        let stalled = self
            .sweep(
                shared
                    .store
                    .stall_undelivered(now, shared.max_age.as_millis() as i64),
            )
            .await?;
        self.prune_workers(now).await?;
        Ok(woken + released.len() as u64 + stalled)
    }

    /// Forgets the rows of workers not seen within the retention, at most once per
    /// [`PRUNE_EVERY`]: rows age by days, and the statement scans the worker list.
    async fn prune_workers(&self, now: Millis) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let shared = &self.shared;
        if now.saturating_sub(shared.pruned_at.load(Ordering::Relaxed)) < PRUNE_EVERY {
            return Ok(());
        }
        let retention = i64::try_from(shared.worker_retention.as_millis()).unwrap_or(i64::MAX);
        let pruned = self
            .sweep(shared.store.prune_workers(now, retention))
            .await?;
        shared.pruned_at.store(now, Ordering::Relaxed);
        if pruned > 0 {
            tracing::debug!(pruned, "forgot the rows of workers not seen for long");
        }
        Ok(())
    }

    /// Runs one sweep, counting a store error.
    async fn sweep<T>(
        &self,
        sweep: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = sweep.await;
        if let Err(error) = &result {
            crate::metrics::store_error("sweep", error);
        }
        result
    }
}

/// How claim recovery judges claims: by this worker's idle timeout and refresh interval.
fn claim_timing(shared: &super::Shared) -> ClaimTiming {
    let ms = |duration: std::time::Duration| {
        Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
    };
    ClaimTiming::new(
        ms(shared.claim_idle_timeout),
        ms(shared.claim_refresh_interval),
    )
}
