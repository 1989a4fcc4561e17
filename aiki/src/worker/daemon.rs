//! The server runtime's daemons: due wake-ups, claim recovery, stalling.
//!
//! Claim recovery survives a store outage without mass releases: while the store is
//! unreachable no executor can refresh its claim, so the heartbeats it finds when the store
//! answers again are stale through no fault of their owners. After a sweep of this daemon has
//! failed, claims count as refreshed at the moment the store answers again: recovery waits one
//! `claim_idle_timeout` (a grace every live executor uses to refresh) before releasing any.

use aiki_store::{Millis, StoreError};

use super::Worker;

/// What claim recovery knows of the store's recent outages.
#[derive(Debug, Default)]
pub(super) struct Recovery {
    /// A sweep failed and the store has not answered since.
    outage: bool,
    /// No claim is released before this time (the store answered again at `grace_until -
    /// claim_idle_timeout`).
    grace_until: Option<Millis>,
}

impl Recovery {
    /// The store could not be reached: heartbeats found when it answers again are not to be
    /// trusted until the executors have had one idle timeout to refresh.
    pub(super) fn store_unreachable(&mut self) {
        self.outage = true;
    }
}

impl Worker {
    /// Runs the timer daemons once: due wake-ups, claim recovery, stalling. Returns how many
    /// runs they moved.
    pub(super) async fn daemons_once(&self) -> Result<u64, StoreError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let woken = self.sweep(shared.store.wake_due(now)).await?;
        let released = if self.recovery_paused(now) {
            Vec::new()
        } else {
            self.sweep(
                shared
                    .store
                    .release_stale_claims(now, shared.claim_idle_timeout.as_millis() as i64),
            )
            .await?
        };
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
        Ok(woken + released.len() as u64 + stalled)
    }

    /// Runs one sweep, noting an outage when the store cannot be reached.
    async fn sweep<T>(
        &self,
        sweep: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let result = sweep.await;
        if let Err(error) = &result {
            crate::metrics::store_error("sweep", error);
            if error.is_transient() {
                self.shared.recovery().store_unreachable();
            }
        }
        result
    }

    /// Whether claim recovery waits: the store answers again after an outage, and the
    /// executors have not had one idle timeout yet to refresh their claims.
    fn recovery_paused(&self, now: Millis) -> bool {
        let mut recovery = self.shared.recovery();
        if std::mem::take(&mut recovery.outage) {
            let grace = self.shared.claim_idle_timeout.as_millis() as Millis;
            recovery.grace_until = Some(now.saturating_add(grace));
            tracing::info!("the store answers again; claim recovery waits one idle timeout");
        }
        match recovery.grace_until {
            Some(until) if now < until => true,
            _ => {
                recovery.grace_until = None;
                false
            }
        }
    }
}
