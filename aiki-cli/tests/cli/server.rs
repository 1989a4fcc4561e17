//! `aiki server` as a process: the CLI reads and acts through it as it does on the database,
//! and remote workers (executor role over HTTP, no daemons of their own) ride out the server
//! killed with SIGKILL and started again, their sleeps woken by the server's daemons.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{Client, Run, RunStatus, TaskError, Worker, WorkerStore, WorkflowError};
use aiki_store::http::HttpStore;
use aiki_tests::Backend;

use crate::support::{aiki, aiki_with, fixture, ids};

/// `aiki keys create` on the store at `url`: the key's token.
pub(crate) fn create_key(url: &str, scopes: &str) -> String {
    let created = aiki(
        url,
        &[
            "keys", "create", "--name", "test", "--scope", scopes, "-o", "json",
        ],
    );
    assert_eq!(created.code, 0, "{}", created.stderr);
    created.json()["key"].as_str().expect("the key").to_owned()
}

/// An `aiki server` process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) address: String,
}

impl Server {
    /// Starts `aiki server` on the store at `url`, listening on `listen`, and waits for the
    /// line that says where.
    pub(crate) fn start(url: &str, listen: &str) -> Server {
        Server::start_with(url, listen, &[])
    }

    /// [`start`](Server::start) with more flags of `aiki server`.
    pub(crate) fn start_with(url: &str, listen: &str, flags: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_aiki"))
            .args(["--url", url, "server", "--listen", listen])
            .args(flags)
            .env_remove("AIKI_URL")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the binary runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("the server says where it listens");
        let address = line
            .trim()
            .strip_prefix("aiki server listening on ")
            .unwrap_or_else(|| panic!("not the listening line: {line:?}"))
            .to_owned();
        Server { child, address }
    }

    /// SIGKILL, and the process reaped.
    fn kill(mut self) -> String {
        self.child.kill().expect("kill -9");
        self.child.wait().expect("reaped");
        self.address.clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn the_cli_reads_and_acts_through_a_server(backend: Backend) {
    let f = fixture(backend).await;
    // No key in the store: the server will not start without being told to serve everyone.
    let refused = aiki(&f.url, &["server", "--listen", "127.0.0.1:0"]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("aiki keys create"),
        "{}",
        refused.stderr
    );
    let key = create_key(&f.url, "operator");
    let server = Server::start(&f.url, "127.0.0.1:0");
    let with_key = [("AIKI_API_KEY", key.as_str())];
    let direct = aiki(&f.url, &["runs", "list", "-o", "json"]).json();
    let remote = aiki_with(&server.address, &["runs", "list", "-o", "json"], &with_key).json();
    assert_eq!(
        ids(&remote),
        ids(&direct),
        "the same runs through the server"
    );
    // Push endpoints are read on the store itself: through a server, a version without a live
    // worker is not said to be unserved without saying so.
    let workflows = aiki_with(&server.address, &["workflows", "-o", "table"], &with_key);
    assert!(
        workflows
            .stdout
            .contains("no live worker (push endpoints are shown on the store itself"),
        "{}{}",
        workflows.stdout,
        workflows.stderr
    );
    let keyless = aiki(&server.address, &["runs", "list", "-o", "json"]);
    assert_eq!(keyless.code, 1, "no key, no runs: {}", keyless.stdout);
    assert!(keyless.stderr.contains("API key"), "{}", keyless.stderr);
    let waiting = f.waiting.to_string();
    let shown = aiki_with(
        &server.address,
        &["runs", "show", &waiting, "-o", "json"],
        &with_key,
    );
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let cancelled = aiki_with(&server.address, &["runs", "cancel", &waiting], &with_key);
    assert_eq!(cancelled.code, 0, "{}", cancelled.stderr);
    let store = aiki::store::connect(&f.url).await.unwrap();
    let run = store.get_run(f.waiting).await.unwrap();
    assert_eq!(
        run.status,
        RunStatus::Cancelled,
        "cancelled through the server"
    );
    let timeline = store.timeline(f.waiting).await.unwrap();
    let key_id = key.split('_').nth(1).unwrap();
    let actor = timeline.last().and_then(|change| change.actor.clone());
    assert!(
        actor
            .as_deref()
            .is_some_and(|actor| actor.starts_with(&format!("key:{key_id}"))),
        "the key is who acted: {actor:?}"
    );
    let unknown = aiki_with(
        &server.address,
        &["runs", "show", &aiki::RunId::new().to_string()],
        &with_key,
    );
    assert_ne!(
        unknown.code, 0,
        "an unknown run is an error through the server too"
    );
}

async fn keys_are_created_listed_revoked_and_bad_input_refused(backend: Backend) {
    let url = backend.fresh_url().await;
    assert_eq!(aiki(&url, &["migrate"]).code, 0);
    let token = create_key(&url, "executor,read");
    let listed = aiki(&url, &["keys", "list", "-o", "json"]).json();
    let id = token.split('_').nth(1).unwrap();
    assert_eq!(listed[0]["id"], id, "{listed}");
    assert_eq!(listed[0]["scopes"], serde_json::json!(["executor", "read"]));
    let secret = token.rsplit('_').next().unwrap();
    assert!(!listed.to_string().contains(secret), "no secret is listed");
    let revoked = aiki(&url, &["keys", "revoke", id, "-o", "json"]).json();
    assert!(revoked["revoked_at"].is_i64(), "{revoked}");
    let unknown = aiki(&url, &["keys", "revoke", "0123456789ab"]);
    assert_eq!(unknown.code, 1, "{}", unknown.stdout);
    assert!(unknown.stderr.contains("not found"), "{}", unknown.stderr);
    let bad_scope = aiki(&url, &["keys", "create", "--name", "x", "--scope", "admin"]);
    assert_eq!(bad_scope.code, 2, "{}", bad_scope.stderr);
    assert!(
        bad_scope.stderr.contains("executor, operator and read"),
        "{}",
        bad_scope.stderr
    );
    let no_scope = aiki(&url, &["keys", "create", "--name", "x"]);
    assert_eq!(no_scope.code, 2, "{}", no_scope.stderr);
    for bad in [
        ["server", "--rate-limit", "0"],
        ["server", "--rate-limit", "many"],
        ["server", "--listen", "nowhere"],
        ["server", "--redis-url", "http://127.0.0.1:6379"],
        ["server", "--redis-url", "redis://"],
        ["server", "--max-connections", "0"],
        ["server", "--max-connections", "lots"],
        ["server", "--header-read-timeout", "0"],
        ["server", "--header-read-timeout", "-1"],
    ] {
        let refused = aiki(&url, &bad);
        assert_eq!(refused.code, 2, "{bad:?}: {}", refused.stderr);
    }
    let through = aiki("http://127.0.0.1:9", &["keys", "list"]);
    assert_eq!(through.code, 1, "{}", through.stderr);
    assert!(
        through.stderr.contains("store itself"),
        "{}",
        through.stderr
    );
    let listed = aiki(&url, &["keys", "list", "-o", "json"]).json();
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(1),
        "nothing else was created"
    );
}
/// The input of every step executed, over both backends' tests (each its own range).
static STEPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

#[aiki::task(name = "remote-step")]
async fn remote_step(n: u32) -> Result<u32, TaskError> {
    STEPS.lock().unwrap().push(n);
    Ok(n + 1)
}

#[aiki::workflow(name = "remote-nap", version = "1")]
async fn remote_nap(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    let n = RemoteStep.start(run, n).await?;
    run.sleep("nap", Duration::from_millis(300)).await?;
    RemoteStep.start(run, n + 100).await
}

async fn remote_workers_ride_out_a_killed_server(backend: Backend) {
    const RUNS: u32 = 40;
    // Inputs of this backend's runs: its own range, as the step log is shared.
    let first = if backend == Backend::Sqlite {
        0
    } else {
        10_000
    };
    let url = backend.fresh_url().await;
    assert_eq!(aiki(&url, &["migrate"]).code, 0);
    let key = create_key(&url, "executor,operator");
    let server = Server::start(&url, "127.0.0.1:0");
    let http = Arc::new(
        HttpStore::new(&server.address)
            .unwrap()
            .with_key(key)
            .long_poll(Duration::from_secs(2)),
    );
    let client = Client::new(http.clone()).with_poll_interval(Duration::from_millis(20));
    // A claim the server wrote but whose answer the kill lost is no worker's: claim recovery
    // releases it after the idle timeout (requests carry no operation id yet that would let
    // the worker's retry get its claim back). A short timeout keeps the test short.
    client
        .set_config(aiki::ConfigKey::ClaimIdleTimeout, 4_000)
        .await
        .expect("the configuration is set through the server");
    let workers: Vec<_> = (0..2)
        .map(|_| {
            Worker::builder(WorkerStore::executor(http.clone()))
                .register(RemoteNap)
                .poll_interval(Duration::from_millis(10))
                .claim_refresh_interval(Duration::from_millis(500))
                .build()
                .unwrap()
                .start()
        })
        .collect();
    let mut runs = Vec::new();
    for n in first..first + RUNS {
        runs.push(client.start::<RemoteNap>(n).await.unwrap());
    }
    // The first run is asleep or done when the server dies.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = runs[0].record().await.unwrap().status;
        if matches!(status, RunStatus::Sleeping | RunStatus::Completed) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the first run sleeps"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let address = server.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listen = address.trim_start_matches("http://");
    let _server = Server::start(&url, listen);
    for (n, run) in (first..).zip(&runs) {
        let Ok(output) = tokio::time::timeout(Duration::from_secs(60), run.result()).await else {
            let direct = aiki::store::connect(&url).await.unwrap();
            let record = direct.get_run(run.id()).await.unwrap();
            let timeline = direct.timeline(run.id()).await.unwrap();
            panic!("run {n} has not completed within a minute: {record:#?}\n{timeline:#?}");
        };
        let output = output.unwrap();
        assert_eq!(output, n + 102);
    }
    let steps = STEPS
        .lock()
        .unwrap()
        .iter()
        .filter(|n| (first..first + 200 + RUNS).contains(n))
        .count();
    eprintln!(
        "{backend:?}: remote workers, {RUNS} runs x 2 steps through a server killed with \
         SIGKILL and restarted: {steps} step executions ({} again)",
        steps.saturating_sub(2 * RUNS as usize)
    );
    for worker in workers {
        worker.shutdown().await;
    }
}

aiki_tests::on_sql_backends!(
    the_cli_reads_and_acts_through_a_server,
    keys_are_created_listed_revoked_and_bad_input_refused,
    remote_workers_ride_out_a_killed_server,
);

/// `aiki server --header-read-timeout 1` closes a connection that sends nothing within about a
/// second, and `--max-connections` is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_connection_limits_are_its_flags() {
    use std::io::Read;
    let url = Backend::Sqlite.fresh_url().await;
    let server = Server::start_with(
        &url,
        "127.0.0.1:0",
        &[
            "--insecure-no-auth",
            "--header-read-timeout",
            "1",
            "--max-connections",
            "64",
        ],
    );
    let address = server.address.trim_start_matches("http://").to_owned();
    let closed = tokio::task::spawn_blocking(move || {
        let mut silent = std::net::TcpStream::connect(&address).unwrap();
        silent
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut buffer = [0u8; 1024];
        // The server closes it (an end of stream, or a reset), answering nothing or a 408.
        loop {
            match silent.read(&mut buffer) {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => continue,
            }
        }
    })
    .await
    .unwrap();
    assert!(
        closed < Duration::from_secs(5),
        "a silent connection stayed open {closed:?}"
    );
    drop(server);
}

/// Two server processes on one PostgreSQL database, a worker on each, runs started through
/// the first: every run completes, both workers take runs (a run queued through one server
/// wakes the claims waiting on the other), and one server's daemons wake the sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_database_share_the_work() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    aiki_tests::bounded(async {
        const RUNS: u32 = 40;
        let first = 20_000;
        let url = Backend::Postgres.fresh_url().await;
        assert_eq!(aiki(&url, &["migrate"]).code, 0);
        let key = create_key(&url, "executor,operator");
        let servers = [
            Server::start(&url, "127.0.0.1:0"),
            Server::start(&url, "127.0.0.1:0"),
        ];
        let workers: Vec<_> = servers
            .iter()
            .enumerate()
            .map(|(i, server)| {
                let store = HttpStore::new(&server.address)
                    .unwrap()
                    .with_key(&key)
                    .long_poll(Duration::from_secs(2));
                Worker::builder(WorkerStore::executor(Arc::new(store)))
                    .register(RemoteNap)
                    .worker_id(format!("worker-on-server-{i}"))
                    .max_concurrent_runs(4)
                    .build()
                    .unwrap()
                    .start()
            })
            .collect();
        let through_first = HttpStore::new(&servers[0].address).unwrap().with_key(&key);
        let client =
            Client::new(Arc::new(through_first)).with_poll_interval(Duration::from_millis(20));
        let mut runs = Vec::new();
        for n in first..first + RUNS {
            runs.push(client.start::<RemoteNap>(n).await.unwrap());
        }
        for (n, run) in (first..).zip(&runs) {
            let output = tokio::time::timeout(Duration::from_secs(60), run.result())
                .await
                .expect("every run completes within a minute")
                .unwrap();
            assert_eq!(output, n + 102);
        }
        let direct = aiki::store::connect(&url).await.unwrap();
        let mut owners = std::collections::BTreeMap::<String, u32>::new();
        for run in &runs {
            for change in direct.timeline(run.id()).await.unwrap() {
                if change.to == RunStatus::Running {
                    *owners.entry(change.actor.unwrap_or_default()).or_default() += 1;
                }
            }
        }
        eprintln!("two servers, one database: claims by worker {owners:?}");
        assert_eq!(
            owners.keys().collect::<Vec<_>>(),
            ["worker-on-server-0", "worker-on-server-1"],
            "both workers took runs"
        );
        for worker in workers {
            worker.shutdown().await;
        }
    })
    .await;
}
