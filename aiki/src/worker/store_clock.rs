//! A worker's clock, read as the store's: the store decides when a run is due.
//!
//! A store may time claims and leases by a clock of its own (PostgreSQL's, by default), and
//! says so in what it returns: a claimed run's heartbeat and a lease's expiry are stamped by
//! it. A worker whose machine clock is off would otherwise write due times (a sleep's end, a
//! retry, a wait's timeout) the store and the other processes read an hour early or late, and
//! judge "has this sleep ended" by its own time. So the worker reads time through a
//! [`StoreClock`]: its own clock plus the offset the store's answers show, measured at every
//! claim and lease renewal. Offsets within [`DEAD_BAND`] are left alone: they are the round
//! trip's noise, and a clock that moves back and forth by milliseconds would be worse. A store
//! that times everything by its callers (SQLite, memory, PostgreSQL with
//! `aiki_claim_clock=caller`) shows no offset, so the worker's clock is its own.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use aiki_store::Millis;

use crate::clock::Clock;

/// Differences between the store's time and the worker's below this are ignored.
pub(super) const DEAD_BAND: Millis = 500;

/// The worker's clock moved by the offset of the store's clock (see the module docs).
#[derive(Debug)]
pub(super) struct StoreClock {
    local: Arc<dyn Clock>,
    offset: AtomicI64,
}

impl StoreClock {
    pub(super) fn new(local: Arc<dyn Clock>) -> Self {
        StoreClock {
            local,
            offset: AtomicI64::new(0),
        }
    }

    /// Takes note of the store's time `store_now` in an answer that just arrived: the offset
    /// becomes its difference from the local clock now when that is more than the dead band
    /// away from it. Measured on arrival, the clock runs behind the store's by at most the
    /// answer's travel time, never ahead, so a timer set by it never fires before the store
    /// finds it due. Setting the offset (rather than adding to it) keeps answers that arrive
    /// together from correcting twice.
    pub(super) fn observe(&self, store_now: Millis) {
        let measured = store_now.saturating_sub(self.local.now());
        let measured = if measured.abs() > DEAD_BAND {
            measured
        } else {
            0
        };
        let before = self.offset.load(Ordering::Relaxed);
        if measured.saturating_sub(before).abs() > DEAD_BAND
            && self
                .offset
                .compare_exchange(before, measured, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                offset_ms = measured,
                "this machine's clock is off the store's: timing runs by the store's"
            );
        }
    }

    fn offset(&self) -> Millis {
        self.offset.load(Ordering::Relaxed)
    }
}

impl Clock for StoreClock {
    fn now(&self) -> Millis {
        self.local.now().saturating_add(self.offset())
    }

    fn jumped(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.local.jumped()
    }

    fn sleep_until(&self, deadline: Millis) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        self.local
            .sleep_until(deadline.saturating_sub(self.offset()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn the_clock_follows_the_store_beyond_the_dead_band_only() {
        const LOCAL: Millis = 1_000_000;
        let clock = StoreClock::new(Arc::new(ManualClock::new(LOCAL)));
        clock.observe(LOCAL + DEAD_BAND);
        assert_eq!(clock.now(), LOCAL, "noise is ignored");
        clock.observe(LOCAL - 3_600_000);
        assert_eq!(
            clock.now(),
            LOCAL - 3_600_000,
            "the store is an hour behind"
        );
        clock.observe(LOCAL - 3_600_000);
        assert_eq!(clock.now(), LOCAL - 3_600_000, "two answers correct once");
        clock.observe(LOCAL + 3_600_000 + 20);
        assert_eq!(clock.now(), LOCAL + 3_600_000 + 20, "then an hour ahead");
        clock.observe(LOCAL + 3_600_000 + 400);
        assert_eq!(
            clock.now(),
            LOCAL + 3_600_000 + 20,
            "within the band of the offset"
        );
        clock.observe(LOCAL + 100);
        assert_eq!(clock.now(), LOCAL, "back to the local clock");
    }
}
