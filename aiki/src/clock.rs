//! Time, read through a [`Clock`] so that tests can skip it.
//!
//! Every timer of the runtime goes through the clock: claim refreshes, in-process retry delays,
//! back-offs and timer wake-ups all sleep with [`Clock::sleep_until`], so a [`ManualClock`]
//! moves every one of them at once.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aiki_store::Millis;
use tokio::sync::Notify;

/// The longest sleep, retry delay or wait timeout the runtime accepts: ten years (of 365 days),
/// as in the reference implementation.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A duration in whole milliseconds, saturating instead of overflowing.
pub(crate) fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}

/// A boxed future borrowing the clock, as the object-safe [`Clock`] returns them.
type ClockFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

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

    /// Completes once [`now`](Clock::now) has reached `deadline` (ms since the epoch).
    ///
    /// The default waits on tokio's timer and wakes early to re-check when the clock
    /// [`jumped`](Clock::jumped), so a clock that only implements those two still works.
    fn sleep_until(&self, deadline: Millis) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                let now = self.now();
                if now >= deadline {
                    return;
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(deadline.saturating_sub(now) as u64)) => {}
                    () = self.jumped() => {}
                }
            }
        })
    }
}

/// Sleeps for `duration` on `clock` (saturating: `Duration::MAX` sleeps for ever).
pub(crate) async fn sleep(clock: &dyn Clock, duration: Duration) {
    let deadline = clock.now().saturating_add(millis(duration));
    clock.sleep_until(deadline).await;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        millis(since_epoch)
    }

    fn sleep_until(&self, deadline: Millis) -> ClockFuture<'_> {
        Box::pin(async move {
            // Re-checked after each sleep: the wall clock may have been set back meanwhile.
            loop {
                let now = self.now();
                if now >= deadline {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(deadline.saturating_sub(now) as u64))
                    .await;
            }
        })
    }
}

/// A clock that moves only when told: an hour-long sleep or a day-long schedule is tested in
/// milliseconds. Clones share the same time.
///
/// [`advance`](ManualClock::advance) moves time to each sleeper's deadline in turn, earliest
/// first, and moves on only once every sleeper woken at that deadline has dropped its sleep
/// future: a sleeper acts before time moves past it (a claim refresher refreshes at 30 s, 60 s
/// and 90 s of a single 91 s advance). A sleeper that takes its next sleep before dropping the
/// last one is woken again on the way.
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
    state: Mutex<ManualState>,
    jumped: Notify,
}

#[derive(Debug, Default)]
struct ManualState {
    now: Millis,
    /// Where `advance` is taking the clock; `now` catches up sleeper by sleeper.
    target: Millis,
    /// Sleepers not yet due, by deadline and id, with the waker of their last poll.
    pending: BTreeMap<(Millis, u64), Option<Waker>>,
    /// Sleepers woken at `now` that have not dropped their sleep yet.
    woken: HashSet<u64>,
    next_id: u64,
}

impl ManualInner {
    fn state(&self) -> MutexGuard<'_, ManualState> {
        self.state
            .lock()
            .expect("BUG: the manual clock's state is poisoned")
    }

    /// Moves time on to the next deadline (or the target) once no woken sleeper is acting.
    fn step(&self, mut state: MutexGuard<'_, ManualState>) {
        if !state.woken.is_empty() || state.now >= state.target {
            return;
        }
        let due = state
            .pending
            .first_key_value()
            .map(|(&(deadline, _), _)| deadline)
            .filter(|&deadline| deadline <= state.target);
        let Some(deadline) = due else {
            state.now = state.target;
            drop(state);
            self.jumped.notify_waiters();
            return;
        };
        let now = state.now.max(deadline);
        state.now = now;
        let mut wakers = Vec::new();
        while let Some(entry) = state.pending.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, id), waker) = entry.remove_entry();
            state.woken.insert(id);
            wakers.extend(waker);
        }
        drop(state);
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl ManualClock {
    /// A clock standing at `now` (ms since the epoch).
    pub fn new(now: Millis) -> Self {
        let clock = ManualClock::default();
        {
            let mut state = clock.inner.state();
            state.now = now;
            state.target = now;
        }
        clock
    }

    /// A clock standing at the current wall-clock time.
    pub fn starting_now() -> Self {
        ManualClock::new(SystemClock.now())
    }

    /// Moves the clock forward (saturating) and wakes everything waiting on it: sleepers in
    /// deadline order, each before time moves past its deadline, then whatever waits on
    /// [`jumped`](Clock::jumped). With no sleeper acting, [`now`](Clock::now) stands at the new
    /// time when this returns; otherwise it gets there as the woken sleepers act.
    pub fn advance(&self, by: Duration) {
        let mut state = self.inner.state();
        state.target = state.target.saturating_add(millis(by));
        self.inner.step(state);
    }

    /// The earliest deadline a sleeper waits for, if any (the test env's inline retries).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn next_deadline(&self) -> Option<Millis> {
        let state = self.inner.state();
        state
            .pending
            .first_key_value()
            .map(|(&(deadline, _), _)| deadline)
    }

    /// Whether the clock has caught up with where it was last told to go (its woken sleepers
    /// have acted).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn settled(&self) -> bool {
        let state = self.inner.state();
        state.now >= state.target && state.woken.is_empty()
    }

    /// Moves the clock forward to `at` (not back: an earlier time changes nothing), as
    /// [`advance`](ManualClock::advance) does.
    pub fn advance_to(&self, at: Millis) {
        let mut state = self.inner.state();
        state.target = state.target.max(at);
        self.inner.step(state);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.inner.state().now
    }

    fn jumped(&self) -> ClockFuture<'_> {
        Box::pin(self.inner.jumped.notified())
    }

    fn sleep_until(&self, deadline: Millis) -> ClockFuture<'_> {
        // Registered now, not at the first poll: a sleeper that takes its next sleep before
        // dropping the last one is not skipped by the step its drop triggers.
        let mut state = self.inner.state();
        let id = state.next_id;
        state.next_id += 1;
        let registered = deadline > state.now;
        if registered {
            state.pending.insert((deadline, id), None);
        }
        drop(state);
        Box::pin(ManualSleep {
            clock: self.inner.clone(),
            deadline,
            id,
            registered,
        })
    }
}

/// A sleep on a [`ManualClock`]; dropping it lets time move on past its deadline.
struct ManualSleep {
    clock: Arc<ManualInner>,
    deadline: Millis,
    id: u64,
    registered: bool,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.registered {
            return Poll::Ready(());
        }
        let mut state = self.clock.state();
        if state.woken.contains(&self.id) {
            return Poll::Ready(());
        }
        match state.pending.get_mut(&(self.deadline, self.id)) {
            Some(waker) => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            None => panic!("BUG: a manual-clock sleeper is neither pending nor woken"),
        }
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if !self.registered {
            return;
        }
        let Ok(mut state) = self.clock.state.lock() else {
            return;
        };
        if state.pending.remove(&(self.deadline, self.id)).is_none() && state.woken.remove(&self.id)
        {
            self.clock.step(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn sleepers_act_in_deadline_order_before_time_moves_on() {
        let clock = ManualClock::new(0);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for deadline in [30_000, 10_000, 20_000] {
            let (clock, seen) = (clock.clone(), seen.clone());
            tasks.push(tokio::spawn(async move {
                let mut sleep = clock.sleep_until(deadline);
                sleep.as_mut().await;
                tokio::task::yield_now().await;
                seen.lock().unwrap().push((deadline, clock.now()));
            }));
        }
        // On this single-threaded runtime, the sleepers register before `advance` runs.
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(91));
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(
            *seen.lock().unwrap(),
            [(10_000, 10_000), (20_000, 20_000), (30_000, 30_000)],
            "each sleeper acted at its own deadline, in order"
        );
        assert_eq!(clock.now(), 91_000);
    }

    #[test]
    fn durations_saturate() {
        let clock = ManualClock::new(5);
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Millis::MAX);
        assert_eq!(millis(Duration::MAX), Millis::MAX);
    }
}
