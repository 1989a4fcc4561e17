//! A store that counts the calls the runtime makes and can fail some as an outage would.

use aiki::BoxStore;
use aiki::store::{
    AppendOutcome, ClaimRequest, CreateOutcome, EntryRecord, EventRecord, History, Lease, Millis,
    NewEvent, NewRun, PurgeRuns, RunId, RunRecord, SleepRecord, StoreError, Transition,
};

/// A store that counts the calls the runtime makes, by method, and passes them on.
#[derive(Debug)]
pub(crate) struct Counting {
    inner: BoxStore,
    calls: std::sync::Mutex<std::collections::HashMap<&'static str, u64>>,
    /// How many of the next calls of a method fail as if the store were unreachable.
    pub(crate) failures: std::sync::Mutex<std::collections::HashMap<&'static str, u32>>,
    /// The entry writes and transitions the store answered, in order, with what else the
    /// test notes (`note`): `"entries completed:a running:b"`, `"transition completed"`.
    pub(crate) log: std::sync::Mutex<Vec<String>>,
    /// Every call, by method, in the order they were made.
    order: std::sync::Mutex<Vec<&'static str>>,
    /// Whether it keeps its store's payload limit to itself, as a server of an earlier release
    /// does (see `ExecutorStore::payload_limit`).
    hides_limit: bool,
}

impl Counting {
    pub(crate) fn new(inner: BoxStore) -> Self {
        Counting {
            inner,
            calls: Default::default(),
            failures: Default::default(),
            log: Default::default(),
            order: Default::default(),
            hides_limit: false,
        }
    }

    /// `Err(Unavailable)` while failures of `method` are left to inject.
    fn fault(&self, method: &'static str) -> Result<(), StoreError> {
        let mut failures = self.failures.lock().unwrap();
        match failures.get_mut(method) {
            Some(left) if *left > 0 => {
                *left -= 1;
                Err(StoreError::Unavailable {
                    message: format!("injected outage ({method})"),
                    source: None,
                })
            }
            _ => Ok(()),
        }
    }

    fn count(&self, method: &'static str) {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
        self.order.lock().unwrap().push(method);
    }

    /// Where `method` was first called among all calls (`None`: never).
    #[allow(
        dead_code,
        reason = "one of the test binaries sharing this file uses it"
    )]
    pub(crate) fn first_call(&self, method: &str) -> Option<usize> {
        self.order.lock().unwrap().iter().position(|m| *m == method)
    }

    /// Where `method` was last called among all calls (`None`: never).
    #[allow(
        dead_code,
        reason = "one of the test binaries sharing this file uses it"
    )]
    pub(crate) fn last_call(&self, method: &str) -> Option<usize> {
        self.order
            .lock()
            .unwrap()
            .iter()
            .rposition(|m| *m == method)
    }

    /// This store, stating no payload limit.
    #[allow(
        dead_code,
        reason = "one of the test binaries sharing this file uses it"
    )]
    pub(crate) fn hiding_limit(mut self) -> Self {
        self.hides_limit = true;
        self
    }

    /// Adds `line` to the log.
    pub(crate) fn note(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }

    /// Notes entries the store wrote.
    fn wrote(&self, entries: &[EntryRecord]) {
        let written: Vec<String> = entries
            .iter()
            .map(|entry| format!("{}:{}", entry.status.as_str(), entry.address))
            .collect();
        self.note(format!("entries {}", written.join(" ")));
    }

    pub(crate) fn calls(&self, method: &str) -> u64 {
        self.calls.lock().unwrap().get(method).copied().unwrap_or(0)
    }
}

#[aiki::async_trait]
impl aiki::store::ReadStore for Counting {
    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        self.count("load_history");
        self.inner.load_history(id).await
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.count("get_run");
        self.inner.get_run(id).await
    }
    async fn changes_since(
        &self,
        cursor: &aiki::store::ChangeCursor,
        limit: u32,
    ) -> Result<aiki::store::ChangePage, StoreError> {
        self.count("changes_since");
        self.inner.changes_since(cursor, limit).await
    }
    async fn run_counts(&self) -> Result<Vec<aiki::store::RunCounts>, StoreError> {
        self.count("run_counts");
        self.inner.run_counts().await
    }
    async fn timeline(&self, id: RunId) -> Result<Vec<aiki::store::StatusChange>, StoreError> {
        self.count("timeline");
        self.inner.timeline(id).await
    }
    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<aiki::store::WorkerRecord>, StoreError> {
        self.count("list_workers");
        self.inner.list_workers(now, within_ms).await
    }
    async fn catalog(&self) -> Result<Vec<aiki::store::CatalogEntry>, StoreError> {
        self.count("catalog");
        self.inner.catalog().await
    }
    async fn list_runs(
        &self,
        request: aiki::store::ListRuns,
    ) -> Result<aiki::store::RunPage, StoreError> {
        self.count("list_runs");
        self.inner.list_runs(request).await
    }
    async fn runtime_config(&self) -> Result<aiki::RuntimeConfig, StoreError> {
        self.count("runtime_config");
        self.inner.runtime_config().await
    }
    async fn schedules(&self) -> Result<Vec<aiki::store::ScheduleRecord>, StoreError> {
        self.count("schedules");
        self.inner.schedules().await
    }
    async fn schedule(&self, name: &str) -> Result<aiki::store::ScheduleRecord, StoreError> {
        self.count("schedule");
        self.inner.schedule(name).await
    }
    async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<aiki::store::ScheduleLogEntry>, StoreError> {
        self.count("schedule_log");
        self.inner.schedule_log(name, limit).await
    }
}

#[aiki::async_trait]
impl aiki::store::ExecutorStore for Counting {
    fn ready_signals(&self) -> Option<aiki::store::ReadySignals> {
        self.inner.ready_signals()
    }
    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        self.count("transition");
        let moved = self.inner.transition(id, expected, transition).await?;
        self.note(format!("transition {}", moved.status));
        Ok(moved)
    }
    async fn claim_run(
        &self,
        request: aiki::store::ClaimRequest,
        id: RunId,
    ) -> Result<aiki::store::Claimed, StoreError> {
        self.count("claim_run");
        self.inner.claim_run(request, id).await
    }
    async fn claim(&self, request: ClaimRequest) -> Result<aiki::store::Claimed, StoreError> {
        self.count("claim");
        self.fault("claim")?;
        self.inner.claim(request).await
    }
    async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<aiki::store::ClaimState, StoreError> {
        self.count("refresh_claim");
        self.inner.refresh_claim(id, owner, expected, now).await
    }
    async fn put_entry(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError> {
        self.count("put_entry");
        self.fault("put_entry")?;
        let written = [entry];
        self.inner.put_entry(expected, written[0].clone()).await?;
        self.wrote(&written);
        Ok(())
    }
    async fn put_entries(
        &self,
        expected: u64,
        entries: Vec<EntryRecord>,
    ) -> Result<(), StoreError> {
        self.count("put_entries");
        self.fault("put_entries")?;
        self.inner.put_entries(expected, entries.clone()).await?;
        self.wrote(&entries);
        Ok(())
    }
    fn payload_limit(&self) -> Option<aiki::store::limit::PayloadLimit> {
        self.inner.payload_limit().filter(|_| !self.hides_limit)
    }
    async fn start_child(
        &self,
        expected: u64,
        entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        self.count("start_child");
        self.inner.start_child(expected, entry, child).await
    }
    async fn continue_run(
        &self,
        id: RunId,
        expected: u64,
        continuation: aiki::store::Continuation,
    ) -> Result<aiki::store::Continued, StoreError> {
        self.count("continue_run");
        self.inner.continue_run(id, expected, continuation).await
    }
    async fn put_sleep(
        &self,
        expected: u64,
        sleep: SleepRecord,
        from: Option<Millis>,
    ) -> Result<SleepRecord, StoreError> {
        self.count("put_sleep");
        self.inner.put_sleep(expected, sleep, from).await
    }
    async fn record_worker(
        &self,
        worker: aiki::store::WorkerRecord,
        now: Millis,
    ) -> Result<aiki::store::WorkerRecord, StoreError> {
        self.count("record_worker");
        self.inner.record_worker(worker, now).await
    }
    async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError> {
        self.count("record_event_slot");
        self.inner.record_event_slot(expected, slot).await
    }
    async fn publish_catalog(
        &self,
        entry: aiki::store::CatalogEntry,
        now: Millis,
    ) -> Result<aiki::store::CatalogEntry, StoreError> {
        self.count("publish_catalog");
        self.inner.publish_catalog(entry, now).await
    }
    async fn add_catalog_tasks(
        &self,
        namespace: &aiki::Namespace,
        fingerprint: &str,
        tasks: Vec<aiki::store::TaskDeclaration>,
    ) -> Result<(), StoreError> {
        self.count("add_catalog_tasks");
        self.inner
            .add_catalog_tasks(namespace, fingerprint, tasks)
            .await
    }
    async fn declare_schedules(
        &self,
        declared: Vec<aiki::store::ScheduleRecord>,
        serves: Vec<aiki::store::Namespace>,
        worker: &str,
        now: Millis,
    ) -> Result<Vec<aiki::store::schedule::Declared>, StoreError> {
        self.count("declare_schedules");
        self.inner
            .declare_schedules(declared, serves, worker, now)
            .await
    }
}

#[aiki::async_trait]
impl aiki::store::ClientStore for Counting {
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        self.count("create_run");
        self.inner.create_run(run).await
    }

    async fn transition_all(
        &self,
        moves: Vec<aiki::store::Move>,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.count("transition_all");
        self.inner.transition_all(moves).await
    }
    async fn set_config(
        &self,
        key: aiki::ConfigKey,
        value: i64,
        now: Millis,
    ) -> Result<aiki::RuntimeConfig, StoreError> {
        self.count("set_config");
        self.inner.set_config(key, value, now).await
    }
    async fn release_claim(
        &self,
        id: RunId,
        expected: u64,
        now: Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<RunRecord>, StoreError> {
        self.count("release_claim");
        self.inner
            .release_claim(id, expected, now, confirm_ms, actor)
            .await
    }
    async fn act(
        &self,
        id: RunId,
        action: aiki::store::RunAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<RunRecord, StoreError> {
        self.count("act");
        self.inner.act(id, action, actor, now).await
    }
    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        self.count("append_event");
        self.inner.append_event(event).await
    }
    async fn fork_run(&self, fork: aiki::store::NewFork) -> Result<CreateOutcome, StoreError> {
        self.count("fork_run");
        self.inner.fork_run(fork).await
    }
    async fn create_schedule(
        &self,
        schedule: aiki::store::ScheduleRecord,
        actor: Option<String>,
    ) -> Result<aiki::store::ScheduleCreated, StoreError> {
        self.count("create_schedule");
        self.inner.create_schedule(schedule, actor).await
    }
    async fn act_on_schedule(
        &self,
        name: &str,
        action: aiki::store::ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<aiki::store::ScheduleActed, StoreError> {
        self.count("act_on_schedule");
        self.inner.act_on_schedule(name, action, actor, now).await
    }
}

#[aiki::async_trait]
impl aiki::store::EndpointStore for Counting {
    async fn put_endpoint(
        &self,
        endpoint: aiki::store::EndpointRecord,
        expected: Option<u64>,
    ) -> Result<aiki::store::EndpointRecord, StoreError> {
        self.count("put_endpoint");
        self.inner.put_endpoint(endpoint, expected).await
    }
    async fn endpoints(&self) -> Result<Vec<aiki::store::EndpointRecord>, StoreError> {
        self.count("endpoints");
        self.inner.endpoints().await
    }
    async fn remove_endpoint(
        &self,
        namespace: &aiki::store::Namespace,
    ) -> Result<aiki::store::EndpointRecord, StoreError> {
        self.count("remove_endpoint");
        self.inner.remove_endpoint(namespace).await
    }
}

#[aiki::async_trait]
impl aiki::store::KeyStore for Counting {
    async fn create_key(&self, key: aiki::store::ApiKeyRecord) -> Result<(), StoreError> {
        self.count("create_key");
        self.inner.create_key(key).await
    }
    async fn key(&self, id: &str) -> Result<Option<aiki::store::ApiKeyRecord>, StoreError> {
        self.count("key");
        self.inner.key(id).await
    }
    async fn keys(&self) -> Result<Vec<aiki::store::ApiKeyRecord>, StoreError> {
        self.count("keys");
        self.inner.keys().await
    }
    async fn revoke_key(
        &self,
        id: &str,
        now: Millis,
    ) -> Result<aiki::store::ApiKeyRecord, StoreError> {
        self.count("revoke_key");
        self.inner.revoke_key(id, now).await
    }
}

#[aiki::async_trait]
impl aiki::store::Sweeper for Counting {
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
        now: Millis,
    ) -> Result<Lease, StoreError> {
        self.count("acquire_lease");
        self.inner.acquire_lease(name, holder, ttl_ms, now).await
    }
    async fn release_lease(&self, lease: &Lease, now: Millis) -> Result<(), StoreError> {
        self.count("release_lease");
        self.inner.release_lease(lease, now).await
    }
    async fn wake_due(&self, lease: &Lease, now: Millis, limit: u32) -> Result<u64, StoreError> {
        self.count("wake_due");
        self.inner.wake_due(lease, now, limit).await
    }
    async fn release_stale_claims(
        &self,
        lease: &Lease,
        now: Millis,
        timing: aiki::store::ClaimTiming,
        limit: u32,
    ) -> Result<Vec<RunId>, StoreError> {
        self.count("release_stale_claims");
        self.inner
            .release_stale_claims(lease, now, timing, limit)
            .await
    }
    async fn stall_undelivered(
        &self,
        lease: &Lease,
        now: Millis,
        max_age_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        self.count("stall_undelivered");
        self.inner
            .stall_undelivered(lease, now, max_age_ms, limit)
            .await
    }
    async fn prune_workers(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
    ) -> Result<u64, StoreError> {
        self.count("prune_workers");
        self.inner.prune_workers(lease, now, older_than_ms).await
    }
    async fn purge_runs(
        &self,
        lease: &Lease,
        now: Millis,
        purge: PurgeRuns,
    ) -> Result<Vec<RunId>, StoreError> {
        self.count("purge_runs");
        self.inner.purge_runs(lease, now, purge).await
    }
    async fn forget_operations(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        self.count("forget_operations");
        self.inner
            .forget_operations(lease, now, older_than_ms, limit)
            .await
    }
    async fn due_schedules(
        &self,
        now: Millis,
        limit: u32,
    ) -> Result<Vec<aiki::store::DueSchedule>, StoreError> {
        self.count("due_schedules");
        self.inner.due_schedules(now, limit).await
    }
    async fn advance_schedule(
        &self,
        lease: &Lease,
        write: aiki::store::ScheduleWrite,
    ) -> Result<bool, StoreError> {
        self.count("advance_schedule");
        self.inner.advance_schedule(lease, write).await
    }
}
