//! The in-process wake-up signal: a run was started, woken or ended in this process, so this
//! process's workers should look for work now instead of at their next poll.
//!
//! Whatever changes a run (the run context, the client, run handles, the executor) raises it;
//! subscribers listen to it. It sits below all of them, so none needs to know the others.

use std::sync::OnceLock;

use tokio::sync::watch;

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
