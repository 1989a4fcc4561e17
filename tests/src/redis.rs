//! A `redis-server` of a test's own on a free port (never the shared one), for the Redis
//! delivery tests.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` of a test's own, without persistence: a restart empties it.
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    child: Option<Child>,
}

impl PrivateRedis {
    /// Starts one on a free port.
    pub fn start() -> PrivateRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut redis = PrivateRedis { port, child: None };
        redis.restart();
        redis
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts it (again) on its port, and waits until it answers.
    pub fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server starts (install the redis-server package)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills it with SIGKILL (a restart empties it).
    pub fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reaped");
        }
    }

    /// The number of members of the sorted set `key`.
    pub async fn cardinality(&self, key: &str) -> usize {
        let client = redis::Client::open(self.url()).expect("a Redis URL");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("Redis answers");
        redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut connection)
            .await
            .expect("ZCARD")
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill_9();
    }
}
