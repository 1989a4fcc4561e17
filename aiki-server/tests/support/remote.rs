//! A store reached through a real server: [`HttpStore`] in front of `aiki_server::router` on a
//! free port of 127.0.0.1, serving a backing store. The executor, client and read roles go over
//! HTTP; the sweeper role, which the API does not serve (the server's leader sweeps), goes to
//! the backing store, as the server's own daemons would, and so does the key role (`aiki keys`
//! works on the store directly).

use std::net::SocketAddr;

use aiki_store::conformance::Fixture;
use aiki_store::http::HttpStore;
use aiki_store::prelude::*;
use aiki_store::*;
use async_trait::async_trait;
use axum::response::IntoResponse;

use super::shared_time::SharedTime;

/// The servers' tasks and the two ways to the store.
#[derive(Debug)]
pub struct Remote {
    /// A client of each server, taken in turn, one call each.
    https: Vec<HttpStore>,
    next: std::sync::atomic::AtomicUsize,
    backing: BoxStore,
    servers: Vec<tokio::task::JoinHandle<()>>,
    addr: SocketAddr,
    /// How many answers the fault layer dropped (none without one).
    dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The clock the servers stamp requests by, when the calls' times set it.
    time: Option<SharedTime>,
}

impl Remote {
    /// Serves `backing` with `config` on a free port; the server stops when this is dropped.
    pub async fn start(backing: BoxStore, config: aiki_server::ServerConfig) -> Remote {
        let app = aiki_server::router(backing.clone(), config);
        Remote::serve(backing, app, Default::default()).await
    }

    /// Serves `backing` with two servers of `config`, each on a free port, and sends the
    /// calls to them in turn: every repeat of an operation (see `aiki_store::operation`) and
    /// every next step of a check reaches the other server, as with several servers in front
    /// of one store behind a load balancer.
    pub async fn start_two(backing: BoxStore, config: aiki_server::ServerConfig) -> Remote {
        let first = aiki_server::router(backing.clone(), config.clone());
        let second = aiki_server::router(backing.clone(), config);
        let mut remote = Remote::serve(backing, first, Default::default()).await;
        let (server, http, _) = Remote::listen(second).await;
        remote.servers.push(server);
        remote.https.push(http);
        remote
    }

    /// How many answers the fault layer dropped.
    pub fn dropped(&self) -> usize {
        self.dropped.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Serves `backing` behind a fault layer that lets every `every`-th write through and then
    /// answers it with a bare 502, as a proxy whose connection to the server dropped after the
    /// server did the write.
    pub async fn start_with_faults(
        backing: BoxStore,
        config: aiki_server::ServerConfig,
        every: usize,
    ) -> Remote {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let writes = AtomicUsize::new(0);
        Remote::start_losing(backing, config, move |method, _| {
            *method != axum::http::Method::GET
                && writes.fetch_add(1, Ordering::SeqCst) % every == every - 1
        })
        .await
    }

    /// Serves `backing` behind a fault layer that lets each request through and then answers
    /// it with a bare 502 when `lose(method, path)` says so, as a proxy whose connection to the
    /// server dropped after the server did the request.
    pub async fn start_losing(
        backing: BoxStore,
        config: aiki_server::ServerConfig,
        lose: impl Fn(&axum::http::Method, &str) -> bool + Send + Sync + 'static,
    ) -> Remote {
        use std::sync::atomic::Ordering;
        let lose = std::sync::Arc::new(lose);
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = dropped.clone();
        let fault = move |request: axum::extract::Request, next: axum::middleware::Next| {
            let lose = lose.clone();
            let counted = counted.clone();
            async move {
                let method = request.method().clone();
                let path = request.uri().path().to_owned();
                let response = next.run(request).await;
                if lose(&method, &path) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    return axum::http::StatusCode::BAD_GATEWAY.into_response();
                }
                response
            }
        };
        let app =
            aiki_server::router(backing.clone(), config).layer(axum::middleware::from_fn(fault));
        Remote::serve(backing, app, dropped).await
    }

    async fn serve(
        backing: BoxStore,
        app: axum::Router,
        dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) -> Remote {
        let (server, http, addr) = Remote::listen(app).await;
        Remote {
            https: vec![http],
            next: Default::default(),
            backing,
            servers: vec![server],
            addr,
            dropped,
            time: None,
        }
    }

    /// Sets `time` (the servers' clock) to the time each call carries before sending it, as
    /// the conformance checks expect of a store whose clock they control.
    pub fn sharing(mut self, time: SharedTime) -> Self {
        self.time = Some(time);
        self
    }

    /// Runs `call` with the servers' clock at `now`, when it is shared.
    async fn at<T>(&self, now: Millis, call: impl std::future::Future<Output = T>) -> T {
        match &self.time {
            Some(time) => time.at(now, call).await,
            None => call.await,
        }
    }

    /// Serves `app` on a free port: its task, a client and its address.
    async fn listen(app: axum::Router) -> (tokio::task::JoinHandle<()>, HttpStore, SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let addr = listener.local_addr().expect("its address");
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the server serves");
        });
        let http = HttpStore::new(&format!("http://{addr}")).expect("an http URL");
        (server, http, addr)
    }

    /// The client of the next server in turn.
    fn http(&self) -> &HttpStore {
        let turn = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.https[turn % self.https.len()]
    }

    /// The (first) server's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The store behind the server.
    pub fn backing(&self) -> &BoxStore {
        &self.backing
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        for server in &self.servers {
            server.abort();
        }
    }
}

impl Fixture for Remote {
    fn store(&self) -> Option<&dyn Store> {
        Some(self)
    }
}

#[async_trait]
impl ReadStore for Remote {
    fn backend(&self) -> &'static str {
        self.http().backend()
    }
    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.http().get_run(id).await
    }
    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        self.http().load_history(id).await
    }
    async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError> {
        self.http().list_runs(request).await
    }
    async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError> {
        self.http().run_counts().await
    }
    async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError> {
        self.http().timeline(id).await
    }
    async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        self.http().catalog().await
    }
    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError> {
        self.at(now, self.http().list_workers(now, within_ms)).await
    }
    async fn changes_since(
        &self,
        cursor: &ChangeCursor,
        limit: u32,
    ) -> Result<ChangePage, StoreError> {
        self.http().changes_since(cursor, limit).await
    }
    async fn runtime_config(&self) -> Result<RuntimeConfig, StoreError> {
        self.http().runtime_config().await
    }
    async fn schedules(&self) -> Result<Vec<aiki_store::ScheduleRecord>, StoreError> {
        self.http().schedules().await
    }
    async fn schedule(&self, name: &str) -> Result<aiki_store::ScheduleRecord, StoreError> {
        self.http().schedule(name).await
    }
    async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<aiki_store::ScheduleLogEntry>, StoreError> {
        self.http().schedule_log(name, limit).await
    }
}

#[async_trait]
impl ExecutorStore for Remote {
    async fn put_entry(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError> {
        let now = entry.updated_at;
        self.at(now, self.http().put_entry(expected, entry)).await
    }
    async fn put_entries(
        &self,
        expected: u64,
        entries: Vec<EntryRecord>,
    ) -> Result<(), StoreError> {
        let now = entries.first().map_or(0, |entry| entry.updated_at);
        self.at(now, self.http().put_entries(expected, entries))
            .await
    }
    fn payload_limit(&self) -> Option<aiki_store::limit::PayloadLimit> {
        self.https.iter().find_map(HttpStore::payload_limit)
    }
    async fn start_child(
        &self,
        expected: u64,
        entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        let now = child.now;
        self.at(now, self.http().start_child(expected, entry, child))
            .await
    }
    async fn put_sleep(
        &self,
        expected: u64,
        sleep: SleepRecord,
        from: Option<Millis>,
    ) -> Result<SleepRecord, StoreError> {
        match from {
            Some(now) => {
                self.at(now, self.http().put_sleep(expected, sleep, from))
                    .await
            }
            None => self.http().put_sleep(expected, sleep, from).await,
        }
    }
    async fn continue_run(
        &self,
        id: RunId,
        expected: u64,
        continuation: aiki_store::Continuation,
    ) -> Result<aiki_store::Continued, StoreError> {
        let now = continuation.now;
        self.at(now, self.http().continue_run(id, expected, continuation))
            .await
    }
    async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError> {
        self.http().record_event_slot(expected, slot).await
    }
    async fn claim_run(&self, request: ClaimRequest, id: RunId) -> Result<Claimed, StoreError> {
        self.at(request.now, self.http().claim_run(request.clone(), id))
            .await
    }
    async fn claim(&self, request: ClaimRequest) -> Result<Claimed, StoreError> {
        self.at(request.now, self.http().claim(request.clone()))
            .await
    }
    async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<ClaimState, StoreError> {
        self.at(now, self.http().refresh_claim(id, owner, expected, now))
            .await
    }
    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        let now = transition.now;
        self.at(now, self.http().transition(id, expected, transition))
            .await
    }
    async fn record_worker(
        &self,
        worker: WorkerRecord,
        now: Millis,
    ) -> Result<WorkerRecord, StoreError> {
        self.at(now, self.http().record_worker(worker, now)).await
    }
    async fn publish_catalog(
        &self,
        entry: CatalogEntry,
        now: Millis,
    ) -> Result<CatalogEntry, StoreError> {
        self.at(now, self.http().publish_catalog(entry, now)).await
    }
    async fn add_catalog_tasks(
        &self,
        namespace: &Namespace,
        fingerprint: &str,
        tasks: Vec<TaskDeclaration>,
    ) -> Result<(), StoreError> {
        self.http()
            .add_catalog_tasks(namespace, fingerprint, tasks)
            .await
    }
    async fn declare_schedules(
        &self,
        declared: Vec<aiki_store::ScheduleRecord>,
        serves: Vec<aiki_store::Namespace>,
        worker: &str,
        now: Millis,
    ) -> Result<Vec<aiki_store::schedule::Declared>, StoreError> {
        self.at(
            now,
            self.http()
                .declare_schedules(declared.clone(), serves.clone(), worker, now),
        )
        .await
    }
}

#[async_trait]
impl ClientStore for Remote {
    /// A run with a parent link goes to the backing store: the client route refuses one (a
    /// child is started by its parent's executor), and the suite seeds some this way.
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        if run.parent.is_some() {
            return self.backing.create_run(run).await;
        }
        self.at(run.now, self.http().create_run(run.clone())).await
    }
    /// Forks go to the backing store: the suite's forks carry records their runs never wrote,
    /// of runs still running, which the server refuses (`tests/bad_input/owned.rs` checks the
    /// route).
    async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError> {
        self.backing.fork_run(fork).await
    }
    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError> {
        self.at(event.now, self.http().append_event(event.clone()))
            .await
    }
    async fn act(
        &self,
        id: RunId,
        action: RunAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<RunRecord, StoreError> {
        self.at(now, self.http().act(id, action, actor, now)).await
    }
    async fn release_claim(
        &self,
        id: RunId,
        expected: u64,
        now: Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<RunRecord>, StoreError> {
        let call = self
            .http()
            .release_claim(id, expected, now, confirm_ms, actor);
        self.at(now, call).await
    }
    async fn transition_all(&self, moves: Vec<Move>) -> Result<Vec<RunRecord>, StoreError> {
        match moves.first().map(|first| first.transition.now) {
            Some(now) => self.at(now, self.http().transition_all(moves)).await,
            None => self.http().transition_all(moves).await,
        }
    }
    async fn set_config(
        &self,
        key: ConfigKey,
        value: i64,
        now: Millis,
    ) -> Result<RuntimeConfig, StoreError> {
        self.at(now, self.http().set_config(key, value, now)).await
    }
    async fn create_schedule(
        &self,
        schedule: aiki_store::ScheduleRecord,
        actor: Option<String>,
    ) -> Result<aiki_store::ScheduleCreated, StoreError> {
        self.at(
            schedule.created_at,
            self.http().create_schedule(schedule.clone(), actor.clone()),
        )
        .await
    }
    async fn act_on_schedule(
        &self,
        name: &str,
        action: aiki_store::ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<aiki_store::ScheduleActed, StoreError> {
        self.at(
            now,
            self.http()
                .act_on_schedule(name, action.clone(), actor.clone(), now),
        )
        .await
    }
}

#[async_trait]
impl KeyStore for Remote {
    async fn create_key(&self, key: ApiKeyRecord) -> Result<(), StoreError> {
        self.backing.create_key(key).await
    }
    async fn key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        self.backing.key(id).await
    }
    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        self.backing.keys().await
    }
    async fn revoke_key(&self, id: &str, now: Millis) -> Result<ApiKeyRecord, StoreError> {
        self.backing.revoke_key(id, now).await
    }
}

#[async_trait]
impl aiki_store::EndpointStore for Remote {
    async fn put_endpoint(
        &self,
        endpoint: aiki_store::EndpointRecord,
        expected: Option<u64>,
    ) -> Result<aiki_store::EndpointRecord, StoreError> {
        self.backing.put_endpoint(endpoint, expected).await
    }
    async fn endpoints(&self) -> Result<Vec<aiki_store::EndpointRecord>, StoreError> {
        self.backing.endpoints().await
    }
    async fn remove_endpoint(
        &self,
        namespace: &aiki_store::Namespace,
    ) -> Result<aiki_store::EndpointRecord, StoreError> {
        self.backing.remove_endpoint(namespace).await
    }
}

#[async_trait]
impl Sweeper for Remote {
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
        now: Millis,
    ) -> Result<Lease, StoreError> {
        self.backing.acquire_lease(name, holder, ttl_ms, now).await
    }
    async fn release_lease(&self, lease: &Lease, now: Millis) -> Result<(), StoreError> {
        self.backing.release_lease(lease, now).await
    }
    async fn wake_due(&self, lease: &Lease, now: Millis, limit: u32) -> Result<u64, StoreError> {
        self.backing.wake_due(lease, now, limit).await
    }
    async fn release_stale_claims(
        &self,
        lease: &Lease,
        now: Millis,
        timing: ClaimTiming,
        limit: u32,
    ) -> Result<Vec<RunId>, StoreError> {
        self.backing
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
        self.backing
            .stall_undelivered(lease, now, max_age_ms, limit)
            .await
    }
    async fn prune_workers(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
    ) -> Result<u64, StoreError> {
        self.backing.prune_workers(lease, now, older_than_ms).await
    }
    async fn purge_runs(
        &self,
        lease: &Lease,
        now: Millis,
        purge: PurgeRuns,
    ) -> Result<Vec<RunId>, StoreError> {
        self.backing.purge_runs(lease, now, purge).await
    }
    async fn forget_operations(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        self.backing
            .forget_operations(lease, now, older_than_ms, limit)
            .await
    }
    async fn due_schedules(
        &self,
        now: Millis,
        limit: u32,
    ) -> Result<Vec<aiki_store::DueSchedule>, StoreError> {
        self.backing.due_schedules(now, limit).await
    }
    async fn advance_schedule(
        &self,
        lease: &Lease,
        write: aiki_store::ScheduleWrite,
    ) -> Result<bool, StoreError> {
        self.backing.advance_schedule(lease, write).await
    }
}
