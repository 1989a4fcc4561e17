//! Work discovery: how a worker learns that there may be runs to claim.
//!
//! [`PollingSubscriber`] asks the store every interval; [`NotifySubscriber`] listens for the
//! store's own hints (PostgreSQL's `NOTIFY`) with a slow poll as its safety net. Another queue
//! (SQS, Redis, NATS) is a [`Subscriber`] of your own: see the trait's example.

mod notify;

use std::fmt;
use std::time::Duration;

use aiki_store::{Ready, RunId};
use async_trait::async_trait;
use tokio::sync::{Mutex, watch};

pub use notify::NotifySubscriber;

/// Tells a worker when to look for work, and which work.
///
/// Claims always go through the store (that is what makes them exclusive); a subscriber only
/// decides *when* the worker asks and *what for*: [`next_signal`](Subscriber::next_signal)
/// resolves with a [`Ready`] hint, which names a workflow version and pool (or a run) that may
/// have work, or [`Ready::Anything`]. The worker claims from the store when the hint concerns
/// a version and pool it serves, and otherwise waits for the next one. A hint is never a claim:
/// a lost message delays a run until the next hint or poll, a duplicated one costs one claim
/// that finds nothing, and no message can make a run execute twice (the store's claim is
/// fenced by the run's revision). Keep a poll in every subscriber, at most every few seconds,
/// as the safety net for messages lost on the way.
///
/// [`heartbeat`](Subscriber::heartbeat) keeps a delivered message alive in the subscriber's
/// own transport while its run executes; it is called beside every claim refresh (which always
/// goes to the store).
///
/// # Example: a queue with a visibility timeout
///
/// A queue like SQS hands a message to one consumer and hides it for a visibility timeout;
/// unless the consumer extends the timeout, the message shows again and another consumer gets
/// it. Here each message names a run (a publisher you run sends one whenever a run is queued);
/// the subscriber says that run may be ready and extends the message's visibility while the
/// run executes. Whether the message is deleted or shows again, the store decides who runs the
/// run.
///
/// ```
/// use std::collections::HashMap;
/// use std::time::Duration;
///
/// use aiki::store::{Namespace, Ready, RunId};
/// use aiki::Subscriber;
///
/// /// What a queue client offers (an SQS client would: receive, change visibility).
/// #[aiki::async_trait]
/// pub trait Queue: Send + Sync + std::fmt::Debug + 'static {
///     /// Waits up to `wait` for a message: (receipt handle, run, version, pool).
///     async fn receive(&self, wait: Duration) -> Option<(String, RunId, Namespace, String)>;
///     /// Hides the message for `timeout` more.
///     async fn change_visibility(&self, receipt: &str, timeout: Duration);
/// }
///
/// #[derive(Debug)]
/// pub struct QueueSubscriber<Q> {
///     queue: Q,
///     /// Each run's message, kept hidden while the run executes.
///     receipts: std::sync::Mutex<HashMap<RunId, String>>,
/// }
///
/// #[aiki::async_trait]
/// impl<Q: Queue> Subscriber for QueueSubscriber<Q> {
///     async fn next_signal(&self) -> Ready {
///         // A long poll of the queue; when it stays empty, the store poll is the safety net.
///         match self.queue.receive(Duration::from_secs(5)).await {
///             Some((receipt, run_id, namespace, pool)) => {
///                 self.receipts.lock().unwrap().insert(run_id, receipt);
///                 Ready::Run { run_id, namespace, pool }
///             }
///             None => Ready::Anything,
///         }
///     }
///
///     async fn heartbeat(&self, run: RunId) {
///         let receipt = self.receipts.lock().unwrap().get(&run).cloned();
///         if let Some(receipt) = receipt {
///             self.queue.change_visibility(&receipt, Duration::from_secs(60)).await;
///         }
///     }
/// }
/// ```
///
/// (A real one also forgets a receipt once its run has ended, and deletes the message then.)
#[async_trait]
pub trait Subscriber: Send + Sync + fmt::Debug + 'static {
    /// Told once, before the first [`next_signal`](Subscriber::next_signal), which workflow
    /// versions and pool the worker serves (a queue's subscriber listens to theirs). The
    /// default does nothing.
    fn serve(&self, namespaces: &[aiki_store::Namespace], pool: &str) {
        let _ = (namespaces, pool);
    }

    /// Resolves when runs may be ready to claim, with what may be ready.
    async fn next_signal(&self) -> Ready;

    /// Keeps a delivered run alive in the subscriber's own transport (an SQS visibility
    /// timeout, a Redis lease) while it executes. Separate from the claim refresh, which always
    /// goes to the store. The default does nothing.
    async fn heartbeat(&self, run: RunId) {
        let _ = run;
    }
}

/// The subscriber of a store that sends no hints (SQLite, memory, a server, whose claims wait
/// on its side): polls the store every interval, and at once when a run is started, woken or
/// ended in this process. A signal sent while the worker was busy is not lost.
pub struct PollingSubscriber {
    interval: Duration,
    local: Mutex<watch::Receiver<u64>>,
}

impl PollingSubscriber {
    /// Polls every `interval`.
    pub fn new(interval: Duration) -> Self {
        PollingSubscriber {
            interval,
            local: Mutex::new(crate::wake::subscribe()),
        }
    }
}

impl fmt::Debug for PollingSubscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollingSubscriber")
            .field("interval", &self.interval)
            .finish()
    }
}

#[async_trait]
impl Subscriber for PollingSubscriber {
    async fn next_signal(&self) -> Ready {
        let mut local = self.local.lock().await;
        tokio::select! {
            _ = tokio::time::sleep(self.interval) => {}
            _ = local.changed() => {}
        }
        Ready::Anything
    }
}

/// A shared subscriber is a subscriber (keep an `Arc` to look at it from elsewhere).
#[async_trait]
impl<S: Subscriber + ?Sized> Subscriber for std::sync::Arc<S> {
    fn serve(&self, namespaces: &[aiki_store::Namespace], pool: &str) {
        (**self).serve(namespaces, pool);
    }

    async fn next_signal(&self) -> Ready {
        (**self).next_signal().await
    }

    async fn heartbeat(&self, run: RunId) {
        (**self).heartbeat(run).await;
    }
}
