//! Crash tests with real worker processes (`aiki_test_worker`): `kill -9` mid-task, a worker
//! frozen with SIGSTOP past its claim timeout, four workers sharing a load, and PostgreSQL
//! unreachable for a while under that load (every connection dropped by a fault proxy). Worker processes refresh claims every 200 ms and give them up
//! after 1 s. Each task execution appends a line to a side-effects file, so executions are
//! counted across processes.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use aiki::{Client, RunStatus};
use aiki_tests::Backend;
use aiki_tests::crash::{FiveSteps, Long, LongOnce};
use aiki_tests::processes::{WorkerProcesses, history, wait_for};
use aiki_tests::proxy::{FaultProxy, postgres_server};

/// Process tests share the machine's two cores and, for one of them, the PostgreSQL server:
/// run them one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PATIENCE: Duration = Duration::from_secs(120);

/// One test's world: a store URL shared with the worker processes and a side-effects file.
struct World {
    url: String,
    client: Client,
    effects: PathBuf,
    workers: WorkerProcesses,
    /// The aiki server the workers reach, if they are remote.
    server: Option<Server>,
}

/// An aiki server the remote workers of a world reach, with the daemons beside it.
struct Server {
    url: String,
    key: String,
    runs: Serving,
}

enum Serving {
    /// In the test process; the daemons run while their handle is held.
    InProcess {
        serving: tokio::task::JoinHandle<()>,
        _daemons: aiki::WorkerHandle,
    },
    /// An `aiki_test_server` process.
    Process(std::process::Child),
}

/// Starts an `aiki_test_server` on the store at `url`, listening on `listen`; its URL.
fn server_process(url: &str, listen: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_aiki_test_server"))
        .env("AIKI_SERVER_STORE_URL", url)
        .env("AIKI_SERVER_LISTEN", listen)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server process starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut line)
        .expect("the server says where it listens");
    let address = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("not the listening line: {line:?}"))
        .to_owned();
    (child, address)
}

impl World {
    async fn new(backend: Backend) -> World {
        World::on_url(backend.fresh_url().await).await
    }

    /// A world whose client and workers reach the store at `url`.
    async fn on_url(url: String) -> World {
        let store = aiki::store::connect(&url).await.expect("the store opens");
        let effects =
            std::env::temp_dir().join(format!("aiki-effects-{}.log", uuid::Uuid::new_v4()));
        World {
            url,
            client: Client::new(store).with_poll_interval(Duration::from_millis(20)),
            effects,
            workers: WorkerProcesses::default(),
            server: None,
        }
    }

    /// A key for remote workers, kept in the world's store.
    async fn worker_key(&self) -> String {
        let store = aiki::store::connect(&self.url)
            .await
            .expect("the store opens");
        let key = aiki_server::keys::generate(
            "remote workers",
            vec![aiki::store::Scope::Executor, aiki::store::Scope::Operator],
            0,
        );
        store.create_key(key.record.clone()).await.unwrap();
        key.token
    }

    /// A world whose workers are remote: they reach the store through an `aiki_test_server`
    /// process, with an executor key.
    async fn through_a_server_process(backend: Backend) -> World {
        let mut world = World::new(backend).await;
        let key = world.worker_key().await;
        let (child, url) = server_process(&world.url, "127.0.0.1:0");
        world.server = Some(Server {
            url,
            key,
            runs: Serving::Process(child),
        });
        world
    }

    /// Kills the server process with SIGKILL and starts another on the same address.
    fn restart_server(&mut self) {
        let store = self.url.clone();
        let server = self.server.as_mut().expect("a server");
        let Serving::Process(child) = &mut server.runs else {
            panic!("the server runs in this process");
        };
        child.kill().expect("kill -9");
        child.wait().expect("reaped");
        let listen = server.url.trim_start_matches("http://").to_owned();
        let (child, _) = server_process(&store, &listen);
        server.runs = Serving::Process(child);
    }

    /// A world whose workers are remote: they reach the store through an aiki server in this
    /// process (its daemons beside it), with an executor key.
    async fn through_a_server(backend: Backend) -> World {
        let mut world = World::new(backend).await;
        let store = aiki::store::connect(&world.url)
            .await
            .expect("the store opens");
        let key = world.worker_key().await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let serving = aiki_server::serve(
            listener,
            store.clone(),
            aiki_server::ServerConfig::default(),
            std::future::pending(),
        );
        let task = tokio::spawn(async move {
            serving.await.expect("the server serves");
        });
        let daemons = aiki::Worker::builder(store)
            .worker_id("server-daemons")
            .build()
            .unwrap()
            .start();
        world.server = Some(Server {
            url: format!("http://{address}"),
            key,
            runs: Serving::InProcess {
                serving: task,
                _daemons: daemons,
            },
        });
        world
    }

    /// Starts a worker process; its long steps take `long_task`.
    fn spawn(&mut self, id: &str, long_task: Duration) -> usize {
        let mut command = Command::new(env!("CARGO_BIN_EXE_aiki_test_worker"));
        let url = match &self.server {
            Some(server) => {
                command
                    .env("AIKI_API_KEY", &server.key)
                    // Claims outlive a server's restart, and a refresh over HTTP on a loaded
                    // machine may take longer than the 200 ms a 200 ms interval allows it (the
                    // refresh is cut at a quarter of the interval, 200 ms at least).
                    .env("AIKI_CLAIM_IDLE_MS", "5000")
                    .env("AIKI_CLAIM_REFRESH_MS", "2000");
                &server.url
            }
            None => &self.url,
        };
        command
            .env("AIKI_WORKER_STORE_URL", url)
            .env("AIKI_SIDE_EFFECTS", &self.effects)
            .env("AIKI_WORKER_ID", id)
            .env("AIKI_LONG_TASK_MS", long_task.as_millis().to_string());
        self.workers.spawn(command)
    }

    fn signal(&self, worker: usize, signal: &str) {
        self.workers.signal(worker, signal);
    }

    fn kill_9(&mut self, worker: usize) {
        self.workers.kill_9(worker);
    }

    /// The side-effect lines, counted.
    fn effects(&self) -> HashMap<String, usize> {
        let text = std::fs::read_to_string(&self.effects).unwrap_or_default();
        let mut counts = HashMap::new();
        for line in text.lines() {
            *counts.entry(line.to_owned()).or_default() += 1;
        }
        counts
    }

    fn count_prefix(&self, prefix: &str) -> usize {
        self.effects()
            .iter()
            .filter(|(line, _)| line.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }

    async fn wait_for_effect(&self, prefix: &str) {
        let deadline = Instant::now() + PATIENCE;
        while self.count_prefix(prefix) == 0 {
            assert!(
                Instant::now() < deadline,
                "no side effect `{prefix}` appeared"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The workers first (they append to the file), then their side effects.
        std::mem::take(&mut self.workers);
        let _ = std::fs::remove_file(&self.effects);
        match self.server.as_mut().map(|server| &mut server.runs) {
            Some(Serving::InProcess { serving, .. }) => serving.abort(),
            Some(Serving::Process(child)) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            None => {}
        }
    }
}

const LONG: Duration = Duration::from_secs(60);
const SHORT: Duration = Duration::from_millis(200);

async fn kill_9_mid_task_resumes_on_another_worker(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    let a = world.spawn("worker-a", LONG);
    let run = world.client.start::<Long>("k".into()).await.unwrap();
    world.wait_for_effect("long-start k attempt 1").await;
    world.kill_9(a);
    let killed = Instant::now();
    world.spawn("worker-b", SHORT);
    // This process is not a worker: it sees the completion through the store.
    let done = wait_for(&run, RunStatus::Completed).await;
    let recovery = killed.elapsed();
    println!(
        "[{backend:?}] kill -9 -> completed on another worker in {recovery:?} (idle timeout 1 s)"
    );
    assert_eq!(
        done.output,
        Some(serde_json::json!("k by worker-b in attempt 2"))
    );
    assert_eq!(
        world.count_prefix("step k/before"),
        1,
        "a finished task never runs again"
    );
    assert_eq!(world.count_prefix("long-start k attempt 1"), 1);
    assert_eq!(
        world.count_prefix("long-start k attempt 2"),
        1,
        "the interrupted task ran again"
    );
    assert_eq!(world.count_prefix("step k/after"), 1);
}

async fn kill_9_mid_task_without_retries_fails_as_interrupted(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    let a = world.spawn("worker-a", LONG);
    let run = world.client.start::<LongOnce>("k".into()).await.unwrap();
    world.wait_for_effect("long-start k").await;
    world.kill_9(a);
    world.spawn("worker-b", SHORT);
    let failed = wait_for(&run, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().kind, "interrupted");
    assert_eq!(
        world.count_prefix("long-start k"),
        1,
        "at most once under `never`"
    );
    assert_eq!(world.count_prefix("step k/after"), 0);
}

async fn frozen_worker_is_fenced_when_it_wakes(backend: Backend) {
    let _serial = SERIAL.lock().await;
    frozen_worker_is_fenced(World::new(backend).await).await;
}

/// The same with remote workers: over HTTP, through a server.
async fn frozen_remote_worker_is_fenced_when_it_wakes(backend: Backend) {
    let _serial = SERIAL.lock().await;
    frozen_worker_is_fenced(World::through_a_server(backend).await).await;
}

async fn frozen_worker_is_fenced(mut world: World) {
    let a = world.spawn("worker-a", Duration::from_secs(3));
    let run = world.client.start::<Long>("z".into()).await.unwrap();
    world.wait_for_effect("long-start z attempt 1").await;
    world.signal(a, "STOP");
    world.spawn("worker-b", SHORT);
    let done = wait_for(&run, RunStatus::Completed).await;
    assert_eq!(
        done.output,
        Some(serde_json::json!("z by worker-b in attempt 2"))
    );
    let store = world.client.store().clone();
    let before = history(&store, run.id()).await;
    // Worker A wakes with its stale attempt: its next write (the attempt's result, or the
    // claim refresh, whichever comes first) carries its old revision and is refused.
    world.signal(a, "CONT");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = history(&store, run.id()).await;
    assert_eq!(
        before, after,
        "nothing worker A wrote after waking is in the history"
    );
    assert!(
        world.workers.is_running(a),
        "worker A stopped that run cleanly and is still serving"
    );
    assert_eq!(world.count_prefix("step z/after"), 1);
}

/// Starts `runs` five-step runs and waits for all of them; returns the elapsed time.
async fn five_step_load(
    world: &World,
    runs: usize,
    during: impl std::future::Future<Output = ()>,
) -> Duration {
    let started = Instant::now();
    let mut handles = Vec::with_capacity(runs);
    for i in 0..runs {
        handles.push(
            world
                .client
                .start::<FiveSteps>(format!("r{i}"))
                .await
                .unwrap(),
        );
    }
    during.await;
    for handle in &handles {
        let done = wait_for(handle, RunStatus::Completed).await;
        assert_eq!(done.output, Some(serde_json::json!(5)));
    }
    started.elapsed()
}

async fn four_workers_share_two_thousand_runs_exactly_once(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::new(backend).await;
    for i in 0..4 {
        world.spawn(&format!("worker-{i}"), SHORT);
    }
    let runs = 2000;
    let elapsed = five_step_load(&world, runs, async {}).await;
    let effects = world.effects();
    let executions: usize = effects.values().sum();
    let duplicates: usize = effects.values().map(|n| n - 1).sum();
    println!(
        "[{backend:?}] 4 worker processes: {runs} runs x 5 tasks in {elapsed:?} \
         ({:.0} task steps/s); {executions} executions, {duplicates} duplicates",
        (runs * 5) as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(effects.len(), runs * 5, "every task ran");
    assert_eq!(duplicates, 0, "no task ran twice");
}

/// Four remote worker processes through an aiki server process that is killed with SIGKILL
/// and started again on the same address under the load: every run completes and no recorded
/// task runs again. 2,000 runs × 5 tasks; `AIKI_SERVER_SOAK_RUNS` sets how many.
async fn remote_workers_ride_out_a_killed_server_process(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let mut world = World::through_a_server_process(backend).await;
    for i in 0..4 {
        world.spawn(&format!("remote-{i}"), SHORT);
    }
    let runs: usize = std::env::var("AIKI_SERVER_SOAK_RUNS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(2000);
    let started = Instant::now();
    let mut handles = Vec::with_capacity(runs);
    for i in 0..runs {
        handles.push(
            world
                .client
                .start::<FiveSteps>(format!("r{i}"))
                .await
                .unwrap(),
        );
    }
    // Under load: killed once the first tenth of the runs is done.
    for handle in &handles[..runs / 10] {
        wait_for(handle, RunStatus::Completed).await;
    }
    let completed = world
        .client
        .store()
        .run_counts()
        .await
        .unwrap()
        .iter()
        .flat_map(|counts| counts.by_status.iter())
        .filter(|(status, _)| *status == RunStatus::Completed)
        .map(|(_, count)| count)
        .sum::<u64>();
    world.restart_server();
    println!("[{backend:?}] {completed} of {runs} runs completed when the server was killed");
    println!("[{backend:?}] the server was killed with SIGKILL under load and started again");
    for handle in &handles {
        let done = wait_for(handle, RunStatus::Completed).await;
        assert_eq!(done.output, Some(serde_json::json!(5)));
    }
    let elapsed = started.elapsed();
    let effects = world.effects();
    let executions: usize = effects.values().sum();
    let duplicates: usize = effects.values().map(|n| n - 1).sum();
    println!(
        "[{backend:?}] 4 remote worker processes through a killed server: {runs} runs x 5 tasks \
         in {elapsed:?}; {executions} executions, {duplicates} run again"
    );
    let mut again: Vec<_> = effects.iter().filter(|(_, n)| **n > 1).collect();
    again.sort();
    assert_eq!(effects.len(), runs * 5, "every task ran");
    assert_eq!(
        duplicates,
        0,
        "no recorded task ran again: {:?}",
        &again[..again.len().min(10)]
    );
}

/// How long the database stays unreachable in the outage tests: about a restart's downtime.
const OUTAGE: Duration = Duration::from_secs(2);

async fn workers_ride_out_a_postgres_outage(backend: Backend) {
    assert_eq!(backend, Backend::Postgres);
    let _serial = SERIAL.lock().await;
    // A fault proxy in front of the shared server stands in for a restart: it drops every
    // connection and refuses new ones for a while. The server itself is never stopped.
    let proxy = FaultProxy::start(postgres_server())
        .await
        .expect("the fault proxy starts");
    let mut world = World::on_url(proxy.url_through(&backend.fresh_url().await)).await;
    for i in 0..4 {
        world.spawn(&format!("worker-{i}"), SHORT);
    }
    let runs = 400;
    let outage = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.cut();
        println!("[Postgres] every connection dropped under load, the server unreachable");
        tokio::time::sleep(OUTAGE).await;
        proxy.restore();
    };
    let elapsed = five_step_load(&world, runs, outage).await;
    let effects = world.effects();
    let duplicates: usize = effects.values().map(|n| n - 1).sum();
    println!(
        "[Postgres] {runs} runs completed across a {OUTAGE:?} outage in {elapsed:?}; \
         {duplicates} duplicate task executions (retried steps whose result was not yet recorded)"
    );
    assert_eq!(effects.len(), runs * 5, "every task ran; nothing was lost");
}

macro_rules! on_sql_backends {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    aiki_tests::bounded(super::$scenario(aiki_tests::Backend::Sqlite)).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    if aiki_tests::postgres_available().await {
                        aiki_tests::bounded(super::$scenario(aiki_tests::Backend::Postgres)).await
                    }
                }
            )*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn workers_ride_out_a_postgres_outage() {
                if aiki_tests::postgres_available().await {
                    super::workers_ride_out_a_postgres_outage(aiki_tests::Backend::Postgres).await
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn four_workers_share_two_thousand_runs_exactly_once() {
                if aiki_tests::postgres_available().await {
                    super::four_workers_share_two_thousand_runs_exactly_once(aiki_tests::Backend::Postgres).await
                }
            }
        }
    };
}

on_sql_backends!(
    kill_9_mid_task_resumes_on_another_worker,
    kill_9_mid_task_without_retries_fails_as_interrupted,
    frozen_worker_is_fenced_when_it_wakes,
    frozen_remote_worker_is_fenced_when_it_wakes,
    remote_workers_ride_out_a_killed_server_process,
);
