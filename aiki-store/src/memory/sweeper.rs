//! The memory store's sweeps.

use async_trait::async_trait;

use super::MemoryStore;
use super::state::{self, Note};
use crate::Sweeper;
use crate::{ClaimTiming, Lease, Millis, PurgeRuns, RunId, RunRecord, RunStatus, StoreError};

#[async_trait]
impl Sweeper for MemoryStore {
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
        now: Millis,
    ) -> Result<Lease, StoreError> {
        let mut state = self.lock();
        let expires_at = now.saturating_add(ttl_ms);
        let lease = match state.leases.get(name) {
            Some(held) if held.holder == holder && held.expires_at > now => Lease {
                expires_at,
                ..held.clone()
            },
            Some(held) if held.expires_at > now => return Ok(held.clone()),
            lapsed => Lease {
                name: name.to_owned(),
                holder: holder.to_owned(),
                token: lapsed.map_or(1, |held| held.token + 1),
                expires_at,
            },
        };
        state.leases.insert(name.to_owned(), lease.clone());
        Ok(lease)
    }

    async fn release_lease(&self, lease: &Lease, now: Millis) -> Result<(), StoreError> {
        let mut state = self.lock();
        if state.holds(lease, now)
            && let Some(held) = state.leases.get_mut(&lease.name)
        {
            held.expires_at = now;
        }
        Ok(())
    }

    async fn wake_due(&self, lease: &Lease, now: Millis, limit: u32) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(0);
        }
        let due = first(
            state
                .runs
                .values()
                .filter(|run| run.status.wakes_on_timer())
                .filter_map(|run| {
                    run.due_at
                        .filter(|due| *due <= now)
                        .map(|due| (due, run.id))
                }),
            limit,
        );
        for id in &due {
            state.set_status(*id, RunStatus::Queued, None, now, Note::default());
        }
        Ok(due.len() as u64)
    }

    async fn release_stale_claims(
        &self,
        lease: &Lease,
        now: Millis,
        timing: ClaimTiming,
        limit: u32,
    ) -> Result<Vec<RunId>, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(Vec::new());
        }
        let beat = |run: &RunRecord| run.heartbeat_at.unwrap_or(run.updated_at);
        let stale = first(
            state
                .runs
                .values()
                .filter(|run| {
                    run.status == RunStatus::Running
                        && beat(run) < now - timing.idle_timeout_ms
                        && state::confirmed_stale(run, now, &timing)
                })
                .map(|run| (beat(run), run.id)),
            limit,
        );
        for id in &stale {
            state::release(&mut state, *id, now, None);
        }
        let window = timing.confirm_ms;
        let unmarked = first(
            state
                .runs
                .values()
                .filter(|run| {
                    let current = run
                        .claim_stale_since
                        .is_some_and(|mark| beat(run) <= mark && timing.mark_holds(mark, now));
                    run.status == RunStatus::Running && beat(run) < now - window && !current
                })
                .map(|run| (beat(run), run.id)),
            limit,
        );
        for id in unmarked {
            if let Some(run) = state.runs.get_mut(&id) {
                run.claim_stale_since = Some(now);
            }
        }
        Ok(stale)
    }

    async fn stall_undelivered(
        &self,
        lease: &Lease,
        now: Millis,
        max_age_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(0);
        }
        let stalled = first(
            state.runs.values().filter_map(|run| {
                let queued = run.queued_at.unwrap_or(run.created_at);
                (run.status == RunStatus::Queued && queued < now - max_age_ms)
                    .then_some((queued, run.id))
            }),
            limit,
        );
        for id in &stalled {
            state.set_status(*id, RunStatus::Stalled, None, now, Note::default());
        }
        Ok(stalled.len() as u64)
    }

    async fn prune_workers(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
    ) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(0);
        }
        let before = state.workers.len();
        let since = now.saturating_sub(older_than_ms);
        state
            .workers
            .retain(|_, worker| worker.last_seen_at >= since);
        Ok((before - state.workers.len()) as u64)
    }

    async fn purge_runs(
        &self,
        lease: &Lease,
        now: Millis,
        purge: PurgeRuns,
    ) -> Result<Vec<RunId>, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(Vec::new());
        }
        let ids = state.purgeable(purge.cutoff(now), purge.limit);
        if !purge.dry_run {
            state.purge(&ids);
        }
        Ok(ids)
    }

    async fn forget_operations(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(0);
        }
        let before = now.saturating_sub(older_than_ms);
        let mut old: Vec<(Millis, String)> = state
            .answers
            .iter()
            .filter(|(_, answer)| answer.at < before)
            .map(|(key, answer)| (answer.at, key.clone()))
            .collect();
        old.sort_unstable();
        old.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        for (_, key) in &old {
            state.answers.remove(key);
        }
        Ok(old.len() as u64)
    }

    async fn due_schedules(
        &self,
        now: Millis,
        limit: u32,
    ) -> Result<Vec<crate::DueSchedule>, StoreError> {
        Ok(self.lock().due_schedules(now, limit))
    }

    async fn advance_schedule(
        &self,
        lease: &Lease,
        write: crate::ScheduleWrite,
    ) -> Result<bool, StoreError> {
        Ok(self.advance_schedule_now(lease, write))
    }
}

/// The first `limit` runs by their sort key (a due time, a heartbeat, a queue time), as a
/// sweep's batch takes them.
fn first(runs: impl Iterator<Item = (Millis, RunId)>, limit: u32) -> Vec<RunId> {
    let mut runs: Vec<(Millis, RunId)> = runs.collect();
    runs.sort_unstable();
    runs.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    runs.into_iter().map(|(_, id)| id).collect()
}
