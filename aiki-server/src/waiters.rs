//! Long-polling claims: a claim that finds nothing may wait until a run is queued, through
//! this server or any other on the same store. On a store that sends ready hints (PostgreSQL:
//! the process's one `LISTEN`ing connection), every hint wakes the waiting claims; on any other,
//! one reader of the store's change stream per server, running only while a claim waits, wakes
//! them when a change moves a run to `queued`. Each then claims again (the claim stays the
//! store's fenced transition: a wake-up is only a hint).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use aiki_store::{BoxStore, ChangeCursor, RunStatus};
use tokio::sync::watch;
use tokio::time::Instant;

/// How often the reader looks at the change stream while claims wait and it is caught up.
const TAIL_EVERY: Duration = Duration::from_millis(25);

/// The claims waiting for work on one server.
#[derive(Debug)]
pub(crate) struct Waiters {
    store: BoxStore,
    /// Bumped whenever a run may have been queued.
    generation: watch::Sender<u64>,
    waiting: AtomicUsize,
    tailing: AtomicBool,
}

/// A waiting claim: counted while it lives.
struct Waiting<'a>(&'a Waiters);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Waiters {
    pub(crate) fn new(store: BoxStore) -> Arc<Self> {
        Arc::new(Waiters {
            store,
            generation: watch::channel(0).0,
            waiting: AtomicUsize::new(0),
            tailing: AtomicBool::new(false),
        })
    }

    /// What a claim looks at before it claims: a run queued after this is seen by
    /// [`wait`](Self::wait).
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        let mut receiver = self.generation.subscribe();
        receiver.borrow_and_update();
        receiver
    }

    /// Wakes the waiting claims if `status` is `queued`: a write through this server queued a
    /// run (the change stream would tell them a little later).
    pub(crate) fn queued(&self, status: RunStatus) {
        if status == RunStatus::Queued && self.waiting.load(Ordering::SeqCst) > 0 {
            self.generation.send_modify(|generation| *generation += 1);
        }
    }

    /// Waits until a run may have been queued since `seen` was taken, or `deadline`.
    pub(crate) async fn wait(self: &Arc<Self>, seen: &mut watch::Receiver<u64>, deadline: Instant) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(self);
        if !self.tailing.swap(true, Ordering::SeqCst) {
            match self.store.ready_signals() {
                Some(signals) => {
                    tokio::spawn(self.clone().hear(signals));
                }
                None => {
                    tokio::spawn(self.clone().tail());
                }
            }
        }
        let _ = tokio::time::timeout_at(deadline, seen.changed()).await;
    }

    /// Wakes the waiting claims at every ready hint, for as long as the server lives (the
    /// listening connection is the process's, shared with its workers, and costs nothing while
    /// no hint comes).
    async fn hear(self: Arc<Self>, signals: aiki_store::ReadySignals) {
        let mut hints = signals.subscribe();
        drop(signals);
        let waiters = Arc::downgrade(&self);
        drop(self);
        loop {
            // The first pass: a run queued between a waiter's claim and the subscription.
            let Some(waiters) = waiters.upgrade() else {
                return;
            };
            if waiters.waiting.load(Ordering::SeqCst) > 0 {
                waiters
                    .generation
                    .send_modify(|generation| *generation += 1);
            }
            drop(waiters);
            hints.recv().await;
        }
    }

    /// Reads the change stream from its end while any claim waits.
    async fn tail(self: Arc<Self>) {
        loop {
            self.tail_while_waited().await;
            self.tailing.store(false, Ordering::SeqCst);
            // A claim that began waiting as this reader stopped: read on for it.
            if self.waiting.load(Ordering::SeqCst) == 0 || self.tailing.swap(true, Ordering::SeqCst)
            {
                return;
            }
        }
    }

    async fn tail_while_waited(&self) {
        let mut cursor: Option<ChangeCursor> = None;
        while self.waiting.load(Ordering::SeqCst) > 0 {
            let Some(at) = &cursor else {
                match self.store.changes_since(&ChangeCursor::start(), 0).await {
                    Ok(page) => {
                        cursor = Some(page.next);
                        // A run queued between a waiter's claim and this cursor: look again.
                        self.generation.send_modify(|generation| *generation += 1);
                    }
                    Err(error) => self.backoff(&error).await,
                }
                continue;
            };
            match self.store.changes_since(at, 256).await {
                Ok(page) => {
                    if page
                        .changes
                        .iter()
                        .any(|change| change.to == RunStatus::Queued)
                    {
                        self.generation.send_modify(|generation| *generation += 1);
                    }
                    let caught_up = page.changes.is_empty();
                    cursor = Some(page.next);
                    if caught_up {
                        tokio::time::sleep(TAIL_EVERY).await;
                    }
                }
                Err(error) => self.backoff(&error).await,
            }
        }
    }

    async fn backoff(&self, error: &aiki_store::StoreError) {
        tracing::warn!(%error, "long-polling claims could not read the change stream");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
