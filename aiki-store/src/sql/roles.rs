//! The store contract's roles, implemented once for both SQL databases by calling the
//! operations of [`SqlStore`].

use async_trait::async_trait;

use super::{Dialect, SqlStore};
use crate::{ClientStore, ExecutorStore, ReadStore, Sweeper};

#[async_trait]
impl<D: Dialect> ReadStore for SqlStore<D> {
    async fn load_history(&self, id: crate::RunId) -> Result<crate::History, crate::StoreError> {
        self.load_history(id).await
    }

    fn backend(&self) -> &'static str {
        self.backend()
    }

    async fn get_run(&self, id: crate::RunId) -> Result<crate::RunRecord, crate::StoreError> {
        self.get_run(id).await
    }

    async fn list_runs(
        &self,
        request: crate::ListRuns,
    ) -> Result<crate::RunPage, crate::StoreError> {
        self.list_runs(request).await
    }

    async fn run_counts(&self) -> Result<Vec<crate::RunCounts>, crate::StoreError> {
        self.run_counts().await
    }

    async fn timeline(
        &self,
        id: crate::RunId,
    ) -> Result<Vec<crate::StatusChange>, crate::StoreError> {
        self.timeline(id).await
    }

    async fn catalog(&self) -> Result<Vec<crate::CatalogEntry>, crate::StoreError> {
        self.catalog().await
    }

    async fn list_workers(
        &self,
        now: crate::Millis,
        within_ms: i64,
    ) -> Result<Vec<crate::WorkerRecord>, crate::StoreError> {
        self.list_workers(now, within_ms).await
    }

    async fn changes_since(
        &self,
        cursor: &crate::ChangeCursor,
        limit: u32,
    ) -> Result<crate::ChangePage, crate::StoreError> {
        self.changes_since(cursor, limit).await
    }

    async fn runtime_config(&self) -> Result<crate::RuntimeConfig, crate::StoreError> {
        self.runtime_config().await
    }

    async fn schedules(&self) -> Result<Vec<crate::ScheduleRecord>, crate::StoreError> {
        self.schedules().await
    }

    async fn schedule(&self, name: &str) -> Result<crate::ScheduleRecord, crate::StoreError> {
        self.schedule(name).await
    }

    async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<crate::ScheduleLogEntry>, crate::StoreError> {
        self.schedule_log(name, limit).await
    }
}

#[async_trait]
impl<D: Dialect> ExecutorStore for SqlStore<D> {
    fn ready_signals(&self) -> Option<crate::ReadySignals> {
        self.ready_signals()
    }

    async fn claim(
        &self,
        request: crate::ClaimRequest,
    ) -> Result<crate::Claimed, crate::StoreError> {
        self.claim(request).await
    }

    async fn refresh_claim(
        &self,
        id: crate::RunId,
        owner: &str,
        expected: u64,
        now: crate::Millis,
    ) -> Result<crate::ClaimState, crate::StoreError> {
        self.refresh_claim(id, owner, expected, now).await
    }

    async fn put_entry(
        &self,
        expected: u64,
        entry: crate::EntryRecord,
    ) -> Result<(), crate::StoreError> {
        self.limit.check_entry(&entry)?;
        self.put_entry(expected, entry).await
    }

    async fn put_entries(
        &self,
        expected: u64,
        entries: Vec<crate::EntryRecord>,
    ) -> Result<(), crate::StoreError> {
        for entry in &entries {
            self.limit.check_entry(entry)?;
        }
        // Group commit: the entries travel in one statement (see `batch`).
        self.entries.put_all(expected, entries).await
    }

    fn payload_limit(&self) -> Option<crate::limit::PayloadLimit> {
        Some(self.limit)
    }

    async fn start_child(
        &self,
        expected: u64,
        entry: crate::EntryRecord,
        child: crate::NewRun,
    ) -> Result<crate::RunRecord, crate::StoreError> {
        self.limit.check_new_run(&child)?;
        self.start_child(expected, entry, child).await
    }

    async fn put_sleep(
        &self,
        expected: u64,
        sleep: crate::SleepRecord,
        from: Option<crate::Millis>,
    ) -> Result<crate::SleepRecord, crate::StoreError> {
        self.put_sleep(expected, sleep, from).await
    }

    async fn record_event_slot(
        &self,
        expected: u64,
        slot: crate::EventRecord,
    ) -> Result<crate::EventRecord, crate::StoreError> {
        self.record_event_slot(expected, slot).await
    }

    async fn claim_run(
        &self,
        request: crate::ClaimRequest,
        id: crate::RunId,
    ) -> Result<crate::Claimed, crate::StoreError> {
        self.claim_run(request, id).await
    }

    async fn transition(
        &self,
        id: crate::RunId,
        expected: u64,
        transition: crate::Transition,
    ) -> Result<crate::RunRecord, crate::StoreError> {
        self.limit.check_transition(id, &transition)?;
        self.transition(id, expected, transition).await
    }

    async fn continue_run(
        &self,
        id: crate::RunId,
        expected: u64,
        continuation: crate::Continuation,
    ) -> Result<crate::Continued, crate::StoreError> {
        self.limit.check_new_run(&continuation.successor)?;
        self.continue_run(id, expected, continuation).await
    }

    async fn record_worker(
        &self,
        worker: crate::WorkerRecord,
        now: crate::Millis,
    ) -> Result<crate::WorkerRecord, crate::StoreError> {
        self.record_worker(worker, now).await
    }

    async fn publish_catalog(
        &self,
        entry: crate::CatalogEntry,
        now: crate::Millis,
    ) -> Result<crate::CatalogEntry, crate::StoreError> {
        self.publish_catalog(entry, now).await
    }

    async fn add_catalog_tasks(
        &self,
        namespace: &crate::Namespace,
        fingerprint: &str,
        tasks: Vec<crate::TaskDeclaration>,
    ) -> Result<(), crate::StoreError> {
        self.add_catalog_tasks(namespace, fingerprint, tasks).await
    }

    async fn declare_schedules(
        &self,
        declared: Vec<crate::ScheduleRecord>,
        serves: Vec<crate::Namespace>,
        worker: &str,
        now: crate::Millis,
    ) -> Result<Vec<crate::schedule::Declared>, crate::StoreError> {
        for schedule in &declared {
            self.limit
                .check_schedule(&schedule.name, &schedule.definition)?;
        }
        self.declare_schedules(declared, serves, worker, now).await
    }
}

#[async_trait]
impl<D: Dialect> ClientStore for SqlStore<D> {
    async fn create_run(
        &self,
        run: crate::NewRun,
    ) -> Result<crate::CreateOutcome, crate::StoreError> {
        self.limit.check_new_run(&run)?;
        self.create_run(run).await
    }

    async fn fork_run(
        &self,
        fork: crate::NewFork,
    ) -> Result<crate::CreateOutcome, crate::StoreError> {
        self.limit.check_fork(&fork)?;
        self.fork_run(fork).await
    }

    async fn append_event(
        &self,
        event: crate::NewEvent,
    ) -> Result<crate::AppendOutcome, crate::StoreError> {
        self.limit.check_event(&event)?;
        self.append_event(event).await
    }

    async fn act(
        &self,
        id: crate::RunId,
        action: crate::RunAction,
        actor: Option<String>,
        now: crate::Millis,
    ) -> Result<crate::RunRecord, crate::StoreError> {
        self.act(id, action, actor, now).await
    }

    async fn release_claim(
        &self,
        id: crate::RunId,
        expected: u64,
        now: crate::Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<crate::RunRecord>, crate::StoreError> {
        self.release_claim(id, expected, now, confirm_ms, actor)
            .await
    }

    async fn transition_all(
        &self,
        moves: Vec<crate::Move>,
    ) -> Result<Vec<crate::RunRecord>, crate::StoreError> {
        for change in &moves {
            self.limit.check_transition(change.id, &change.transition)?;
        }
        self.transition_all(moves).await
    }

    async fn set_config(
        &self,
        key: crate::ConfigKey,
        value: i64,
        now: crate::Millis,
    ) -> Result<crate::RuntimeConfig, crate::StoreError> {
        self.set_config(key, value, now).await
    }

    async fn create_schedule(
        &self,
        schedule: crate::ScheduleRecord,
        actor: Option<String>,
    ) -> Result<crate::ScheduleCreated, crate::StoreError> {
        self.limit
            .check_schedule(&schedule.name, &schedule.definition)?;
        self.create_schedule(schedule, actor).await
    }

    async fn act_on_schedule(
        &self,
        name: &str,
        action: crate::ScheduleAction,
        actor: Option<String>,
        now: crate::Millis,
    ) -> Result<crate::ScheduleActed, crate::StoreError> {
        self.limit.check_schedule_action(name, &action)?;
        self.act_on_schedule(name, action, actor, now).await
    }
}

#[async_trait]
impl<D: Dialect> Sweeper for SqlStore<D> {
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
        now: crate::Millis,
    ) -> Result<crate::Lease, crate::StoreError> {
        self.acquire_lease(name, holder, ttl_ms, now).await
    }

    async fn release_lease(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
    ) -> Result<(), crate::StoreError> {
        self.release_lease(lease, now).await
    }

    async fn wake_due(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        limit: u32,
    ) -> Result<u64, crate::StoreError> {
        self.wake_due(lease, now, limit).await
    }

    async fn release_stale_claims(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        timing: crate::ClaimTiming,
        limit: u32,
    ) -> Result<Vec<crate::RunId>, crate::StoreError> {
        self.release_stale_claims(lease, now, timing, limit).await
    }

    async fn stall_undelivered(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        max_age_ms: i64,
        limit: u32,
    ) -> Result<u64, crate::StoreError> {
        self.stall_undelivered(lease, now, max_age_ms, limit).await
    }

    async fn prune_workers(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        older_than_ms: i64,
    ) -> Result<u64, crate::StoreError> {
        self.prune_workers(lease, now, older_than_ms).await
    }

    async fn forget_operations(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        older_than_ms: i64,
        limit: u32,
    ) -> Result<u64, crate::StoreError> {
        self.forget_operations(lease, now, older_than_ms, limit)
            .await
    }

    async fn purge_runs(
        &self,
        lease: &crate::Lease,
        now: crate::Millis,
        purge: crate::PurgeRuns,
    ) -> Result<Vec<crate::RunId>, crate::StoreError> {
        self.purge_runs(lease, now, purge).await
    }

    async fn due_schedules(
        &self,
        now: crate::Millis,
        limit: u32,
    ) -> Result<Vec<crate::DueSchedule>, crate::StoreError> {
        self.due_schedules(now, limit).await
    }

    async fn advance_schedule(
        &self,
        lease: &crate::Lease,
        write: crate::ScheduleWrite,
    ) -> Result<bool, crate::StoreError> {
        self.advance_schedule(lease, write).await
    }
}
