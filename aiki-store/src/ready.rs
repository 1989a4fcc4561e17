//! Hints that work may be ready: which runs a store's own signal (PostgreSQL's `NOTIFY`) says
//! may be claimable now. A hint is never a claim: whoever hears one still claims through the
//! store, whose fenced claim decides, so a lost or repeated hint costs at most a wasted look.

use std::fmt;
use std::sync::Arc;

use tokio::sync::broadcast;

use crate::{Namespace, RunId};

/// What may be ready to claim.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ready {
    /// Anything may be ready: look at every workflow version served (a poll's turn, the first
    /// signal, a reconnect after which hints may have been missed).
    Anything,
    /// Runs of this workflow version in this pool may be ready.
    Namespace {
        /// The workflow version.
        namespace: Namespace,
        /// The pool.
        pool: String,
    },
    /// This run, of this workflow version in this pool, may be ready.
    Run {
        /// The run.
        run_id: RunId,
        /// Its workflow version.
        namespace: Namespace,
        /// Its pool.
        pool: String,
    },
}

impl Ready {
    /// Whether a claimer serving `namespaces` in `pool` should look: `Anything` always, the
    /// others when their pool is `pool` and their version one of `namespaces`.
    pub fn concerns(&self, namespaces: &[Namespace], pool: &str) -> bool {
        match self {
            Ready::Anything => true,
            Ready::Namespace {
                namespace,
                pool: theirs,
            }
            | Ready::Run {
                namespace,
                pool: theirs,
                ..
            } => theirs == pool && namespaces.contains(namespace),
        }
    }
}

/// A process's feed of [`Ready`] hints from a store that signals them (see
/// [`ExecutorStore::ready_signals`](crate::ExecutorStore::ready_signals)). Clones share one
/// source: on PostgreSQL, one listening connection per database and schema in the process,
/// opened when the first receiver subscribes and closed when the last feed and receiver are
/// dropped.
#[derive(Clone)]
pub struct ReadySignals {
    source: Arc<dyn ReadySource>,
}

/// Where a feed's hints come from.
pub(crate) trait ReadySource: Send + Sync + 'static {
    /// A receiver of every hint sent from now on; the first hint it gets is
    /// [`Ready::Anything`] once the source listens (whatever was ready before is looked at).
    fn subscribe(&self) -> broadcast::Receiver<Ready>;
    /// A short description for logs (`postgres NOTIFY on "aiki_ready_aiki"`).
    fn describe(&self) -> String;
}

impl ReadySignals {
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn new(source: Arc<dyn ReadySource>) -> Self {
        ReadySignals { source }
    }

    /// A receiver of the hints sent from now on (it keeps the source listening while it
    /// lives).
    pub fn subscribe(&self) -> ReadyReceiver {
        ReadyReceiver {
            receiver: self.source.subscribe(),
            source: self.source.clone(),
        }
    }

    /// Whether two feeds share one source (one listening connection).
    pub fn same_source(&self, other: &ReadySignals) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.source), Arc::as_ptr(&other.source))
    }
}

/// Receives the hints of a [`ReadySignals`] feed sent since it subscribed.
pub struct ReadyReceiver {
    receiver: broadcast::Receiver<Ready>,
    /// Keeps the source (and its sender) alive.
    source: Arc<dyn ReadySource>,
}

impl ReadyReceiver {
    /// The next hint. A receiver that fell behind by more than the buffer (1,024 hints) gets
    /// [`Ready::Anything`] in place of those it missed.
    pub async fn recv(&mut self) -> Ready {
        match self.receiver.recv().await {
            Ok(hint) => hint,
            Err(broadcast::error::RecvError::Lagged(_)) => Ready::Anything,
            // The source, which this receiver holds, holds a sender.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }

    /// The next hint if one has come, without waiting.
    pub fn try_recv(&mut self) -> Option<Ready> {
        match self.receiver.try_recv() {
            Ok(hint) => Some(hint),
            Err(broadcast::error::TryRecvError::Lagged(_)) => Some(Ready::Anything),
            Err(_) => None,
        }
    }
}

impl fmt::Debug for ReadyReceiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ReadyReceiver")
            .field(&self.source.describe())
            .finish()
    }
}

impl fmt::Debug for ReadySignals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ReadySignals")
            .field(&self.source.describe())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_concerns_the_claimers_of_its_version_and_pool() {
        let served = [Namespace::new("orders", "1"), Namespace::new("mail", "2")];
        assert!(Ready::Anything.concerns(&served, "default"));
        assert!(Ready::Anything.concerns(&[], "default"));
        let orders = |pool: &str| Ready::Namespace {
            namespace: Namespace::new("orders", "1"),
            pool: pool.to_owned(),
        };
        assert!(orders("default").concerns(&served, "default"));
        assert!(!orders("gpu").concerns(&served, "default"));
        let other = Ready::Run {
            run_id: RunId::new(),
            namespace: Namespace::new("orders", "2"),
            pool: "default".to_owned(),
        };
        assert!(!other.concerns(&served, "default"));
    }
}
