//! One process test's world: a store, a side-effects file, worker processes and, for remote
//! workers, an aiki server in process or as a process of its own; push endpoint processes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aiki::Client;
use aiki_tests::Backend;
use aiki_tests::processes::WorkerProcesses;

use super::PATIENCE;

/// One test's world: a store URL shared with the worker processes and a side-effects file.
pub struct World {
    pub url: String,
    pub client: Client,
    pub effects: PathBuf,
    pub workers: WorkerProcesses,
    /// The aiki server the workers reach, if they are remote.
    pub server: Option<Server>,
}

/// An aiki server the remote workers of a world reach, with the daemons beside it.
pub struct Server {
    pub url: String,
    pub key: String,
    pub runs: Serving,
}

pub enum Serving {
    /// In the test process; the daemons run while their handle is held.
    InProcess {
        serving: tokio::task::JoinHandle<()>,
        _daemons: aiki::WorkerHandle,
    },
    /// An `aiki_test_server` process.
    Process(std::process::Child),
}

/// Starts an `aiki_test_server` on the store at `url`, listening on `listen`; its URL.
pub fn server_process(url: &str, listen: &str) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aiki_test_server"))
        .env("AIKI_SERVER_STORE_URL", url)
        .env("AIKI_SERVER_LISTEN", listen)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the server process starts");
    let address = listening(&mut child);
    (child, address)
}

/// The URL a server or endpoint process says it listens on (its first line,
/// `listening on http://ADDRESS`).
fn listening(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut line)
        .expect("the process says where it listens");
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("not the listening line: {line:?}"))
        .to_owned()
}

/// An `aiki_test_endpoint` process.
pub struct EndpointProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl EndpointProcess {
    /// Starts one on `world`'s store as `id`, knowing `secrets`, listening on `listen`.
    pub fn start(
        world: &World,
        id: &str,
        secrets: &[&str],
        listen: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_aiki_test_endpoint"))
            .env("AIKI_ENDPOINT_STORE_URL", &world.url)
            .env("AIKI_SIDE_EFFECTS", &world.effects)
            .env("AIKI_WORKER_ID", id)
            .env("AIKI_ENDPOINT_SECRETS", secrets.join(","))
            .env("AIKI_ENDPOINT_LISTEN", listen)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the endpoint process starts");
        let url = listening(&mut child);
        EndpointProcess { child, url }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal}");
    }

    pub fn kill_9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

impl Drop for EndpointProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free address on the loopback (`127.0.0.1:PORT`) for an endpoint process, and its URL.
pub fn free_address() -> (String, String) {
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    (address.to_string(), format!("http://{address}"))
}

impl World {
    pub async fn new(backend: Backend) -> World {
        World::on_url(backend.fresh_url().await).await
    }

    /// A world whose client and workers reach the store at `url`.
    pub async fn on_url(url: String) -> World {
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
    pub async fn worker_key(&self) -> String {
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
    pub async fn through_a_server_process(backend: Backend) -> World {
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
    pub fn restart_server(&mut self) {
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
    pub async fn through_a_server(backend: Backend) -> World {
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
    pub fn spawn(&mut self, id: &str, long_task: Duration) -> usize {
        self.spawn_with(id, long_task, &[])
    }

    /// Starts a worker process with more environment (`AIKI_POLL_MS`, say).
    pub fn spawn_with(&mut self, id: &str, long_task: Duration, env: &[(&str, &str)]) -> usize {
        let command = self.worker_command(id, long_task, env);
        self.workers.spawn(command)
    }

    /// The command of a worker process of this world; `env` is set last, so it may replace
    /// what a remote worker is given by default (its claim timings).
    pub fn worker_command(&self, id: &str, long_task: Duration, env: &[(&str, &str)]) -> Command {
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
        command.envs(env.iter().copied());
        command
    }

    pub fn signal(&self, worker: usize, signal: &str) {
        self.workers.signal(worker, signal);
    }

    pub fn kill_9(&mut self, worker: usize) {
        self.workers.kill_9(worker);
    }

    /// The side-effect lines, counted.
    pub fn effects(&self) -> HashMap<String, usize> {
        let text = std::fs::read_to_string(&self.effects).unwrap_or_default();
        let mut counts = HashMap::new();
        for line in text.lines() {
            *counts.entry(line.to_owned()).or_default() += 1;
        }
        counts
    }

    pub fn count_prefix(&self, prefix: &str) -> usize {
        self.effects()
            .iter()
            .filter(|(line, _)| line.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }

    pub async fn wait_for_effect(&self, prefix: &str) {
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
