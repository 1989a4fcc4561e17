//! The in-process wake-up signals: a run was started, woken or ended in this process, so this
//! process's workers should look for work now instead of at their next poll; and a timer this
//! process set came due, so its daemons should sweep now instead of at their next pass.
//!
//! Whatever changes a run (the run context, the client, run handles, the executor) raises it;
//! subscribers listen to it. It sits below all of them, so none needs to know the others.

use std::sync::{Arc, OnceLock};

use aiki_store::Millis;
use tokio::sync::watch;

use crate::clock::Clock;

/// The process-wide "something happened" signal, as a generation counter.
fn signal() -> &'static watch::Sender<u64> {
    static SIGNAL: OnceLock<watch::Sender<u64>> = OnceLock::new();
    SIGNAL.get_or_init(|| watch::channel(0).0)
}

/// Tells the subscribers of this process that there may be work.
pub(crate) fn work_available() {
    signal().send_modify(|generation| *generation = generation.wrapping_add(1));
}

/// A receiver that sees every signal raised from now on.
pub(crate) fn subscribe() -> watch::Receiver<u64> {
    signal().subscribe()
}

/// The process-wide "a timer came due" signal, as a generation counter.
fn timer_signal() -> &'static watch::Sender<u64> {
    static SIGNAL: OnceLock<watch::Sender<u64>> = OnceLock::new();
    SIGNAL.get_or_init(|| watch::channel(0).0)
}

/// Timers due within this long get an in-process wake-up; later ones are found by the
/// daemons' passes.
const LOCAL_TIMER_HORIZON: Millis = 60_000;

/// Tells this process's daemons when a timer it just set (a sleep, a retry delay, a timeout, a
/// scheduled start) is due on `clock`, so that it is not rounded up to their interval. Their
/// passes stay the recovery path.
pub(crate) fn timer_at(clock: &Arc<dyn Clock>, due: Millis) {
    let delay = due - clock.now();
    if (0..=LOCAL_TIMER_HORIZON).contains(&delay) {
        let clock = clock.clone();
        tokio::spawn(async move {
            clock.sleep_until(due).await;
            timer_signal().send_modify(|generation| *generation = generation.wrapping_add(1));
        });
    }
}

/// A receiver that sees every due timer signalled from now on.
pub(crate) fn subscribe_timers() -> watch::Receiver<u64> {
    timer_signal().subscribe()
}
