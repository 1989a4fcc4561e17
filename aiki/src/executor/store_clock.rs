//! A worker's clock, read as the store's: the store decides when a run is due.
//!
//! A store may time claims and leases by a clock of its own (PostgreSQL's, by default), and
//! says so in what it returns: a claimed run's heartbeat and a lease's expiry are stamped by
//! it. A worker whose machine clock is off would otherwise write due times (a sleep's end, a
//! retry, a wait's timeout) the store and the other processes read an hour early or late, and
//! judge "has this sleep ended" by its own time. So the worker reads time through a
//! [`StoreClock`]: its own clock plus the offset the store's answers show, measured at every
//! claim and lease renewal (see [`StoreClock::observe`]). A store that times everything by its
//! callers (SQLite, memory, PostgreSQL with `aiki_claim_clock=caller`) echoes the worker's own
//! time, which always agrees with the offset in force, so the worker's clock stays its own
//! however slow the store answers.

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
pub(crate) struct StoreClock {
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

    /// The local clock's time now (callers take it with the call's time: [`stamp`](Self::stamp)).
    #[cfg(test)]
    fn local_now(&self) -> Millis {
        self.local.now()
    }

    /// One reading of the local clock, as itself (what a call is sent at, for
    /// [`observe`](Self::observe)) and as the store's time (what the call says its time is).
    /// Read once, the two agree whatever the local clock does before the answer arrives: two
    /// readings with a jump between them would have a store that echoes the caller's time
    /// show the jump as the store's offset, and keep it.
    pub(crate) fn stamp(&self) -> (Millis, Millis) {
        let local = self.local.now();
        (local, local.saturating_add(self.offset()))
    }

    /// Takes note of the store's time `store_now` in the answer, arriving now, to a call sent
    /// at `local_sent` (by the local clock). The store's offset lies between what the arrival
    /// and the sending show; while the offset in force lies there too (give or take the dead
    /// band, the store's own noise), nothing changes. Otherwise the offset becomes what the
    /// arrival shows (or zero, when that is within the band): the clock then runs behind the
    /// store's by at most the answer's travel time, never ahead, so a timer set by it never
    /// fires before the store finds it due. Setting the offset, rather than adding to it,
    /// keeps answers that arrive together from correcting twice.
    pub(crate) fn observe(&self, local_sent: Millis, store_now: Millis) {
        let low = store_now.saturating_sub(self.local.now());
        let high = store_now.saturating_sub(local_sent);
        let agrees = |offset: Millis| {
            offset >= low.saturating_sub(DEAD_BAND) && offset <= high.saturating_add(DEAD_BAND)
        };
        let before = self.offset.load(Ordering::Relaxed);
        if agrees(before) {
            return;
        }
        let measured = if agrees(0) { 0 } else { low };
        if self
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

    const LOCAL: Millis = 1_000_000;
    const HOUR: Millis = 3_600_000;

    #[test]
    fn the_clock_follows_the_store_beyond_the_dead_band_only() {
        let clock = StoreClock::new(Arc::new(ManualClock::new(LOCAL)));
        clock.observe(LOCAL, LOCAL + DEAD_BAND);
        assert_eq!(clock.now(), LOCAL, "noise is ignored");
        clock.observe(LOCAL, LOCAL - HOUR);
        assert_eq!(clock.now(), LOCAL - HOUR, "the store is an hour behind");
        clock.observe(LOCAL, LOCAL - HOUR);
        assert_eq!(clock.now(), LOCAL - HOUR, "two answers correct once");
        clock.observe(LOCAL, LOCAL + HOUR + 20);
        assert_eq!(clock.now(), LOCAL + HOUR + 20, "then an hour ahead");
        clock.observe(LOCAL, LOCAL + HOUR + 400);
        assert_eq!(
            clock.now(),
            LOCAL + HOUR + 20,
            "within the band of the offset"
        );
        clock.observe(LOCAL, LOCAL + 100);
        assert_eq!(clock.now(), LOCAL, "back to the local clock");
    }

    #[test]
    fn a_store_that_echoes_the_callers_time_keeps_the_local_clock_however_slow() {
        let local = ManualClock::new(LOCAL);
        let clock = StoreClock::new(Arc::new(local.clone()));
        for _ in 0..5 {
            // Sent at the worker's time, answered 3 s later with that same time.
            let (sent, local_sent) = (clock.now(), clock.local_now());
            local.advance(std::time::Duration::from_secs(3));
            clock.observe(local_sent, sent);
        }
        assert_eq!(clock.now(), clock.local_now(), "no drift from slow answers");
    }

    #[test]
    fn a_jump_while_a_stamped_call_is_answered_changes_no_offset() {
        let local = ManualClock::new(LOCAL);
        let clock = StoreClock::new(Arc::new(local.clone()));
        let (local_sent, sent) = clock.stamp();
        local.advance(std::time::Duration::from_secs(3600));
        // A store that times by its callers echoes the time the call was sent with.
        clock.observe(local_sent, sent);
        assert_eq!(
            clock.now(),
            clock.local_now(),
            "the jump is the clock's own"
        );
        // Read the other way round (the call's time first, the local send time after the
        // jump), the same answer would have moved the clock an hour back for good.
        let stale = clock.now() - HOUR;
        clock.observe(clock.local_now(), stale);
        assert_eq!(
            clock.now(),
            clock.local_now() - HOUR,
            "what `stamp` prevents"
        );
    }

    #[test]
    fn a_skewed_store_is_followed_on_the_side_of_the_arrival() {
        let local = ManualClock::new(LOCAL);
        let clock = StoreClock::new(Arc::new(local.clone()));
        let local_sent = clock.local_now();
        // The store, an hour ahead, stamps the call 40 ms after it was sent; the answer
        // arrives 40 ms later still.
        local.advance(std::time::Duration::from_millis(80));
        clock.observe(local_sent, local_sent + 40 + HOUR);
        assert_eq!(
            clock.now(),
            clock.local_now() + HOUR - 40,
            "behind the store, not ahead"
        );
    }
}
