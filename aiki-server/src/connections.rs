//! The connections a server keeps: at most [`ServerConfig::max_connections`] open, each
//! closed when a request's head has not arrived within
//! [`ServerConfig::header_read_timeout`] (an idle keep-alive connection too), so that idle or
//! slow sockets can neither exhaust the process's descriptors nor its memory. At the cap, a
//! new connection closes the connection idle the longest (one between requests, or that has
//! sent no complete head yet); with none idle, the new one is closed. So a flood of idle
//! sockets never keeps a health check or a worker's request out.
//!
//! [`ServerConfig::max_connections`]: crate::ServerConfig::max_connections
//! [`ServerConfig::header_read_timeout`]: crate::ServerConfig::header_read_timeout

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tower::ServiceExt;

/// How many connections not yet accepted the listener queues (at most the system's
/// `net.core.somaxconn`).
const BACKLOG: i32 = 8_192;

/// Descriptors kept free of connections: the store's pool, files, the daemons.
const RESERVED_DESCRIPTORS: u64 = 256;

/// The open connections, and the idle ones in the order they became idle.
#[derive(Debug)]
struct Registry {
    max: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    open: usize,
    idle: BTreeMap<u64, Arc<Connection>>,
    next: u64,
}

/// One connection: whether it is idle (its place among the idle), and how it is told to close.
#[derive(Debug, Default)]
struct Connection {
    idle_since: Mutex<Option<u64>>,
    evicted: Notify,
    gone: std::sync::atomic::AtomicBool,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new connection, idle; `None` when every connection is busy at the cap. At the cap,
    /// the connection idle the longest is told to close and its place is the new one's.
    fn open(self: &Arc<Self>) -> Option<Opened> {
        let mut inner = self.lock();
        if inner.open >= self.max {
            let (_, oldest) = inner.idle.pop_first()?;
            *oldest.idle_since.lock().expect("BUG: connection poisoned") = None;
            oldest.gone.store(true, std::sync::atomic::Ordering::SeqCst);
            oldest.evicted.notify_one();
            inner.open -= 1;
        }
        inner.open += 1;
        let connection = Arc::new(Connection::default());
        idle(&mut inner, &connection);
        Some(Opened {
            registry: self.clone(),
            connection,
        })
    }

    /// `connection` is busy with a request until the guard drops.
    fn busy(self: &Arc<Self>, connection: &Arc<Connection>) -> Busy {
        busy(&mut self.lock(), connection);
        Busy {
            registry: self.clone(),
            connection: connection.clone(),
        }
    }
}

/// Marks `connection` idle from now.
fn idle(inner: &mut Inner, connection: &Arc<Connection>) {
    if connection.gone.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let at = inner.next;
    inner.next += 1;
    inner.idle.insert(at, connection.clone());
    *connection
        .idle_since
        .lock()
        .expect("BUG: connection poisoned") = Some(at);
}

/// Marks `connection` busy (or closing): no longer among the idle.
fn busy(inner: &mut Inner, connection: &Connection) {
    if let Some(at) = connection
        .idle_since
        .lock()
        .expect("BUG: connection poisoned")
        .take()
    {
        inner.idle.remove(&at);
    }
}

/// An open connection's place; dropped when it closes.
#[derive(Debug)]
struct Opened {
    registry: Arc<Registry>,
    connection: Arc<Connection>,
}

impl Drop for Opened {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        busy(&mut inner, &self.connection);
        if !self
            .connection
            .gone
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            inner.open -= 1;
        }
    }
}

/// A request in progress on a connection; the connection is idle again when it drops.
#[derive(Debug)]
struct Busy {
    registry: Arc<Registry>,
    connection: Arc<Connection>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut inner = self.registry.lock();
        idle(&mut inner, &self.connection);
    }
}

/// The cap a process can keep: `wanted`, or fewer when the descriptors the process may open
/// (raised to the hard limit where it can be) leave less room.
fn cap(wanted: usize) -> usize {
    #[cfg(unix)]
    {
        let needed = wanted as u64 + RESERVED_DESCRIPTORS;
        let allowed = match rlimit::increase_nofile_limit(needed) {
            Ok(limit) => limit,
            Err(_) => rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(needed, |(soft, _)| soft),
        };
        if allowed < needed {
            let fitting = allowed.saturating_sub(RESERVED_DESCRIPTORS).max(1) as usize;
            tracing::warn!(
                wanted,
                fitting,
                "the process may open {allowed} descriptors: the server keeps at most {fitting} \
                 connections (raise `ulimit -n` to keep more)"
            );
            return fitting.min(wanted);
        }
    }
    wanted
}

/// What [`serve`] keeps to: its connection limits and its shutdown's grace period.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// The most connections open at once.
    pub(crate) max: usize,
    /// How long a connection may take to send a request's head.
    pub(crate) header_read_timeout: Duration,
    /// How long the connections left may finish their requests once the server stops.
    pub(crate) grace: Duration,
}

/// Serves `app` on `listener` within `limits`, until `shutdown` completes; then closes idle
/// connections and lets requests in flight finish, for at most the grace period.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let header_read_timeout = limits.header_read_timeout;
    let registry = Arc::new(Registry {
        max: cap(limits.max.max(1)),
        inner: Mutex::default(),
    });
    let (stop, stopped) = watch::channel(());
    // A longer queue of connections not yet accepted than the 1,024 the listener was made
    // with (the system caps it at `net.core.somaxconn`): a flood that outruns the accept loop
    // for a moment then fills it, instead of dropping every connection made meanwhile, a
    // worker's or a probe's among them, for a second's SYN retry.
    if let Err(error) = socket2::SockRef::from(&listener).listen(BACKLOG) {
        tracing::debug!(%error, "the listener's queue could not be lengthened");
    }
    let mut shutdown = pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, or a connection reset before it was accepted: wait a
                    // moment rather than spin.
                    tracing::debug!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(opened) = registry.open() else {
            tracing::debug!("every connection is busy at the cap: a new one is closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            app.clone(),
            opened,
            header_read_timeout,
            stopped.clone(),
        ));
    }
    drop(listener);
    drop(stopped);
    stop.send_replace(());
    if tokio::time::timeout(limits.grace, stop.closed())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?limits.grace,
            "requests still in flight after the shutdown grace period; dropping them"
        );
    }
    Ok(())
}

/// Serves one connection until it closes, is evicted, or the server stops (then gracefully).
async fn connection(
    stream: tokio::net::TcpStream,
    app: Router,
    opened: Opened,
    header_read_timeout: Duration,
    mut stopped: watch::Receiver<()>,
) {
    let registry = opened.registry.clone();
    let tracked = opened.connection.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = registry.busy(&tracked);
        let app = app.clone();
        async move {
            let response: Response = app
                .oneshot(request.map(Body::new))
                .await
                .unwrap_or_else(|never: Infallible| match never {});
            drop(busy);
            Ok::<_, Infallible>(response)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true);
    let mut served = pin!(builder.serve_connection(TokioIo::new(stream), service));
    let connection = opened.connection.clone();
    let mut evicted = pin!(connection.evicted.notified());
    tokio::select! {
        result = served.as_mut() => {
            if let Err(error) = result {
                tracing::trace!(%error, "a connection ended");
            }
        }
        () = evicted.as_mut() => {}
        changed = stopped.changed() => {
            if changed.is_ok() {
                served.as_mut().graceful_shutdown();
            }
            // Served to its end from here.
            let _ = served.as_mut().await;
        }
    }
    drop(opened);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_longest_idle_connection_makes_room() {
        let registry = Arc::new(Registry {
            max: 2,
            inner: Mutex::default(),
        });
        let first = registry.open().expect("room");
        let second = registry.open().expect("room");
        let busy = registry.busy(&second.connection);
        let third = registry.open().expect("the first, idle, makes room");
        assert!(
            first
                .connection
                .gone
                .load(std::sync::atomic::Ordering::SeqCst)
        );
        assert!(
            !second
                .connection
                .gone
                .load(std::sync::atomic::Ordering::SeqCst)
        );
        let _busy_third = registry.busy(&third.connection);
        assert!(registry.open().is_none(), "every connection is busy");
        drop(busy);
        assert!(
            registry.open().is_some(),
            "the second, idle again, makes room"
        );
        drop(first);
        assert_eq!(registry.lock().open, 1, "the third alone");
    }
}
