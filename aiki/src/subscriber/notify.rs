//! The subscriber of a store that sends ready hints (PostgreSQL's `NOTIFY`): the hints, the
//! in-process wake-up, and a slow poll as the safety net.

use std::fmt;
use std::time::Duration;

use aiki_store::{Ready, ReadyReceiver, ReadySignals};
use async_trait::async_trait;
use tokio::sync::{Mutex, watch};

use super::Subscriber;

/// The safety poll's default interval.
const SAFETY_POLL: Duration = Duration::from_secs(5);

/// Hears the store's hints that runs may be ready ([`ExecutorStore::ready_signals`]: on
/// PostgreSQL, one listening connection per process), so a run started, woken or released by
/// any process is claimed within milliseconds, and polls the store every 5 s (by default) in
/// case a hint was lost. A worker on a store that sends hints uses this one unless told
/// otherwise. After the listening connection is lost and comes back, the first hint is
/// [`Ready::Anything`]: the worker looks at everything it serves.
///
/// ```no_run
/// # async fn demo() -> Result<(), aiki::ClientError> {
/// use std::time::Duration;
/// use aiki::store::prelude::*;
///
/// let store = aiki::connect("postgres://localhost/app").await?;
/// if let Some(signals) = store.ready_signals() {
///     let subscriber = aiki::NotifySubscriber::new(signals).safety_poll(Duration::from_secs(2));
///     let worker = aiki::Worker::builder(store).subscriber(subscriber).build()?;
///     # drop(worker);
/// }
/// # Ok(()) }
/// ```
///
/// [`ExecutorStore::ready_signals`]: aiki_store::ExecutorStore::ready_signals
pub struct NotifySubscriber {
    signals: ReadySignals,
    safety_poll: Duration,
    /// Subscribed at the first wait (a worker that is built and never started opens no
    /// listening connection).
    hints: Mutex<Option<ReadyReceiver>>,
    local: Mutex<watch::Receiver<u64>>,
}

impl NotifySubscriber {
    /// Listens to `signals`, with a safety poll every 5 s. It subscribes at the first
    /// [`next_signal`](Subscriber::next_signal), which says [`Ready::Anything`] at once (a hint
    /// sent before may have been missed); hints sent from then on are kept until asked for.
    pub fn new(signals: ReadySignals) -> Self {
        NotifySubscriber {
            signals,
            safety_poll: SAFETY_POLL,
            hints: Mutex::new(None),
            local: Mutex::new(crate::wake::subscribe()),
        }
    }

    /// Polls the store every `interval` even when no hint comes (default 5 s).
    pub fn safety_poll(mut self, interval: Duration) -> Self {
        self.safety_poll = interval;
        self
    }
}

impl fmt::Debug for NotifySubscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifySubscriber")
            .field("signals", &self.signals)
            .field("safety_poll", &self.safety_poll)
            .finish()
    }
}

/// One hint for `first` and the hints waiting behind it: their version and pool if they all
/// name the same, else [`Ready::Anything`].
fn coalesce(first: Ready, waiting: impl Iterator<Item = Ready>) -> Ready {
    let scope = |hint: Ready| match hint {
        Ready::Run {
            namespace, pool, ..
        } => Ready::Namespace { namespace, pool },
        other => other,
    };
    let mut merged = scope(first);
    for hint in waiting {
        if merged != Ready::Anything && scope(hint) != merged {
            merged = Ready::Anything;
        }
    }
    merged
}

#[async_trait]
impl Subscriber for NotifySubscriber {
    async fn next_signal(&self) -> Ready {
        let mut hints = self.hints.lock().await;
        let Some(hints) = hints.as_mut() else {
            *hints = Some(self.signals.subscribe());
            return Ready::Anything;
        };
        let mut local = self.local.lock().await;
        let hint = tokio::select! {
            hint = hints.recv() => hint,
            _ = local.changed() => return Ready::Anything,
            _ = tokio::time::sleep(self.safety_poll) => return Ready::Anything,
        };
        // Hints waiting behind this one are answered by the same claim.
        coalesce(hint, std::iter::from_fn(|| hints.try_recv()))
    }
}

#[cfg(test)]
mod tests {
    use aiki_store::Namespace;

    use super::*;

    fn hint(workflow: &str) -> Ready {
        Ready::Namespace {
            namespace: Namespace::new(workflow, "1"),
            pool: "default".to_owned(),
        }
    }

    #[test]
    fn a_burst_of_hints_is_one() {
        assert_eq!(coalesce(hint("a"), std::iter::empty()), hint("a"));
        assert_eq!(
            coalesce(hint("a"), [hint("a"), hint("a")].into_iter()),
            hint("a")
        );
        assert_eq!(
            coalesce(hint("a"), [hint("a"), hint("b")].into_iter()),
            Ready::Anything
        );
        assert_eq!(
            coalesce(Ready::Anything, [hint("a")].into_iter()),
            Ready::Anything
        );
    }
}
