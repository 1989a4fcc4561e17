//! An operator's release of a run held by an executor that is gone.

use aiki_store::{RunRecord, RunStatus, StoreError};

use super::any::AnyRun;
use crate::error::ClientError;
use crate::liveness::ClaimView;

/// How far back the heartbeats of a run's owner are looked for.
const OWNER_WITHIN_MS: i64 = 24 * 3600 * 1000;

impl AnyRun {
    /// Releases a `running` run whose executor is gone, back to `queued` (to `paused` if a
    /// pause was requested) for another worker, fenced as claim recovery's release is: the
    /// executor, if it was alive after all, loses the run at its next write.
    ///
    /// Without `force`, only once claim recovery has marked the claim stale and it stayed
    /// unrefreshed a confirmation window (one refresh interval and a margin, by the owner's
    /// timing): right after a store outage every executor looks gone, and the live ones refresh
    /// within that window. Refused otherwise with [`ClientError::ClaimNotStale`], which says when
    /// the release is allowed and when recovery releases the run by itself. With `force`, at
    /// once (a task the gone executor had in flight may then run again).
    /// [`ClientError::InvalidAction`] for a run that is not `running`.
    pub async fn release(&self, force: bool) -> Result<RunRecord, ClientError> {
        let client = self.client();
        loop {
            let run = self.record().await?;
            if run.status != RunStatus::Running {
                return Err(ClientError::InvalidAction {
                    run_id: run.id,
                    action: "release",
                    status: run.status,
                    expected: vec![RunStatus::Running],
                });
            }
            let now = client.clock.now();
            let workers = client.store.list_workers(now, OWNER_WITHIN_MS).await?;
            let Some(claim) = ClaimView::of(&run, &workers, now) else {
                return Err(ClientError::InvalidAction {
                    run_id: run.id,
                    action: "release",
                    status: run.status,
                    expected: vec![RunStatus::Running],
                });
            };
            let confirm = (!force).then_some(claim.timing.confirm_ms);
            let actor = client.actor.clone();
            match client
                .store
                .release_claim(run.id, run.revision, now, confirm, actor)
                .await
            {
                Ok(Some(released)) => {
                    crate::wake::work_available();
                    return Ok(released);
                }
                Ok(None) => {
                    let allowed_at = run
                        .claim_stale_since
                        .map(|mark| mark.saturating_add(claim.timing.confirm_ms));
                    return Err(ClientError::ClaimNotStale {
                        run_id: run.id,
                        owner: claim.owner,
                        allowed_at,
                        release_due: claim.release_due,
                    });
                }
                // It moved meanwhile: look again.
                Err(StoreError::RevisionConflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }
}
