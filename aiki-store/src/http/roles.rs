//! The role traits over HTTP: each operation one request to the route [`crate::api`] names.

use async_trait::async_trait;
use reqwest::Method;

use super::HttpStore;
use crate::api::{self, path, run_path};
use crate::{
    AppendOutcome, CatalogEntry, ChangeCursor, ChangePage, ClaimRequest, ClaimState, Claimed,
    ClientStore, ConfigKey, CreateOutcome, EntryRecord, EventRecord, ExecutorStore, History,
    ListRuns, Millis, Move, Namespace, NewEvent, NewFork, NewRun, ReadStore, RunAction, RunCounts,
    RunId, RunPage, RunRecord, RuntimeConfig, SleepRecord, StatusChange, StoreError,
    TaskDeclaration, Transition, WorkerRecord,
};

#[async_trait]
impl ReadStore for HttpStore {
    fn backend(&self) -> &'static str {
        "http"
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.transport.get(&run_path(path::RUN, id)).await
    }

    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        self.transport.get(&run_path(path::HISTORY, id)).await
    }

    async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError> {
        let query = api::ListRunsQuery::from(&request);
        self.transport
            .get(&super::with_query(path::RUNS_LIST, &query)?)
            .await
    }

    async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError> {
        self.transport.get(path::RUNS_COUNTS).await
    }

    async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError> {
        self.transport.get(&run_path(path::TIMELINE, id)).await
    }

    async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        self.transport.get(path::CATALOG).await
    }

    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError> {
        self.transport
            .get(&format!(
                "{}?now={now}&within_ms={within_ms}",
                path::WORKERS
            ))
            .await
    }

    async fn changes_since(
        &self,
        cursor: &ChangeCursor,
        limit: u32,
    ) -> Result<ChangePage, StoreError> {
        let query = api::ChangesSince {
            cursor: cursor.clone(),
            limit,
        };
        self.transport
            .get(&super::with_query(path::CHANGES, &query)?)
            .await
    }

    async fn runtime_config(&self) -> Result<RuntimeConfig, StoreError> {
        self.transport.get(path::CONFIG).await
    }

    async fn schedules(&self) -> Result<Vec<crate::ScheduleRecord>, StoreError> {
        self.transport.get(path::SCHEDULES).await
    }

    async fn schedule(&self, name: &str) -> Result<crate::ScheduleRecord, StoreError> {
        let query = api::ScheduleQuery {
            name: name.to_owned(),
            limit: None,
        };
        self.transport
            .get(&super::with_query(path::SCHEDULE, &query)?)
            .await
    }

    async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<crate::ScheduleLogEntry>, StoreError> {
        let query = api::ScheduleQuery {
            name: name.to_owned(),
            limit: Some(limit),
        };
        self.transport
            .get(&super::with_query(path::SCHEDULE_LOG, &query)?)
            .await
    }
}

#[async_trait]
impl ExecutorStore for HttpStore {
    async fn put_entry(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError> {
        // Group commit: the writes of this process's runs share a request (`entries.rs`).
        self.entries.put(expected, entry).await
    }

    async fn put_entries(
        &self,
        expected: u64,
        entries: Vec<EntryRecord>,
    ) -> Result<(), StoreError> {
        // An output over the limit refuses the call before anything is written.
        if let Some(limit) = self.stated_payload_limit() {
            for entry in &entries {
                limit.check_entry(entry)?;
            }
        }
        self.entries.put_all(expected, entries).await
    }

    fn payload_limit(&self) -> Option<crate::limit::PayloadLimit> {
        self.stated_payload_limit()
    }

    async fn start_child(
        &self,
        expected: u64,
        entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        let path = run_path(path::CHILDREN, entry.run_id);
        let body = api::StartChild {
            expected,
            entry,
            child,
        };
        self.transport.post(&path, &body).await
    }

    async fn put_sleep(
        &self,
        expected: u64,
        sleep: SleepRecord,
        from: Option<Millis>,
    ) -> Result<SleepRecord, StoreError> {
        let path = run_path(path::SLEEPS, sleep.run_id);
        let body = api::PutSleep {
            expected,
            sleep,
            from,
        };
        let stored: Option<SleepRecord> = self.transport.post(&path, &body).await?;
        // A server of an earlier release stores the sleep as sent, and answers `null`.
        Ok(stored.unwrap_or(body.sleep))
    }

    async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError> {
        let path = run_path(path::EVENT_SLOTS, slot.run_id);
        self.transport
            .post(&path, &api::RecordEventSlot { expected, slot })
            .await
    }

    async fn claim_run(&self, request: ClaimRequest, id: RunId) -> Result<Claimed, StoreError> {
        self.transport
            .post(&run_path(path::CLAIM_RUN, id), &request)
            .await
    }

    async fn claim(&self, request: ClaimRequest) -> Result<Claimed, StoreError> {
        let wait_ms = self.long_poll.as_millis();
        let path = if wait_ms == 0 {
            path::CLAIMS.to_owned()
        } else {
            format!("{}?wait_ms={wait_ms}", path::CLAIMS)
        };
        let body = super::encode(&path, &request)?;
        if let Some((id, fresh)) = crate::operation::request_key() {
            // The caller names the operation: its repeats are the caller's.
            return self
                .transport
                .send(Method::POST, &path, Some(body), id.as_str(), fresh)
                .await;
        }
        // A claim whose answer never came may have claimed runs that nobody would run before
        // claim recovery released them: the claimer's next claim sends it again (same key),
        // and gets those runs from its first answer, or claims now if it never arrived.
        let repeat = self.unanswered_claims().remove(&request.owner);
        let fresh = repeat.is_none();
        let key = repeat.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut claimed = self
            .transport
            .send::<Claimed>(Method::POST, &path, Some(body), &key, fresh)
            .await;
        match &mut claimed {
            // Its runs may be those the first send claimed, their heartbeats that send's time.
            Ok(answer) => answer.repeated = !fresh,
            Err(error) if error.is_transient() => {
                self.unanswered_claims().insert(request.owner, key);
            }
            Err(_) => {}
        }
        claimed
    }

    async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<ClaimState, StoreError> {
        let body = api::RefreshClaim {
            owner: owner.to_owned(),
            expected,
            now,
        };
        self.transport
            .post(&run_path(path::REFRESH, id), &body)
            .await
    }

    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        let body = api::TransitionRun {
            expected,
            transition,
        };
        self.transport
            .post(&run_path(path::TRANSITION, id), &body)
            .await
    }

    async fn continue_run(
        &self,
        id: RunId,
        expected: u64,
        continuation: crate::Continuation,
    ) -> Result<crate::Continued, StoreError> {
        let body = api::ContinueRun {
            expected,
            continuation,
        };
        self.transport
            .post(&run_path(path::CONTINUATION, id), &body)
            .await
    }

    async fn record_worker(
        &self,
        worker: WorkerRecord,
        now: Millis,
    ) -> Result<WorkerRecord, StoreError> {
        self.transport
            .post(path::WORKERS, &api::RecordWorker { worker, now })
            .await
    }

    async fn publish_catalog(
        &self,
        entry: CatalogEntry,
        now: Millis,
    ) -> Result<CatalogEntry, StoreError> {
        self.transport
            .post(path::CATALOG, &api::PublishCatalog { entry, now })
            .await
    }

    async fn add_catalog_tasks(
        &self,
        namespace: &Namespace,
        fingerprint: &str,
        tasks: Vec<TaskDeclaration>,
    ) -> Result<(), StoreError> {
        let body = api::AddCatalogTasks {
            namespace: namespace.clone(),
            fingerprint: fingerprint.to_owned(),
            tasks,
        };
        self.transport.post(path::CATALOG_TASKS, &body).await
    }

    async fn declare_schedules(
        &self,
        declared: Vec<crate::ScheduleRecord>,
        serves: Vec<Namespace>,
        worker: &str,
        now: Millis,
    ) -> Result<Vec<crate::schedule::Declared>, StoreError> {
        let body = api::DeclareSchedules {
            declared,
            serves,
            worker: worker.to_owned(),
            now,
        };
        self.transport.post(path::SCHEDULES_DECLARED, &body).await
    }
}

#[async_trait]
impl ClientStore for HttpStore {
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        self.transport.post(path::RUNS, &run).await
    }

    async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError> {
        self.transport.post(path::FORKS, &fork).await
    }

    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        self.transport
            .post(&run_path(path::EVENTS, event.run_id), &event)
            .await
    }

    async fn act(
        &self,
        id: RunId,
        action: RunAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<RunRecord, StoreError> {
        let body = api::Act { action, actor, now };
        self.transport
            .post(&run_path(path::ACTIONS, id), &body)
            .await
    }

    async fn release_claim(
        &self,
        id: RunId,
        expected: u64,
        now: Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<RunRecord>, StoreError> {
        let body = api::ReleaseClaim {
            expected,
            now,
            confirm_ms,
            actor,
        };
        self.transport
            .post(&run_path(path::RELEASE, id), &body)
            .await
    }

    async fn transition_all(&self, moves: Vec<Move>) -> Result<Vec<RunRecord>, StoreError> {
        self.transport.post(path::TRANSITIONS, &moves).await
    }

    async fn set_config(
        &self,
        key: ConfigKey,
        value: i64,
        now: Millis,
    ) -> Result<RuntimeConfig, StoreError> {
        let path = path::CONFIG_KEY.replace("{key}", key.as_str());
        self.transport
            .call(Method::PUT, &path, Some(&api::SetConfig { value, now }))
            .await
    }

    async fn create_schedule(
        &self,
        schedule: crate::ScheduleRecord,
        actor: Option<String>,
    ) -> Result<crate::ScheduleCreated, StoreError> {
        let body = api::CreateSchedule { schedule, actor };
        self.transport.post(path::SCHEDULES, &body).await
    }

    async fn act_on_schedule(
        &self,
        name: &str,
        action: crate::ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<crate::ScheduleActed, StoreError> {
        let body = api::ActOnSchedule {
            name: name.to_owned(),
            action,
            actor,
            now,
        };
        self.transport.post(path::SCHEDULE_ACTIONS, &body).await
    }
}

impl crate::Connected for HttpStore {
    fn whole(self: std::sync::Arc<Self>) -> Option<crate::BoxStore> {
        None
    }
}
