//! The memory store's sweeps.

use async_trait::async_trait;

use super::MemoryStore;
use super::state::{self, Note};
use crate::Sweeper;
use crate::{ClaimTiming, Lease, Millis, RunId, RunRecord, RunStatus, StoreError};

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

    async fn wake_due(&self, lease: &Lease, now: Millis) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(0);
        }
        let due: Vec<RunId> = state
            .runs
            .values()
            .filter(|run| run.status.wakes_on_timer() && run.due_at.is_some_and(|due| due <= now))
            .map(|run| run.id)
            .collect();
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
    ) -> Result<Vec<RunId>, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(Vec::new());
        }
        let beat = |run: &RunRecord| run.heartbeat_at.unwrap_or(run.updated_at);
        let stale: Vec<RunId> = state
            .runs
            .values()
            .filter(|run| {
                run.status == RunStatus::Running
                    && beat(run) < now - timing.idle_timeout_ms
                    && state::confirmed_stale(run, now, timing.confirm_ms)
            })
            .map(|run| run.id)
            .collect();
        for id in &stale {
            state::release(&mut state, *id, now, None);
        }
        let window = timing.confirm_ms;
        for run in state.runs.values_mut() {
            let current = run
                .claim_stale_since
                .is_some_and(|mark| beat(run) <= mark && mark > now - 2 * window);
            if run.status == RunStatus::Running && beat(run) < now - window && !current {
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
    ) -> Result<u64, StoreError> {
        let mut state = self.lock();
        if !state.holds(lease, now) {
            return Ok(0);
        }
        let stalled: Vec<RunId> = state
            .runs
            .values()
            .filter(|run| {
                run.status == RunStatus::Queued
                    && run.queued_at.unwrap_or(run.created_at) < now - max_age_ms
            })
            .map(|run| run.id)
            .collect();
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
}
