//! Group commit of starts over HTTP: the starts an [`HttpStore`](super::HttpStore)'s callers
//! make while its previous start request is in flight travel in its next request
//! ([`path::STARTS`]), each started and answered on its own by the server, whose store batches
//! them in turn (see `sql::starts`). A lone start is the [`path::RUNS`] request it always was.
//! Two requests may be in flight at once, so that the server makes one batch while the next
//! fills; more (up to four) only with full batches: a few callers share a request, many use
//! several at once.
//!
//! Each request has an idempotency key of its own, and the server does each start in it as a
//! part of that operation ([`crate::operation::part_scope`]): a repeat of the request gets each
//! start's first answer, so a lost answer never starts a run twice. A start made inside an
//! operation's scope (which names its key) is not batched.
//!
//! A server of an earlier release does not serve the route (it answers [`api::NO_ROUTE`]): the
//! starts then go one request each, as they went to it before, and this store does not try the
//! route again. A request the server refuses whole for its size goes again one start each.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::{Method, StatusCode};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::Transport;
use crate::api::{self, StartAnswer, path};
use crate::batch::{Lane, answer_all, start_stopped};
use crate::{CreateOutcome, NewRun, StoreError};

/// The most bytes of starts one request carries (a larger start goes alone): well below a
/// server's default body limit (4 MiB).
const REQUEST_BYTES: usize = 1 << 20;

/// The front of an `HttpStore`'s starts: what is queued while a request is in flight goes in
/// the next.
pub(crate) struct StartRequests {
    sender: Sender,
    lane: Lane<Queued>,
}

/// What sends the requests (the task's half).
#[derive(Clone)]
struct Sender {
    transport: Transport,
    /// Set once the server answered that it does not serve [`path::STARTS`].
    unserved: Arc<AtomicBool>,
}

/// A start waiting for its request: the run, serialized, and where its outcome goes.
struct Queued {
    run: Vec<u8>,
    reply: oneshot::Sender<Result<CreateOutcome, StoreError>>,
}

impl StartRequests {
    /// The front of a store that sends its requests with `transport`.
    pub(crate) fn new(transport: &Transport) -> Arc<Self> {
        Arc::new(StartRequests {
            sender: Sender {
                transport: transport.clone(),
                unserved: Arc::default(),
            },
            lane: Lane::default(),
        })
    }

    /// Starts `run`, with the starts queued beside it.
    pub(crate) async fn start(&self, run: &NewRun) -> Result<CreateOutcome, StoreError> {
        let run = super::encode(path::RUNS, run)?;
        let (reply, outcome) = oneshot::channel();
        let sender = &self.sender;
        if self
            .lane
            .send(Queued { run, reply }, |queue| drain(sender.clone(), queue))
            .is_err()
        {
            return Err(start_stopped());
        }
        outcome.await.unwrap_or_else(|_| Err(start_stopped()))
    }
}

/// The most requests of starts in flight at once with full batches.
const FLIGHTS: usize = 4;

/// The most requests in flight at once when the next batch is not full: one under way on the
/// server while the next fills. With one, a batch waited for the whole round trip of the
/// previous one, and the bench's starts through a server on SQLite took 1.25 – 1.59 s instead
/// of the 0.76 – 1.05 s of a request each.
const PARTIAL_FLIGHTS: usize = 2;

/// The task: takes what is queued (up to [`api::MAX_STARTS`] starts and [`REQUEST_BYTES`] at a
/// time) and sends it in one request, until the store is dropped and every request in flight
/// is answered.
async fn drain(sender: Sender, mut queue: mpsc::UnboundedReceiver<Queued>) {
    let mut held: VecDeque<Queued> = VecDeque::new();
    let mut flights = JoinSet::new();
    let mut open = true;
    loop {
        while open && held.len() < api::MAX_STARTS {
            match queue.try_recv() {
                Ok(next) => held.push_back(next),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let taken = batch_length(&held);
        let full = taken == api::MAX_STARTS || taken < held.len();
        let limit = if full { FLIGHTS } else { PARTIAL_FLIGHTS };
        if held.is_empty() || flights.len() >= limit {
            tokio::select! {
                next = queue.recv(), if open => match next {
                    Some(next) => held.push_back(next),
                    None => open = false,
                },
                Some(_) = flights.join_next(), if !flights.is_empty() => {}
                else => return,
            }
            continue;
        }
        // The rest goes first in the next request.
        let batch: Vec<Queued> = held.drain(..taken).collect();
        let sender = sender.clone();
        flights.spawn(async move { sender.send(batch).await });
    }
}

/// How many of the first starts `held` one request takes: at least one, at most
/// [`api::MAX_STARTS`] and, past the first, [`REQUEST_BYTES`].
fn batch_length(held: &VecDeque<Queued>) -> usize {
    let Some(first) = held.front() else {
        return 0;
    };
    let mut taken = 1;
    let mut bytes = first.run.len();
    while let Some(next) = held.get(taken) {
        if taken == api::MAX_STARTS || bytes + next.run.len() > REQUEST_BYTES {
            break;
        }
        bytes += next.run.len();
        taken += 1;
    }
    taken
}

impl Sender {
    /// Sends `batch` and answers each of its starts.
    async fn send(&self, batch: Vec<Queued>) {
        if batch.len() == 1 || self.unserved.load(Ordering::Relaxed) {
            return self.alone(batch).await;
        }
        match self.together(&batch).await {
            Ok(Some(answers)) => {
                for (queued, answer) in batch.into_iter().zip(answers) {
                    let outcome = match answer {
                        StartAnswer::Outcome(outcome) => Ok(*outcome),
                        StartAnswer::Refused(error) => Err(StoreError::from_body(&error)),
                    };
                    let _ = queued.reply.send(outcome);
                }
            }
            Ok(None) => self.alone(batch).await,
            Err(error) => answer_all(batch.into_iter().map(|queued| queued.reply), error),
        }
    }

    /// Sends each start of `batch` in a request of its own, all at once.
    async fn alone(&self, batch: Vec<Queued>) {
        let sent = batch.into_iter().map(|queued| async move {
            let operation = uuid::Uuid::new_v4().to_string();
            let outcome = self
                .transport
                .send(Method::POST, path::RUNS, Some(queued.run), &operation, true)
                .await;
            let _ = queued.reply.send(outcome);
        });
        futures_util::future::join_all(sent).await;
    }

    /// Sends `batch` in one request: each start's answer, in order, or `None` where the server
    /// does not serve the route (noted: it is not tried again) or refuses the request for its
    /// size.
    async fn together(&self, batch: &[Queued]) -> Result<Option<Vec<StartAnswer>>, StoreError> {
        let body = super::array_body("runs", batch.iter().map(|queued| queued.run.as_slice()));
        let operation = uuid::Uuid::new_v4().to_string();
        let (status, bytes) = self
            .transport
            .exchange(Method::POST, path::STARTS, Some(body), &operation, true)
            .await?;
        if super::is_no_route(status, &bytes) {
            self.unserved.store(true, Ordering::Relaxed);
            return Ok(None);
        }
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            return Ok(None);
        }
        let answers: Vec<StartAnswer> = super::decode(path::STARTS, status, &bytes)?;
        if answers.len() != batch.len() {
            return Err(StoreError::Corrupt {
                message: format!(
                    "the server answered {} of {} starts",
                    answers.len(),
                    batch.len()
                ),
            });
        }
        Ok(Some(answers))
    }
}
