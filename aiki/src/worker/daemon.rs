//! The server runtime's daemons: due wake-ups, claim recovery, stalling, and the retention of
//! the worker list.
//!
//! Claim recovery survives store outages and restarts without mass releases: the store records
//! it in two phases (see [`Sweeper::release_stale_claims`](aiki_store::Sweeper::release_stale_claims)):
//! a sweep marks the claims it finds stale, and a later sweep releases only those still
//! unrefreshed one refresh interval (and a margin) after the mark. While the store is
//! unreachable no executor can refresh its claim, so the heartbeats found when it answers again
//! are stale through no fault of their owners; the live ones refresh within that window, and
//! whichever process sweeps (even one started just now) leaves their runs alone.
//!
//! One process sweeps at a time: the holder of the store's daemons lease
//! ([`DAEMONS_LEASE`](aiki_store::DAEMONS_LEASE)). Every worker that may run the daemons
//! contends for it; the holder renews it every third of [`LEASE_TTL`], and its sweeps are
//! fenced by the lease's token in the store, so a holder frozen past the expiry sweeps nothing
//! once another took over. A graceful shutdown gives the lease up; after a crash the next
//! holder takes over when it expires.

use std::time::Duration;

use aiki_store::{ClaimTiming, DAEMONS_LEASE, Lease, Millis, StoreError, Sweeper};

use super::Worker;

/// How often the daemons prune the worker list.
const PRUNE_EVERY: Millis = 10 * 60 * 1000;

/// How long the daemons' lease lasts unless renewed: after a leader's crash, the longest the
/// sweeps pause before another worker takes over.
pub(super) const LEASE_TTL: Millis = 5_000;

/// What a worker knows of the daemons' lease.
#[derive(Debug, Default)]
pub(super) struct Leadership {
    /// The lease as last seen: this worker's when it leads.
    lease: Option<Lease>,
    /// When this worker last took, renewed or tried to take it (real time).
    tried: Option<tokio::time::Instant>,
}

impl Leadership {
    /// The lease, if this worker holds it (as far as it knows).
    pub(super) fn held(&self, worker_id: &str) -> Option<&Lease> {
        self.lease
            .as_ref()
            .filter(|lease| lease.holder == worker_id)
    }
}

impl Worker {
    /// Runs the timer daemons once, if this worker leads: due wake-ups, claim recovery,
    /// stalling. Returns how many runs they moved.
    pub(super) async fn daemons_once(
        &self,
        sweeper: &dyn Sweeper,
        leadership: &mut Leadership,
    ) -> Result<u64, StoreError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let Some(lease) = self.lead(sweeper, leadership, now).await? else {
            return Ok(0);
        };
        let woken = self.sweep(sweeper.wake_due(&lease, now)).await?;
        let released = self
            .sweep(sweeper.release_stale_claims(&lease, now, claim_timing(shared)))
            .await?;
        for id in &released {
            tracing::warn!(run_id = %id, "claim went stale; run released for recovery");
        }
        let stalled = self
            .sweep(sweeper.stall_undelivered(&lease, now, shared.max_age.as_millis() as i64))
            .await?;
        self.prune_workers(sweeper, &lease, now).await?;
        Ok(woken + released.len() as u64 + stalled)
    }

    /// Takes or renews the daemons' lease when it is time to (a leader every third of the
    /// lease, a follower once the holder's lease should have expired, and both at least that
    /// often in real time, whatever the clocks say); the lease when this worker holds it.
    async fn lead(
        &self,
        sweeper: &dyn Sweeper,
        leadership: &mut Leadership,
        now: Millis,
    ) -> Result<Option<Lease>, StoreError> {
        let me = &self.shared.worker_id;
        let due = match (&leadership.lease, leadership.tried) {
            (Some(lease), Some(tried)) => {
                let at = if lease.holder == *me {
                    lease.expires_at - LEASE_TTL * 2 / 3
                } else {
                    lease.expires_at
                };
                now >= at || tried.elapsed() >= Duration::from_millis(LEASE_TTL as u64 / 3)
            }
            _ => true,
        };
        if due {
            let was_leading = leadership.held(me).is_some();
            leadership.tried = Some(tokio::time::Instant::now());
            let lease = self
                .sweep(sweeper.acquire_lease(DAEMONS_LEASE, me, LEASE_TTL, now))
                .await?;
            let leading = lease.holder == *me;
            if leading && !was_leading {
                tracing::info!(token = lease.token, "this worker runs the daemons now");
            } else if was_leading && !leading {
                tracing::warn!(holder = %lease.holder, "another worker took the daemons over");
            }
            leadership.lease = Some(lease);
        }
        Ok(leadership.held(me).cloned())
    }

    /// Gives the daemons' lease up if this worker holds it (a graceful shutdown), so another
    /// worker takes over at once.
    pub(super) async fn resign(&self, sweeper: &dyn Sweeper, leadership: &Leadership) {
        if let Some(lease) = leadership.held(&self.shared.worker_id)
            && let Err(error) = sweeper.release_lease(lease, self.shared.clock.now()).await
        {
            tracing::warn!(%error, "could not give the daemons' lease up; it expires by itself");
        }
    }

    /// Forgets the rows of workers not seen within the retention, at most once per
    /// [`PRUNE_EVERY`]: rows age by days, and the statement scans the worker list.
    async fn prune_workers(
        &self,
        sweeper: &dyn Sweeper,
        lease: &Lease,
        now: Millis,
    ) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let shared = &self.shared;
        if now.saturating_sub(shared.pruned_at.load(Ordering::Relaxed)) < PRUNE_EVERY {
            return Ok(());
        }
        let retention = i64::try_from(shared.worker_retention.as_millis()).unwrap_or(i64::MAX);
        let pruned = self
            .sweep(sweeper.prune_workers(lease, now, retention))
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
