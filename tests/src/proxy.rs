//! A TCP fault proxy for outage tests: it listens on a free loopback port and forwards every
//! connection to a server, until it is cut: then it drops every connection it carries and
//! closes each new one at once (the server looks down to its clients); or frozen: then it
//! forwards nothing and closes nothing (a network partition: calls hang), keeping what it holds
//! for when it is restored. The shared database server itself is never stopped.
//!
//! In front of an HTTP server it also counts the requests in flight: connections whose client
//! has sent since the server last answered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running fault proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    cut: Arc<AtomicBool>,
    /// `true` while frozen: nothing is forwarded.
    frozen: watch::Sender<bool>,
    /// Bumped at every cut: connections carried before it end.
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    in_flight: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy to `server` on a port the system picks.
    pub async fn start(server: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let (frozen, _) = watch::channel(false);
        let accepted = Arc::new(AtomicU64::new(0));
        let in_flight = Arc::new(AtomicI64::new(0));
        let task = tokio::spawn(serve(
            listener,
            server,
            cut.clone(),
            generation.clone(),
            frozen.clone(),
            (accepted.clone(), in_flight.clone()),
        ));
        Ok(FaultProxy {
            port,
            cut,
            frozen,
            generation,
            accepted,
            in_flight,
            task,
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server is unreachable through the proxy from now on: every connection carried is
    /// dropped, and new ones are closed at once.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// The network between the clients and the server is partitioned from now on: nothing is
    /// forwarded, nothing closed; their calls hang until [`restore`](FaultProxy::restore),
    /// which delivers what was held.
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// The server is reachable again (after a cut or a freeze).
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
        self.frozen.send_replace(false);
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// How many requests are in flight, for an HTTP server behind it: connections whose client
    /// sent bytes since the server's last answer (a request sent, or a long poll waiting).
    pub fn requests_in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// `url` (a `postgres://…@HOST:PORT/…` URL) pointed at the proxy instead of its server.
    pub fn url_through(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (user, _host) = match authority.rsplit_once('@') {
            Some((user, host)) => (format!("{user}@"), host),
            None => (String::new(), authority),
        };
        format!("{scheme}://{user}127.0.0.1:{}{path}", self.port)
    }
}

/// The PostgreSQL test server's address (from [`postgres_url`](crate::postgres_url)), for a
/// proxy in front of it.
pub fn postgres_server() -> SocketAddr {
    let url = crate::postgres_url();
    let rest = url.split_once("://").map_or(url.as_str(), |(_, rest)| rest);
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let (host, port) = host.split_once(':').unwrap_or((host, "5432"));
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    format!("{host}:{port}").parse().expect("a host:port")
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    listener: TcpListener,
    server: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
    frozen: watch::Sender<bool>,
    (accepted, in_flight): (Arc<AtomicU64>, Arc<AtomicI64>),
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted_connection = listener.accept() => {
                let Ok((client, _)) = accepted_connection else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                if cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut ended = generation.subscribe();
                let born = *ended.borrow_and_update();
                let mut thawed = frozen.subscribe();
                let (up, down) = (frozen.subscribe(), frozen.subscribe());
                let asking = Asking::new(in_flight.clone());
                connections.spawn(async move {
                    // A connection made while frozen waits to reach the server.
                    if thawed.wait_for(|frozen| !*frozen).await.is_err() {
                        return;
                    }
                    let Ok(upstream) = TcpStream::connect(server).await else { return };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = upstream.into_split();
                    tokio::select! {
                        _ = pump(client_read, server_write, up, || asking.sent()) => {}
                        _ = pump(server_read, client_write, down, || asking.answered()) => {}
                        _ = ended.wait_for(|now| *now != born) => {}
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Whether one connection's client waits for an answer, counted in the proxy's requests in
/// flight (and no longer once the connection ends).
struct Asking {
    waiting: AtomicBool,
    in_flight: Arc<AtomicI64>,
}

impl Asking {
    fn new(in_flight: Arc<AtomicI64>) -> Self {
        Asking {
            waiting: AtomicBool::new(false),
            in_flight,
        }
    }

    /// The client sent: a request is in flight until the server answers.
    fn sent(&self) {
        if !self.waiting.swap(true, Ordering::SeqCst) {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// The server answered.
    fn answered(&self) {
        if self.waiting.swap(false, Ordering::SeqCst) {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        self.answered();
    }
}

/// Copies `from` to `to`, holding what it read while frozen (nothing is lost or reordered);
/// `seen` is called for each read.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    mut frozen: watch::Receiver<bool>,
    seen: impl Fn(),
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        seen();
        if frozen.wait_for(|frozen| !*frozen).await.is_err() {
            return Ok(());
        }
        to.write_all(&buffer[..read]).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_point_at_the_proxy() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let proxy = runtime
            .block_on(FaultProxy::start("127.0.0.1:5432".parse().unwrap()))
            .unwrap();
        let port = proxy.port();
        assert_eq!(
            proxy.url_through("postgres://postgres@127.0.0.1:5432/db?x=1"),
            format!("postgres://postgres@127.0.0.1:{port}/db?x=1")
        );
        assert_eq!(
            proxy.url_through("postgres://localhost/db"),
            format!("postgres://127.0.0.1:{port}/db")
        );
        drop(proxy);
    }
}
