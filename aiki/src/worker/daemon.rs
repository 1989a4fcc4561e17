//! The server runtime's daemons: due wake-ups, claim recovery, stalling.

use aiki_store::StoreError;

use super::Worker;

impl Worker {
    /// Runs the timer daemons once: due wake-ups, claim recovery, stalling. Returns how many
    /// runs they moved.
    pub(super) async fn daemons_once(&self) -> Result<u64, StoreError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let woken = shared.store.wake_due(now).await?;
        let released = shared
            .store
            .release_stale_claims(now, shared.claim_idle_timeout.as_millis() as i64)
            .await?;
        for id in &released {
            tracing::warn!(run_id = %id, "claim went stale; run released for recovery");
        }
        let stalled = shared
            .store
            .stall_undelivered(now, shared.max_age.as_millis() as i64)
            .await?;
        Ok(woken + released.len() as u64 + stalled)
    }
}
