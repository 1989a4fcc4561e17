//! Group commit for [`ExecutorStore::put_entry`](crate::ExecutorStore::put_entry) and
//! [`put_entries`](crate::ExecutorStore::put_entries), the hot path of an executor (one call per
//! task step: the result of one step with the `running` record of the next), for any store
//! implementation: the SQL stores use it, and a store of another kind gives it an
//! [`EntryWriter`] of its own.
//!
//! Callers enqueue their writes with a reply channel each; one background task takes everything
//! queued (up to about [`MAX_BATCH`] writes, a caller's writes together), writes it in ONE
//! statement and replies to each write with its own outcome. A caller's write is durable when
//! its call returns (its batch committed). Nothing waits to fill a batch: a lone call is a
//! batch of one, so batches grow only while a statement is in flight, which is exactly when
//! callers would otherwise queue for the connection.
//!
//! The task is spawned on the first call (on the caller's runtime) and respawned if it is gone
//! (its runtime shut down); it ends when the store is dropped or closed.
//!
//! ```
//! use aiki_store::batch::{EntryBatcher, EntryWriter, Pending};
//! use aiki_store::{EntryKind, EntryRecord, EntryStatus, RunId, StoreError};
//!
//! /// Accepts every write (a real writer upserts the batch, each checked against its run's
//! /// revision, in one statement).
//! #[derive(Clone)]
//! struct AcceptAll;
//!
//! impl EntryWriter for AcceptAll {
//!     async fn write(
//!         &self,
//!         batch: &[Pending],
//!     ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
//!         Ok(batch.iter().map(|_| Ok(())).collect())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), StoreError> {
//! let batcher = EntryBatcher::new(AcceptAll);
//! let entry = EntryRecord::new(RunId::new(), "charge:ab12", 0, EntryKind::Task, EntryStatus::Running, 0);
//! batcher.put(3, entry.attempts(1)).await?;
//! batcher.close();
//! # Ok(()) }
//! ```

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::{EntryRecord, RunId, StoreError};

/// The writes a statement takes before it takes no more: a group of
/// [`EntryBatcher::put_all`] is not split for it, so one may carry up to twice as many.
pub const MAX_BATCH: usize = 256;

/// One queued write, as a batch hands it to its [`EntryWriter`].
#[derive(Debug)]
pub struct Pending {
    /// The revision the caller expects the run to have.
    pub expected: u64,
    /// The entry to upsert.
    pub entry: EntryRecord,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// Writes a batch of entries, each checked against its run's revision, in one operation (one
/// statement, one request).
pub trait EntryWriter: Clone + Send + Sync + 'static {
    /// Writes `batch` (no two writes share a `(run, address, index)` key). `Err` when the
    /// statement as a whole failed; otherwise one outcome per write, in order: `Ok` if it was
    /// written, or why not (a revision conflict, an unknown run).
    fn write(
        &self,
        batch: &[Pending],
    ) -> impl Future<Output = Result<Vec<Result<(), StoreError>>, StoreError>> + Send;
}

/// The group-commit front of a store's `put_entry`: one batch in flight at a time, everything
/// queued meanwhile in the next.
pub struct EntryBatcher<W> {
    writer: W,
    lane: Lane<Vec<Pending>>,
}

impl<W> fmt::Debug for EntryBatcher<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryBatcher").finish_non_exhaustive()
    }
}

impl<W: EntryWriter> EntryBatcher<W> {
    /// A batcher over a writer; its task starts with the first call.
    pub fn new(writer: W) -> Self {
        EntryBatcher {
            writer,
            lane: Lane::default(),
        }
    }

    /// Queues a write and waits for its outcome: `Ok` once its batch is durable, or why it was
    /// not written (a revision conflict, an unknown run, the store unreachable).
    pub async fn put(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError> {
        let (reply, outcome) = oneshot::channel();
        self.send(vec![Pending {
            expected,
            entry,
            reply,
        }])?;
        outcome.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Queues several writes to travel in one batch (one statement) and waits for their
    /// outcomes: each is written or refused on its own, as by [`put`](EntryBatcher::put), and
    /// the first refusal, in order, is returned. No two of `entries` may share a
    /// `(run, address, index)` key (the later of two would be written in the next batch).
    pub async fn put_all(
        &self,
        expected: u64,
        entries: Vec<EntryRecord>,
    ) -> Result<(), StoreError> {
        let mut outcomes = Vec::with_capacity(entries.len());
        let mut group = Vec::with_capacity(entries.len().min(MAX_BATCH));
        for entry in entries {
            let (reply, outcome) = oneshot::channel();
            outcomes.push(outcome);
            group.push(Pending {
                expected,
                entry,
                reply,
            });
            if group.len() == MAX_BATCH {
                self.send(std::mem::take(&mut group))?;
            }
        }
        if !group.is_empty() {
            self.send(group)?;
        }
        let mut first = Ok(());
        for outcome in outcomes {
            let outcome = outcome.await.unwrap_or_else(|_| Err(writer_stopped()));
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    }

    /// Hands a group of writes to the writer task, starting it if it is not running.
    fn send(&self, group: Vec<Pending>) -> Result<(), StoreError> {
        self.lane
            .send(group, |queue| drain(self.writer.clone(), queue))
            .map_err(|_| writer_stopped())
    }

    /// Stops the task once the writes already queued are done (a later `put` starts it again).
    pub fn close(&self) {
        self.lane.close();
    }
}

/// The channel to a background task that takes what callers queue: spawned on the first send
/// (on the caller's runtime) and again if it is gone (its runtime shut down).
#[derive(Debug)]
pub(crate) struct Lane<T> {
    sender: Mutex<Option<mpsc::UnboundedSender<T>>>,
}

impl<T> Default for Lane<T> {
    fn default() -> Self {
        Lane {
            sender: Mutex::new(None),
        }
    }
}

impl<T: Send + 'static> Lane<T> {
    /// Queues `item` for the task, spawning `task(queue)` first if none is running; gives
    /// `item` back if a task just spawned is gone too (the runtime is shutting down).
    pub(crate) fn send<F>(
        &self,
        mut item: T,
        task: impl Fn(mpsc::UnboundedReceiver<T>) -> F,
    ) -> Result<(), T>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut sender = self.sender.lock().unwrap_or_else(|e| e.into_inner());
        let mut fresh = false;
        loop {
            if let Some(channel) = sender.as_ref() {
                match channel.send(item) {
                    Ok(()) => return Ok(()),
                    // A task just spawned is gone too: this runtime is shutting down and drops
                    // what it is given. Spawning again would spin forever.
                    Err(mpsc::error::SendError(returned)) if fresh => return Err(returned),
                    // The task is gone (its runtime shut down): start another.
                    Err(mpsc::error::SendError(returned)) => item = returned,
                }
            }
            let (channel, queue) = mpsc::unbounded_channel();
            tokio::spawn(task(queue));
            *sender = Some(channel);
            fresh = true;
        }
    }

    /// Lets the task end once it has taken what is queued (a later send starts another).
    pub(crate) fn close(&self) {
        self.sender.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

type Key = (RunId, String, u32);

fn key(pending: &Pending) -> Key {
    (
        pending.entry.run_id,
        pending.entry.address.clone(),
        pending.entry.index,
    )
}

/// The error of a write whose writer task stopped (its runtime shut down) before answering.
fn writer_stopped() -> StoreError {
    StoreError::Unavailable {
        message: "the entry writer stopped before answering (its runtime shut down); the write \
                  may or may not have been committed, retry it"
            .to_owned(),
        source: None,
    }
}

/// The writer task: takes what is queued, writes it, answers, until every sender is gone. A
/// group (one [`EntryBatcher::put_all`]) goes in one batch, unless one of its keys is already in
/// the batch.
async fn drain<W: EntryWriter>(writer: W, mut queue: mpsc::UnboundedReceiver<Vec<Pending>>) {
    let mut held: VecDeque<Pending> = VecDeque::new();
    let mut batch: Vec<Pending> = Vec::new();
    let mut keys: HashSet<Key> = HashSet::new();
    loop {
        if held.is_empty() {
            match queue.recv().await {
                Some(group) => held.extend(group),
                None => return,
            }
        }
        keys.clear();
        loop {
            // Two writes of one key in a statement: the later one goes in the next batch, so
            // the writes of a key apply in call order.
            while let Some(pending) = held.pop_front() {
                if !keys.insert(key(&pending)) {
                    held.push_front(pending);
                    break;
                }
                batch.push(pending);
            }
            if !held.is_empty() || batch.len() >= MAX_BATCH {
                break;
            }
            let Ok(group) = queue.try_recv() else {
                break;
            };
            held.extend(group);
        }
        match writer.write(&batch).await {
            Ok(outcomes) => {
                debug_assert_eq!(outcomes.len(), batch.len());
                for (pending, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = pending.reply.send(outcome);
                }
            }
            // The database is unreachable: every caller gets it (and retries).
            Err(error) if error.is_transient() || batch.len() == 1 => {
                answer_all(batch.drain(..).map(|pending| pending.reply), error);
            }
            // Something in the batch the database refuses (e.g. text it cannot store): write
            // each alone, so that only the offending call fails.
            Err(_) => {
                for pending in batch.drain(..) {
                    let one = std::slice::from_ref(&pending);
                    let outcome = match writer.write(one).await {
                        Ok(mut outcomes) => outcomes.pop().unwrap_or(Ok(())),
                        Err(error) => Err(error),
                    };
                    let _ = pending.reply.send(outcome);
                }
            }
        }
        batch.clear();
    }
}

/// Answers every caller of a failed statement with the same error kind: the last with
/// `error`, the others with a copy of it.
pub(crate) fn answer_all<T>(
    replies: impl IntoIterator<Item = oneshot::Sender<Result<T, StoreError>>>,
    error: StoreError,
) {
    let mut replies: Vec<_> = replies.into_iter().collect();
    let last = replies.pop();
    for reply in replies {
        let _ = reply.send(Err(duplicate(&error)));
    }
    if let Some(reply) = last {
        let _ = reply.send(Err(error));
    }
}

/// A copy of an error of one statement, for each caller whose write it carried: same kind,
/// same fields, the source shared.
pub(crate) fn duplicate(error: &StoreError) -> StoreError {
    match error {
        StoreError::NotFound { what } => StoreError::NotFound { what: what.clone() },
        StoreError::RevisionConflict {
            run_id,
            expected,
            actual,
        } => StoreError::RevisionConflict {
            run_id: *run_id,
            expected: *expected,
            actual: *actual,
        },
        StoreError::PauseRequested { run_id } => StoreError::PauseRequested { run_id: *run_id },
        StoreError::Invalid { message } => StoreError::Invalid {
            message: message.clone(),
        },
        StoreError::Refused {
            code,
            message,
            details,
        } => StoreError::Refused {
            code,
            message: message.clone(),
            details: details.clone(),
        },
        StoreError::InvalidTransition { run_id, from, to } => StoreError::InvalidTransition {
            run_id: *run_id,
            from: *from,
            to: *to,
        },
        StoreError::AlreadyExists { what } => StoreError::AlreadyExists { what: what.clone() },
        StoreError::Unavailable { message, source } => StoreError::Unavailable {
            message: message.clone(),
            source: source.as_deref().map(Shared::boxed),
        },
        StoreError::Migration { message } => StoreError::Migration {
            message: message.clone(),
        },
        StoreError::KeyReused { message } => StoreError::KeyReused {
            message: message.clone(),
        },
        StoreError::Schema { message } => StoreError::Schema {
            message: message.clone(),
        },
        StoreError::UnsupportedUrl { url, reason } => StoreError::UnsupportedUrl {
            url: url.clone(),
            reason: reason.clone(),
        },
        StoreError::Corrupt { message } => StoreError::Corrupt {
            message: message.clone(),
        },
        StoreError::CannotOpen { url, reason } => StoreError::CannotOpen {
            url: url.clone(),
            reason: reason.clone(),
        },
        StoreError::Incompatible { message } => StoreError::Incompatible {
            message: message.clone(),
        },
        StoreError::Unauthorized { message } => StoreError::Unauthorized {
            message: message.clone(),
        },
        StoreError::Forbidden { message } => StoreError::Forbidden {
            message: message.clone(),
        },
        StoreError::RateLimited { message } => StoreError::RateLimited {
            message: message.clone(),
        },
        StoreError::TooLarge { what, bytes, limit } => StoreError::TooLarge {
            what: what.clone(),
            bytes: *bytes,
            limit: *limit,
        },
        StoreError::Backend { source } => StoreError::Backend {
            source: Shared::boxed(&**source),
        },
    }
}

/// The text and source chain of an error, shareable between the callers of one batch.
#[derive(Debug)]
struct Shared {
    message: String,
    source: Option<Arc<Shared>>,
}

impl Shared {
    fn new(error: &(dyn std::error::Error + 'static)) -> Self {
        Shared {
            message: error.to_string(),
            source: error.source().map(|source| Arc::new(Shared::new(source))),
        }
    }

    fn boxed(
        error: &(dyn std::error::Error + Send + Sync + 'static),
    ) -> Box<dyn std::error::Error + Send + Sync> {
        Box::new(Shared::new(error))
    }
}

impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Shared {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}
