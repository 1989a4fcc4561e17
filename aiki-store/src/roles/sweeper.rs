//! What the daemons sweep: due wake-ups, stale claims, undelivered runs, old worker rows, ended
//! runs past their retention.

use std::fmt::Debug;

use async_trait::async_trait;

use crate::{ClaimTiming, DueSchedule, Lease, Millis, PurgeRuns, RunId, ScheduleWrite, StoreError};

/// The sweeping role of the store contract: the daemons' passes over every run. Only the
/// process holding the daemons' lease sweeps; a remote worker never does.
///
/// Every sweep is done under a [`Lease`] and fenced by it in its own statement: it does
/// nothing (moves no run, returns nothing) unless the lease is still held by its holder with
/// its token and unexpired, so a holder that stalled past its expiry (a frozen process)
/// changes nothing once another took over. A store whose schema predates leases sweeps
/// unfenced, as every worker did then.
#[async_trait]
pub trait Sweeper: Send + Sync + Debug + 'static {
    /// Takes the lease `name` for `holder` until `now + ttl_ms` (by the store's claim clock,
    /// see [`claim`](crate::ExecutorStore::claim)), or renews it when `holder` holds it, in one
    /// atomic operation. Returns the lease as it stands: held by `holder` when taken or
    /// renewed, else by the process whose lease has not expired. The token grows whenever the
    /// lease changes hands or lapsed, so a lapsed holder's fenced operations do nothing.
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
        now: Millis,
    ) -> Result<Lease, StoreError>;

    /// Gives a lease up (a graceful shutdown), so that another process takes it at once
    /// instead of when it expires. Does nothing when the lease changed hands meanwhile.
    async fn release_lease(&self, lease: &Lease, now: Millis) -> Result<(), StoreError>;

    /// Moves `scheduled`, `sleeping`, `awaiting_event`, `awaiting_retry` and
    /// `awaiting_child_workflow` runs whose `due_at` is at or before `now` to `queued`
    /// (incrementing revisions), at most `limit` of them, the longest due first. Returns how
    /// many moved: `limit` means more may be due.
    async fn wake_due(&self, lease: &Lease, now: Millis, limit: u32) -> Result<u64, StoreError>;

    /// Claim recovery, in two phases recorded on the runs, so that it survives restarts and
    /// store outages whichever process sweeps (times by the store's claim clock, see
    /// [`claim`](crate::ExecutorStore::claim)):
    ///
    /// * marks (`claim_stale_since`) every `running` run whose heartbeat is older than
    ///   `timing.confirm_ms`, unless marked since its last refresh;
    /// * releases every `running` run whose heartbeat is older than `timing.idle_timeout_ms`
    ///   and which was marked at least `timing.confirm_ms` ago without a refresh since: back
    ///   to `queued` (to `paused` when a pause was requested), clearing its owner and
    ///   incrementing its revision.
    ///
    /// A live executor refreshes within one refresh interval of the store answering it, so
    /// after an outage it is never released, while a dead one's run is, at the latest one
    /// confirmation window after the first sweep that sees it stale. Each phase takes at most
    /// `limit` runs. Returns the released runs: `limit` of them means more may be stale.
    async fn release_stale_claims(
        &self,
        lease: &Lease,
        now: Millis,
        timing: ClaimTiming,
        limit: u32,
    ) -> Result<Vec<RunId>, StoreError>;

    /// Moves runs `queued` since before `now - max_age_ms` to `stalled`, at most `limit` of
    /// them, the oldest first. Returns how many: `limit` means more may be left.
    async fn stall_undelivered(
        &self,
        lease: &Lease,
        now: Millis,
        max_age_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Forgets the workers not seen within `older_than_ms` before `now` (by the clock of
    /// [`record_worker`](crate::ExecutorStore::record_worker)): retention of the worker list, whose rows would
    /// otherwise grow with every process start. Returns how many went.
    async fn prune_workers(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
    ) -> Result<u64, StoreError>;

    /// Forgets up to `limit` first answers of operations (see [`crate::operation`]) recorded
    /// more than `older_than_ms` before `now`: retention of the answers table, which gains a
    /// row per write sent with an operation id. Returns how many went.
    async fn forget_operations(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Retention of ended runs: deletes the runs `purge` selects (see [`PurgeRuns`]: ended
    /// before its cutoff at `now`, whose parent is gone or purgeable too, the oldest first, at
    /// most its limit) with everything recorded for them (entries, sleeps, events, timeline
    /// and change stream rows, wait rows), in one atomic operation fenced by `lease`, and
    /// returns their ids, oldest first. A purged run's reference id is free again. A run that
    /// left its end meanwhile (an operator's retry) is not taken. With
    /// [`dry_run`](PurgeRuns::dry_run) it changes nothing and returns the runs it would take.
    /// A returned list of `limit` runs means more may be purgeable.
    async fn purge_runs(
        &self,
        lease: &Lease,
        now: Millis,
        purge: PurgeRuns,
    ) -> Result<Vec<RunId>, StoreError>;

    /// Up to `limit` active schedules the schedule sweep should look at `now`: those whose
    /// next occurrence is due by [`ScheduleRecord::fire_at`](crate::ScheduleRecord::fire_at),
    /// and those with an occurrence buffered behind a run that has ended, the earliest due
    /// first, each with whether its last run is still open. Empty on a schema without
    /// schedules.
    async fn due_schedules(&self, now: Millis, limit: u32) -> Result<Vec<DueSchedule>, StoreError>;

    /// Writes a schedule's advance (see [`ScheduleWrite`]) in one atomic operation fenced by
    /// `lease`: its new state, the runs it starts, the run it cancels and its log rows, all or
    /// nothing. Returns whether it was written: `false` (nothing written) when the schedule's
    /// revision is no longer the one the write read, a log row's key or a run's reference id is
    /// taken, or the lease is no longer held, so sweepers racing over one schedule fire each
    /// occurrence once. (The sweep itself is [`crate::schedule::fire_due`].)
    async fn advance_schedule(
        &self,
        lease: &Lease,
        write: ScheduleWrite,
    ) -> Result<bool, StoreError>;
}
