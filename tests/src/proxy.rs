//! A TCP fault proxy for outage tests: it listens on a free loopback port and forwards every
//! connection to a server, until it is cut: then it drops every connection it carries and
//! closes each new one at once (the server looks down to its clients), until restored. The
//! shared database server itself is never stopped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running fault proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    port: u16,
    cut: Arc<AtomicBool>,
    /// Bumped at every cut: connections carried before it end.
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy to `server` on a port the system picks.
    pub async fn start(server: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0u64);
        let accepted = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(serve(
            listener,
            server,
            cut.clone(),
            generation.clone(),
            accepted.clone(),
        ));
        Ok(FaultProxy {
            port,
            cut,
            generation,
            accepted,
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

    /// The server is reachable again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// How many connections it has accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
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
    accepted: Arc<AtomicU64>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted_connection = listener.accept() => {
                let Ok((mut client, _)) = accepted_connection else { continue };
                accepted.fetch_add(1, Ordering::SeqCst);
                if cut.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let mut ended = generation.subscribe();
                let born = *ended.borrow_and_update();
                connections.spawn(async move {
                    let Ok(mut upstream) = TcpStream::connect(server).await else { return };
                    tokio::select! {
                        _ = copy_bidirectional(&mut client, &mut upstream) => {}
                        _ = ended.wait_for(|now| *now != born) => {}
                    }
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
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
