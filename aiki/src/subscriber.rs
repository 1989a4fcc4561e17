//! Work discovery: how a worker learns that there may be runs to claim.

use std::fmt;
use std::time::Duration;

use aiki_store::RunId;
use async_trait::async_trait;
use tokio::sync::{Mutex, watch};

/// Tells a worker when to look for work.
///
/// Claims always go through the store (that is what makes them exclusive); a subscriber only
/// decides *when* the worker asks. The default, [`PollingSubscriber`], asks every poll interval
/// and at once when something happens in this process; a subscriber on a message transport
/// (Redis, SQS) would resolve [`next_signal`](Subscriber::next_signal) when a message arrives.
#[async_trait]
pub trait Subscriber: Send + Sync + fmt::Debug + 'static {
    /// Resolves when there may be runs to claim.
    async fn next_signal(&self);

    /// Keeps a delivered run alive in the subscriber's own transport (an SQS visibility
    /// timeout, a Redis lease) while it executes. Separate from the claim refresh, which always
    /// goes to the store. The default does nothing.
    async fn heartbeat(&self, run: RunId) {
        let _ = run;
    }
}

/// The default subscriber: polls the store every interval, and at once when a run is started,
/// woken or ended in this process. A signal sent while the worker was busy is not lost.
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
    async fn next_signal(&self) {
        let mut local = self.local.lock().await;
        tokio::select! {
            _ = tokio::time::sleep(self.interval) => {}
            _ = local.changed() => {}
        }
    }
}

/// A shared subscriber is a subscriber (keep an `Arc` to look at it from elsewhere).
#[async_trait]
impl<S: Subscriber + ?Sized> Subscriber for std::sync::Arc<S> {
    async fn next_signal(&self) {
        (**self).next_signal().await;
    }

    async fn heartbeat(&self, run: RunId) {
        (**self).heartbeat(run).await;
    }
}
