//! The server runtime's daemons: due wake-ups, schedules, claim recovery, stalling, and the
//! retention of ended runs and of the worker list.
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
//!
//! The daemons run on a task of their own, on their own interval (with jitter, so that a fleet
//! started at once does not ask in step), not on the claim loop's polls: a due wake-up of this
//! process (a timer it set, a clock that jumped) runs them at once, and runs woken by an event,
//! a child's end or an operator are queued by the store without them. Each sweep takes a
//! bounded batch; a full batch runs the next pass at once. Due wake-ups and schedules
//! ([`aiki_store::schedule`]) are swept at every pass; the sweeps that need no second's precision on their own cadence, by the workers'
//! clock: claim recovery every tenth of the claim idle timeout (at most 5 s), stalling every
//! tenth of the maximum age (at most 10 s), forgetting old operation answers every minute and
//! purging ended runs past their retention (when one is set) a batch a minute (a batch a pass
//! while there is a backlog), so
//! that an idle store costs little (with the defaults, about 3 statements a second for the
//! leader).
//!
//! Their timings and limits are the store's runtime configuration
//! ([`RuntimeConfig`](aiki_store::RuntimeConfig)), read by the leader once a second, so every
//! process agrees on them whoever leads: the interval, the batch limit, the claim idle timeout,
//! the undelivered runs' maximum age and the worker list's retention. Claim recovery's
//! confirmation window is a refresh interval plus a margin: the leader's own, or half the idle
//! timeout when that is shorter (no executor that claims refreshes less often).

use std::sync::Arc;
use std::time::Duration;

use aiki_store::{
    ClaimTiming, DAEMONS_LEASE, Lease, Millis, PurgeRuns, RuntimeConfig, StoreError, Sweeper,
};
use tokio::sync::watch;

use super::{Shared, Stop};
use crate::clock::millis;

/// How often the daemons prune the worker list.
const PRUNE_EVERY: Millis = 10 * 60 * 1000;

/// How often the daemons forget the answers of old operations and purge ended runs past their
/// retention (more often while batches come back full).
const FORGET_EVERY: Millis = 60 * 1000;

/// How often the leader reads the runtime configuration again (real time): a change reaches
/// the sweeps within this, and passes woken by timers read nothing more than they sweep.
const CONFIG_EVERY: Duration = Duration::from_secs(1);

/// How long the daemons' lease lasts unless renewed: after a leader's crash, the longest the
/// sweeps pause before another worker takes over.
pub(super) const LEASE_TTL: Millis = 5_000;

/// What a worker knows of the daemons' lease.
#[derive(Debug, Default)]
pub(super) struct Leadership {
    /// The lease as last seen: this worker's when it leads.
    lease: Option<Lease>,
    /// Since when (the store's time) this worker has held the lease without a break, when it
    /// leads: the store answered it at least every renewal since, so claim recovery trusts a
    /// stale mark made since then however far apart its sweeps come.
    since: Option<Millis>,
    /// When this worker last took, renewed or tried to take it (real time).
    tried: Option<tokio::time::Instant>,
    /// The runtime configuration as the leader last read it (the defaults before).
    config: RuntimeConfig,
    /// When it was read (real time).
    config_read: Option<tokio::time::Instant>,
    /// When claim recovery, stalling and forgetting answers last swept (the workers' clock),
    /// and whether their batch came back full: each runs on a cadence of its own (see
    /// [`Cadence`]), a full batch again at the next pass.
    stale: Cadence,
    stall: Cadence,
    forget: Cadence,
    purge: Cadence,
}

/// When a sweep that needs no second's precision ran last (the workers' clock), and whether
/// its batch came back full.
#[derive(Debug, Default)]
struct Cadence {
    swept: Option<Millis>,
    full: bool,
}

impl Cadence {
    /// Whether the sweep is due at `now`, every `every` ms (at once after a clock set back).
    fn due(&self, now: Millis, every: Millis) -> bool {
        self.full
            || self
                .swept
                .is_none_or(|at| now < at || now.saturating_sub(at) >= every)
    }

    /// It swept at `now`, `done` rows of a batch of `limit`.
    fn swept(&mut self, now: Millis, done: u64, limit: u32) {
        self.swept = Some(now);
        self.full = done >= u64::from(limit);
    }
}

impl Leadership {
    /// The lease, if this worker holds it (as far as it knows).
    pub(super) fn held(&self, worker_id: &str) -> Option<&Lease> {
        self.lease
            .as_ref()
            .filter(|lease| lease.holder == worker_id)
    }
}

/// One pass of the daemons: how many runs it moved, and whether a batch came back full (more
/// is waiting).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pass {
    pub(super) moved: u64,
    pub(super) full: bool,
}

impl Pass {
    fn add(&mut self, moved: u64, limit: u32) {
        self.moved += moved;
        self.full |= moved >= u64::from(limit);
    }

    /// Counts a batch of housekeeping that moves no run (forgotten rows): only whether it
    /// came back full.
    fn tidied(&mut self, done: u64, limit: u32) {
        self.full |= done >= u64::from(limit);
    }
}

/// A worker's daemons: the sweeps over the store it runs when it holds the lease.
pub(super) struct Daemons {
    shared: Arc<Shared>,
    sweeper: Arc<dyn Sweeper>,
}

impl Daemons {
    pub(super) fn new(shared: Arc<Shared>, sweeper: Arc<dyn Sweeper>) -> Self {
        Daemons { shared, sweeper }
    }

    /// Runs the daemons until `stop`: a pass, then a pause of the interval with jitter (at
    /// most a third of the lease, so a leader renews in time), cut short by a timer of this
    /// process coming due, the clock jumping, or a full batch. On a graceful stop the lease is
    /// given up.
    pub(super) async fn run(self, mut stop: watch::Receiver<Stop>) {
        let mut leadership = Leadership::default();
        let mut timers = crate::wake::subscribe_timers();
        let mut backoff = Duration::from_millis(50);
        self.shared.startup.settled().await;
        loop {
            if *stop.borrow() != Stop::No {
                break;
            }
            // Registered before the pass, so that a jump or a timer during it is not lost.
            let jumped = self.shared.exec().clock.jumped();
            timers.borrow_and_update();
            let result = tokio::select! {
                result = self.once(&mut leadership) => result,
                Ok(_) = stop.wait_for(|stop| *stop == Stop::Now) => break,
            };
            let pause = match result {
                Ok(pass) => {
                    backoff = Duration::from_millis(50);
                    if pass.moved > 0 {
                        crate::wake::work_available();
                    }
                    if pass.full {
                        continue;
                    }
                    let interval = leadership.config.daemons_interval_ms.min(LEASE_TTL / 3);
                    jittered(Duration::from_millis(interval.max(1) as u64))
                }
                Err(error) => {
                    tracing::warn!(%error, "the daemons could not reach the store; backing off");
                    // Real time, as the claim loop's backoff.
                    let pause = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    pause
                }
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = jumped => {}
                _ = timers.changed() => {}
                _ = stop.changed() => {}
            }
        }
        if *stop.borrow() == Stop::Gracefully {
            self.resign(&leadership).await;
        }
    }

    /// Runs the sweeps once, if this worker leads: due wake-ups, claim recovery, stalling,
    /// each one batch.
    pub(super) async fn once(&self, leadership: &mut Leadership) -> Result<Pass, StoreError> {
        let shared = &self.shared;
        let sweeper = &*self.sweeper;
        let now = shared.exec().clock.now();
        let mut pass = Pass::default();
        let Some(lease) = self.lead(leadership, now).await? else {
            return Ok(pass);
        };
        // The lease may have shown the store's clock to be elsewhere.
        let now = shared.exec().clock.now();
        if now >= lease.expires_at {
            // The clock moved past the lease while it was being taken (a jump): every fenced
            // sweep would do nothing, yet its cadence would count it as done. Take the lease
            // again first, at once.
            return Ok(Pass {
                moved: 0,
                full: true,
            });
        }
        // Due wake-ups first, by the configuration as last read: a timer's pass wakes its run
        // without waiting for the configuration.
        let limit = u32::try_from(leadership.config.daemons_limit).unwrap_or(u32::MAX);
        let woken = sweep(sweeper.wake_due(&lease, now, limit)).await?;
        if woken > 0 {
            // Claimed while the other sweeps run.
            crate::wake::work_available();
        }
        pass.add(woken, limit);
        // Schedules at every pass too: an occurrence fires within a pass of its time.
        // A failure here (the schedule tables unreadable) stops none of the other sweeps.
        let fired = sweep(aiki_store::schedule::fire_due(sweeper, &lease, now, limit))
            .await
            .inspect_err(|error| tracing::warn!(%error, "the schedule sweep failed"))
            .unwrap_or_default();
        if fired.runs > 0 {
            crate::wake::work_available();
        }
        for (outcome, count) in [
            ("fired", fired.runs),
            ("skipped", fired.skipped),
            ("missed", fired.missed),
        ] {
            crate::metrics::schedule_occurrences(outcome, count);
        }
        if fired.missed > 0 {
            tracing::warn!(
                missed = fired.missed,
                "schedule occurrences found later than their catch-up window; recorded as missed"
            );
        }
        pass.add(fired.runs, limit);
        pass.full |= fired.full;
        if leadership
            .config_read
            .is_none_or(|read| read.elapsed() >= CONFIG_EVERY)
        {
            let config = sweep(shared.exec().store.runtime_config()).await?;
            if config != leadership.config {
                // Timings changed: every sweep runs at once under the new ones.
                leadership.stale = Cadence::default();
                leadership.stall = Cadence::default();
            }
            leadership.config = config;
            leadership.config_read = Some(tokio::time::Instant::now());
        }
        let config = leadership.config;
        let limit = u32::try_from(config.daemons_limit).unwrap_or(u32::MAX);
        // Every executor that claims refreshes within half the idle timeout (one whose
        // interval does not fit refuses to claim), however the leader itself is set up (a
        // server's daemons claim nothing).
        let refresh =
            millis(shared.exec().claim_refresh_interval).min(config.claim_idle_timeout_ms / 2);
        let timing =
            ClaimTiming::new(config.claim_idle_timeout_ms, refresh).leading_since(leadership.since);
        // Claim recovery every tenth of the idle timeout and half the confirmation window
        // (between a pass and 5 s): a claim is released within the timeout, the window and
        // this.
        let every = (config.claim_idle_timeout_ms / 10)
            .min(timing.confirm_ms / 2)
            .clamp(config.daemons_interval_ms, 5_000);
        if leadership.stale.due(now, every) {
            let released = sweep(sweeper.release_stale_claims(&lease, now, timing, limit)).await?;
            for id in &released {
                tracing::warn!(run_id = %id, "claim went stale; run released for recovery");
            }
            leadership.stale.swept(now, released.len() as u64, limit);
            pass.add(released.len() as u64, limit);
        }
        // Stalling every tenth of the maximum age (between a pass and 10 s): runs wait a day
        // by default.
        let max_age = config.stall_max_age_ms;
        if leadership.stall.due(
            now,
            (max_age / 10).clamp(config.daemons_interval_ms, 10_000),
        ) {
            let stalled = sweep(sweeper.stall_undelivered(&lease, now, max_age, limit)).await?;
            leadership.stall.swept(now, stalled, limit);
            pass.add(stalled, limit);
        }
        // The answers the store keeps for repeated operations (an aiki server's requests),
        // a row per write: forgotten as they age, a batch a minute (at once again while
        // batches come back full), so they never pile up.
        if leadership.forget.due(now, FORGET_EVERY) {
            let kept = aiki_store::operation::KEPT_FOR_MS;
            let forgotten = sweep(sweeper.forget_operations(&lease, now, kept, limit)).await?;
            leadership.forget.swept(now, forgotten, limit);
            pass.tidied(forgotten, limit);
        }
        // Ended runs past their retention (when one is set), a batch a minute, and one a pass
        // while batches come back full: never back to back, since a batch holds the write
        // lock of a SQLite store while it deletes (some 50 ms for 500 runs), and the workers
        // go on meanwhile (the bench's retention row).
        let retention = config.run_retention_ms;
        if retention > 0 && leadership.purge.due(now, FORGET_EVERY) {
            // A retention below the purge's minimum age was asked for explicitly (a trial).
            let purge = PurgeRuns::new(now.saturating_sub(retention))
                .min_age(retention.min(aiki_store::PURGE_MIN_AGE_MS))
                .limit(limit);
            let purged = sweep(sweeper.purge_runs(&lease, now, purge)).await?;
            let count = purged.len() as u64;
            leadership.purge.swept(now, count, purge.limit);
            crate::metrics::runs_purged(count);
            if count > 0 {
                tracing::debug!(count, "purged ended runs past their retention");
            }
        }
        self.prune_workers(&lease, now, config.worker_retention_ms)
            .await?;
        Ok(pass)
    }

    /// Takes or renews the daemons' lease when it is time to (a leader every third of the
    /// lease, a follower once the holder's lease should have expired; a leader at least every
    /// third of the lease and a follower at least every lease in real time, whatever the
    /// clocks say); the lease when this worker holds it.
    async fn lead(
        &self,
        leadership: &mut Leadership,
        now: Millis,
    ) -> Result<Option<Lease>, StoreError> {
        let me = &self.shared.exec().id;
        let due = match (&leadership.lease, leadership.tried) {
            (Some(lease), Some(tried)) => {
                let (at, every) = if lease.holder == *me {
                    (lease.expires_at - LEASE_TTL * 2 / 3, LEASE_TTL / 3)
                } else {
                    // An idle fleet's followers ask once a lease, not once a renewal.
                    (lease.expires_at, LEASE_TTL)
                };
                now >= at || tried.elapsed() >= Duration::from_millis(every as u64)
            }
            _ => true,
        };
        if due {
            let was_leading = leadership.held(me).is_some();
            leadership.tried = Some(tokio::time::Instant::now());
            // The pass's `now` was read before this: sending it would let a clock jump in
            // between look like the store's offset (see `StoreClock::stamp`).
            let (local_sent, sent) = self.shared.exec().store_clock.stamp();
            let lease = sweep(
                self.sweeper
                    .acquire_lease(DAEMONS_LEASE, me, LEASE_TTL, sent),
            )
            .await?;
            let leading = lease.holder == *me;
            if leading {
                // Taken or renewed now: it expires a lease's length after the store's now.
                let store_now = lease.expires_at.saturating_sub(LEASE_TTL);
                self.shared
                    .exec()
                    .store_clock
                    .observe(local_sent, store_now);
                // Renewed before it lapsed: no break.
                let unbroken = leadership
                    .held(me)
                    .is_some_and(|held| held.token == lease.token && held.expires_at >= store_now);
                if !unbroken || leadership.since.is_none() {
                    leadership.since = Some(store_now);
                }
            } else {
                leadership.since = None;
            }
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
    async fn resign(&self, leadership: &Leadership) {
        if let Some(lease) = leadership.held(&self.shared.exec().id)
            && let Err(error) = self
                .sweeper
                .release_lease(lease, self.shared.exec().clock.now())
                .await
        {
            tracing::warn!(%error, "could not give the daemons' lease up; it expires by itself");
        }
    }

    /// Forgets the rows of workers not seen within the retention, at most once per
    /// [`PRUNE_EVERY`]: rows age by days, and the statement scans the worker list.
    async fn prune_workers(
        &self,
        lease: &Lease,
        now: Millis,
        retention: Millis,
    ) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let shared = &self.shared;
        if now.saturating_sub(shared.pruned_at.load(Ordering::Relaxed)) < PRUNE_EVERY {
            return Ok(());
        }
        let pruned = sweep(self.sweeper.prune_workers(lease, now, retention)).await?;
        shared.pruned_at.store(now, Ordering::Relaxed);
        if pruned > 0 {
            tracing::debug!(pruned, "forgot the rows of workers not seen for long");
        }
        Ok(())
    }
}

/// `interval`, give or take a tenth at random.
fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + fastrand::f64() * 0.2)
}

/// Runs one sweep, counting a store error.
async fn sweep<T>(
    sweep: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let result = sweep.await;
    if let Err(error) = &result {
        crate::metrics::store_error("sweep", error);
    }
    result
}
