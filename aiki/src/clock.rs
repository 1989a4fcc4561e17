//! Time, read through a [`Clock`] so that tests can skip it.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aiki_store::Millis;
use tokio::sync::Notify;

/// Where the runtime reads the time from: sleeps, timeouts, claim refreshes, retries and every
/// timestamp it stores.
pub trait Clock: Send + Sync + Debug + 'static {
    /// Milliseconds since the Unix epoch.
    fn now(&self) -> Millis;

    /// Completes when the clock jumps (a manual clock advanced), so that workers re-check their
    /// timers at once. A real clock never jumps: the default never completes.
    fn jumped(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::pending())
    }
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        since_epoch.as_millis() as Millis
    }
}

/// A clock that moves only when told: an hour-long sleep or a day-long schedule is tested in
/// milliseconds. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use aiki::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(Duration::from_secs(3600));
/// assert_eq!(clock.now(), 1_000 + 3_600_000);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug, Default)]
struct ManualInner {
    now: AtomicI64,
    jumped: Notify,
}

impl ManualClock {
    /// A clock standing at `now` (ms since the epoch).
    pub fn new(now: Millis) -> Self {
        let clock = ManualClock::default();
        clock.inner.now.store(now, Ordering::SeqCst);
        clock
    }

    /// A clock standing at the current wall-clock time.
    pub fn starting_now() -> Self {
        ManualClock::new(SystemClock.now())
    }

    /// Moves the clock forward and wakes everything waiting on it.
    pub fn advance(&self, by: Duration) {
        self.inner
            .now
            .fetch_add(by.as_millis() as Millis, Ordering::SeqCst);
        self.inner.jumped.notify_waiters();
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.inner.now.load(Ordering::SeqCst)
    }

    fn jumped(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.inner.jumped.notified())
    }
}
