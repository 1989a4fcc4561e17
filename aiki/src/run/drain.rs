//! Draining: a run stops starting new work, lets what is in flight record its result, and is
//! then moved by its executor (to `paused` for a pause request, back to `queued` for a graceful
//! shutdown or a spent execution budget). One routine for every reason, so that no write in flight is ever fenced: nothing
//! changes the run's revision while its tasks finish.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::Run;

/// Why a run drains (ordered: a pause outranks a shutdown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Drain {
    /// A graceful shutdown of its worker: released back to `queued`.
    Shutdown,
    /// Its execution budget (a push endpoint's request timeout) is nearly spent: handed back
    /// to delivery (`queued`).
    Budget,
    /// An operator asked to pause it: moved to `paused`. Outranks a shutdown.
    Pause,
}

impl Run {
    /// Asks the run to drain: no new task attempt or child starts from now on. A pause
    /// outranks a shutdown.
    pub(crate) fn drain(&self, reason: Drain) {
        let mut replay = self.replay();
        if replay.drain.is_none_or(|current| current < reason) {
            replay.drain = Some(reason);
        }
        if let Some(waker) = replay.waker.take() {
            waker.wake();
        }
    }

    /// Keeps the waker of the execution polling the workflow, to wake it when a drain is asked
    /// for from outside the workflow's future (a claim refresh, a shutdown).
    pub(crate) fn set_waker(&self, waker: &Waker) {
        let mut replay = self.replay();
        if !replay
            .waker
            .as_ref()
            .is_some_and(|kept| kept.will_wake(waker))
        {
            replay.waker = Some(waker.clone());
        }
    }

    /// Why the run drains, if it does.
    pub(super) fn draining(&self) -> Option<Drain> {
        self.replay().drain
    }

    /// `Some(reason)` once the run has drained: asked to, nothing in flight, and some call
    /// held at a drain point (so the workflow has more to do than its durable waits say).
    pub(crate) fn drained(&self) -> Option<Drain> {
        let replay = self.replay();
        replay
            .drain
            .filter(|_| replay.in_flight == 0 && replay.held > 0)
    }

    /// Where new work would start while draining: never resolves, and counts as held until
    /// dropped.
    pub(super) fn hold(&self) -> Held<'_> {
        self.replay().held += 1;
        Held { run: self }
    }
}

/// A call held at a drain point: pending for the rest of the execution.
pub(super) struct Held<'r> {
    run: &'r Run,
}

impl Future for Held<'_> {
    type Output = std::convert::Infallible;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Ok(mut replay) = self.run.inner.replay.lock() {
            replay.held -= 1;
        }
    }
}
