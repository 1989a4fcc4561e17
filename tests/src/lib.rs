//! The harness of the end-to-end tests: a store per backend, a manual clock, a client, and
//! workers that can be swapped for new code while runs are in flight.
//!
//! Every scenario is an `async fn(Backend)`; [`on_every_backend!`] stamps out one test per
//! backend, in modules named after the backend (`memory::`, `sqlite::`, `postgres::`).

pub mod chaos;
pub mod check_app;
pub mod crash;
pub mod processes;
pub mod proxy;
pub mod redis;
pub mod soak;
pub mod upgrade;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{
    BoxStore, Client, ManualClock, RunHandle, RunRecord, RunStatus, Worker, WorkerBuilder,
    WorkerHandle, Workflow,
};

/// A storage backend under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `memory:`.
    Memory,
    /// A fresh SQLite file in the temp folder.
    Sqlite,
    /// A fresh schema in the PostgreSQL database named by `AIKI_TEST_DATABASE_URL`.
    Postgres,
}

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The PostgreSQL test server's URL.
pub fn postgres_url() -> String {
    std::env::var("AIKI_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

/// `true` when the PostgreSQL test server answers. When it does not, says so loudly and
/// returns `false`, except under `CI=true`, where a missing server fails the test.
pub async fn postgres_available() -> bool {
    use sqlx::Connection;
    match sqlx::PgConnection::connect(&postgres_url()).await {
        Ok(connection) => {
            let _ = connection.close().await;
            true
        }
        Err(error) => {
            let message = format!(
                "\n==================== POSTGRESQL SCENARIO SKIPPED ====================\n\
                 no PostgreSQL server answers at {}: {error}\n\
                 set AIKI_TEST_DATABASE_URL to run it\n\
                 ====================================================================\n",
                postgres_url()
            );
            if std::env::var("CI").is_ok_and(|ci| ci == "true") {
                panic!("{message}(CI=true: a missing server is a failure)");
            }
            eprintln!("{message}");
            false
        }
    }
}

impl Backend {
    /// Opens a fresh, empty store of this backend.
    pub async fn open(self) -> BoxStore {
        let url = self.fresh_url().await;
        aiki::store::connect(&url).await.expect("the store opens")
    }

    /// The URL of a fresh, empty store of this backend (for worker processes to share). For
    /// PostgreSQL it names the scenario's schema twice: `aiki_schema` for the store, the
    /// search path for a test's own connections.
    pub async fn fresh_url(self) -> String {
        match self {
            Backend::Memory => "memory:".to_owned(),
            Backend::Sqlite => {
                let path =
                    std::env::temp_dir().join(format!("aiki-e2e-{}.db", uuid::Uuid::new_v4()));
                format!("sqlite://{}", path.display())
            }
            Backend::Postgres => {
                let url = postgres_url();
                let schema = fresh_schema(&url).await;
                let separator = if url.contains('?') { '&' } else { '?' };
                format!("{url}{separator}options[search_path]={schema}&aiki_schema={schema}")
            }
        }
    }
}

/// The URL with claims timed by the caller's clock on PostgreSQL (by default they are timed
/// by the server's): a test whose manual clock moves time decides staleness by it.
pub fn caller_claim_clock(url: &str) -> String {
    if url.starts_with("postgres") {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}aiki_claim_clock=caller")
    } else {
        url.to_owned()
    }
}

/// Creates an empty schema `aiki_e2e_<unix seconds>_<random>` for one scenario, after dropping
/// the ones earlier runs left behind more than ten minutes ago (no scenario runs that long).
async fn fresh_schema(url: &str) -> String {
    use sqlx::{Connection, Row};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs();
    let mut admin = sqlx::PgConnection::connect(url)
        .await
        .expect("PostgreSQL answers");
    let old: Vec<String> = sqlx::query(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'aiki_e2e_%'",
    )
    .fetch_all(&mut admin)
    .await
    .expect("list schemas")
    .into_iter()
    .map(|row| row.get::<String, _>(0))
    .filter(|name| {
        name.split('_')
            .nth(2)
            .and_then(|secs| secs.parse::<u64>().ok())
            .is_none_or(|secs| secs + 600 < now)
    })
    .collect();
    for name in old {
        let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
            .execute(&mut admin)
            .await;
    }
    let schema = format!("aiki_e2e_{now}_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin)
        .await
        .expect("create the test schema");
    let _ = admin.close().await;
    schema
}

/// Stamps out `#[tokio::test]`s running each scenario on every backend, in modules named
/// `memory`, `sqlite` and `postgres`.
#[macro_export]
macro_rules! on_every_backend {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    $crate::bounded(super::$scenario($crate::Backend::Memory)).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    $crate::bounded(super::$scenario($crate::Backend::Sqlite)).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if $crate::postgres_available().await {
                        $crate::bounded(super::$scenario($crate::Backend::Postgres)).await
                    }
                }
            )*
        }
    };
}

/// Like [`on_every_backend!`], for scenarios that need a SQL database (they edit its rows):
/// modules `sqlite_rows` and `postgres_rows`, so a file can use both macros.
#[macro_export]
macro_rules! on_sql_backends {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite_rows {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    $crate::bounded(super::$scenario($crate::Backend::Sqlite)).await
                }
            )*
        }
        mod postgres_rows {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if $crate::postgres_available().await {
                        $crate::bounded(super::$scenario($crate::Backend::Postgres)).await
                    }
                }
            )*
        }
    };
}

/// Logs this process's `tracing` events at `AIKI_LOG`'s level (`warn`, say) on stderr, for the
/// test processes (workers, servers) whose logs a test reads; nothing without it.
pub fn log_from_env() {
    let Ok(level) = std::env::var("AIKI_LOG") else {
        return;
    };
    let level: tracing::Level = level.parse().expect("AIKI_LOG names a level");
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
}

/// How long one scenario may take before it fails (real time): a hang fails the test instead
/// of stalling the whole suite.
pub const SCENARIO_LIMIT: Duration = Duration::from_secs(180);

/// Runs a scenario, failing it if it takes longer than [`SCENARIO_LIMIT`].
pub async fn bounded(scenario: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(SCENARIO_LIMIT, scenario)
        .await
        .is_err()
    {
        panic!("the scenario did not finish within {SCENARIO_LIMIT:?}");
    }
}

/// Counts task executions by name, shared with the tasks through the worker's state.
#[derive(Debug, Default, Clone)]
pub struct Executions(Arc<Mutex<HashMap<String, usize>>>);

impl Executions {
    /// Records one execution of `task`.
    pub fn record(&self, task: &str) {
        *self.0.lock().unwrap().entry(task.to_owned()).or_default() += 1;
    }

    /// How often `task` ran.
    pub fn count(&self, task: &str) -> usize {
        self.0.lock().unwrap().get(task).copied().unwrap_or(0)
    }
}

/// One scenario's world: a store, a manual clock, a client, the current worker.
#[derive(Debug)]
pub struct Harness {
    /// The store.
    pub store: BoxStore,
    /// The clock the workers and the client read.
    pub clock: ManualClock,
    /// A client on the store.
    pub client: Client,
    /// Task executions.
    pub executions: Executions,
    worker: Option<WorkerHandle>,
}

/// How long a test waits for a status before it fails (real time).
pub const PATIENCE: Duration = Duration::from_secs(20);

impl Harness {
    /// A fresh store of `backend` and no worker yet.
    pub async fn new(backend: Backend) -> Harness {
        Harness::on_url(&backend.fresh_url().await).await
    }

    /// The store a URL names (from [`Backend::fresh_url`], for a test that also reaches the
    /// database directly) and no worker yet.
    pub async fn on_url(url: &str) -> Harness {
        let store = aiki::store::connect(&caller_claim_clock(url))
            .await
            .expect("the store opens");
        let clock = ManualClock::starting_now();
        let client = Client::new(store.clone())
            .with_clock(clock.clone())
            .with_poll_interval(Duration::from_millis(5));
        Harness {
            store,
            clock,
            client,
            executions: Executions::default(),
            worker: None,
        }
    }

    /// Sets the store's claim idle timeout (its runtime configuration, which every worker and
    /// the daemons follow), as an operator would.
    pub async fn set_idle_timeout(&self, idle: Duration) {
        self.client
            .set_config(
                aiki::ConfigKey::ClaimIdleTimeout,
                i64::try_from(idle.as_millis()).expect("an idle timeout in ms"),
            )
            .await
            .expect("configure the claim idle timeout");
    }

    /// A worker builder on this harness's store, clock and execution counter, polling fast.
    pub fn worker_builder(&self) -> WorkerBuilder {
        Worker::builder(self.store.clone())
            .clock(self.clock.clone())
            .state(self.executions.clone())
            .poll_interval(Duration::from_millis(5))
    }

    /// Stops the current worker (if any) and starts one built by `configure`: deploying new
    /// code while runs are in flight.
    pub async fn deploy(&mut self, configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder) {
        if let Some(worker) = self.worker.take() {
            worker.shutdown().await;
        }
        let worker = configure(self.worker_builder())
            .build()
            .expect("worker config");
        self.worker = Some(worker.start());
    }

    /// Stops the current worker at once, as a crash would: runs it held stay `running`.
    /// Returns once none of its executions runs any more (a claim refresher still running
    /// after the "crash" would keep the claim fresh through the next `advance`).
    pub async fn crash_worker(&mut self) {
        if let Some(worker) = self.worker.take() {
            worker.abort().await;
        }
    }

    /// Waits (real time, bounded) until the run reaches `status`.
    pub async fn reach<W: Workflow>(&self, handle: &RunHandle<W>, status: RunStatus) -> RunRecord {
        match handle.wait_for_status_timeout(status, PATIENCE).await {
            Ok(run) => run,
            Err(error) => {
                let record = handle.record().await;
                panic!(
                    "run {} did not reach `{status}`: {error}; it stands at {record:?}",
                    handle.id()
                )
            }
        }
    }

    /// Waits (real time, bounded) until the run is in `status` at a revision later than
    /// `after`'s: the next time it gets there, not the last.
    pub async fn reach_next<W: Workflow>(
        &self,
        handle: &RunHandle<W>,
        status: RunStatus,
        after: &RunRecord,
    ) -> RunRecord {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let run = handle.record().await.expect("run record");
            if run.status == status && run.revision > after.revision {
                return run;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {} did not reach `{status}` again after revision {} (now `{}` at {})",
                handle.id(),
                after.revision,
                run.status,
                run.revision
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Advances the manual clock.
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }

    /// Lets claim recovery release `run`, held by an executor that stopped refreshing its
    /// claim (crashed, frozen), whose claims expire after `idle` and were refreshed every
    /// `refresh`: moves the clock past the idle timeout, waits (real time, bounded) until a
    /// sweep has marked the claim stale, then moves it past the confirmation window.
    pub async fn recover_claim(&self, run: aiki::RunId, idle: Duration, refresh: Duration) {
        let past_idle = idle + Duration::from_secs(60);
        let target = aiki::Clock::now(&self.clock)
            .saturating_add(i64::try_from(past_idle.as_millis()).unwrap_or(i64::MAX));
        self.advance(past_idle);
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let record = self.store.get_run(run).await.expect("run record");
            if record.status != RunStatus::Running || record.claim_stale_since.is_some() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "claim recovery never marked run {run}'s claim stale (the clock stands at {}, \
                 moved to {target}): {record:?}",
                aiki::Clock::now(&self.clock)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let timing = aiki::store::ClaimTiming::new(ms(idle), ms(refresh));
        let confirm = u64::try_from(timing.confirm_ms).unwrap_or(u64::MAX);
        self.advance(Duration::from_millis(confirm) + Duration::from_secs(1));
    }
}

/// A login role that may only read the schema of a PostgreSQL store URL (from
/// [`Backend::fresh_url`]); returns the URL that logs in with it, and the role (to
/// [`drop_role`] afterwards).
pub async fn read_only_role(url: &str) -> (String, String) {
    use sqlx::Connection;
    let schema = url
        .split("aiki_schema=")
        .nth(1)
        .expect("a test schema")
        .split('&')
        .next()
        .expect("a schema name")
        .to_owned();
    let mut admin = sqlx::PgConnection::connect(&postgres_url())
        .await
        .expect("PostgreSQL answers");
    let role = format!("{schema}_ro");
    for statement in [
        format!("CREATE ROLE {role} LOGIN"),
        format!("GRANT USAGE ON SCHEMA {schema} TO {role}"),
        format!("GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}"),
    ] {
        sqlx::query(&statement)
            .execute(&mut admin)
            .await
            .expect("the role is made");
    }
    (url.replacen("postgres@", &format!("{role}@"), 1), role)
}

/// Drops a role [`read_only_role`] made.
pub async fn drop_role(role: &str) {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&postgres_url())
        .await
        .expect("PostgreSQL answers");
    for statement in [format!("DROP OWNED BY {role}"), format!("DROP ROLE {role}")] {
        sqlx::query(&statement)
            .execute(&mut admin)
            .await
            .expect("the role is dropped");
    }
}
