//! A clock that conformance checks through a server set call by call: the servers stamp each
//! call by the time the call carries.

use aiki_store::Millis;

/// A clock the checks set: each call that carries a time sets it to that time before it is
/// sent, and the servers stamp the call by it. Calls of one time run together; a call of
/// another time waits until they are done, so no server reads a time meant for another call.
/// Clones share the clock.
#[derive(Clone, Debug, Default)]
pub struct SharedTime(std::sync::Arc<TimeInner>);

#[derive(Debug, Default)]
struct TimeInner {
    now: std::sync::atomic::AtomicI64,
    /// The time set and how many calls are running at it.
    holding: std::sync::Mutex<(Millis, usize)>,
    left: tokio::sync::Notify,
}

impl SharedTime {
    /// A clock at 0, for a server's [`ServerConfig::clock`](aiki_server::ServerConfig::clock).
    pub fn new() -> SharedTime {
        SharedTime::default()
    }

    pub(super) async fn at<T>(&self, now: Millis, call: impl std::future::Future<Output = T>) -> T {
        let inner = &*self.0;
        loop {
            let left = inner.left.notified();
            {
                let mut holding = inner.holding.lock().expect("not poisoned");
                if holding.1 == 0 || holding.0 == now {
                    *holding = (now, holding.1 + 1);
                    inner.now.store(now, std::sync::atomic::Ordering::SeqCst);
                    break;
                }
            }
            left.await;
        }
        let _leave = Leave(inner);
        call.await
    }
}

/// Leaves the time a call ran at, when the call is done or dropped.
struct Leave<'a>(&'a TimeInner);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut holding = self.0.holding.lock().expect("not poisoned");
        holding.1 -= 1;
        if holding.1 == 0 {
            self.0.left.notify_waiters();
        }
    }
}

impl aiki::Clock for SharedTime {
    fn now(&self) -> Millis {
        self.0.now.load(std::sync::atomic::Ordering::SeqCst)
    }
}
