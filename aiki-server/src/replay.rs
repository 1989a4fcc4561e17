//! Repeated operations answered with their first answer: a client sends each write with an
//! idempotency key (`aiki_store::api::IDEMPOTENCY_KEY`, the same for every repeat of one
//! operation), and a server that has answered, or is answering, that key for that caller and
//! route gives the repeat the same answer instead of doing the operation again. So an answer
//! lost on the way (a proxy that dropped it, a connection reset) costs a repeat, never a second
//! claim, a spurious revision conflict or a duplicated event.
//!
//! The answers are kept in this server's memory for [`KEPT_FOR`] (at most the newest 20,000:
//! they expire oldest first, so keeping them costs no pass over them), and the store keeps the
//! answer of each write with the write itself (see [`aiki_store::operation`]): a repeat that
//! reaches another server in front of the same store, or this one after a restart, gets the
//! first answer from the store.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aiki_store::api::{FRESH_OPERATION, IDEMPOTENCY_KEY};
use aiki_store::operation::{self, OperationId};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::auth::Caller;
use crate::error::ApiError;

/// How long a first answer is kept for its repeats.
pub const KEPT_FOR: Duration = Duration::from_secs(600);

/// At most this many answers are kept: above it, the oldest go before they expire (a repeat
/// of theirs gets the answer the store recorded with the write).
const MAX_KEPT: usize = 20_000;

/// A first answer, as sent.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
}

impl Answer {
    fn response(&self) -> Response {
        let mut response = (self.status, Body::from(self.body.clone())).into_response();
        if let Some(content_type) = &self.content_type {
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, content_type.clone());
        }
        response
    }
}

#[derive(Debug)]
enum Entry {
    /// Being answered: the repeat waits for the answer.
    Running(watch::Receiver<Option<Arc<Answer>>>),
    /// Answered, at this time; the number of the answer among this server's.
    Done(Arc<Answer>, Instant, u64),
}

/// The answers of one server, by caller, route and key.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    entries: Mutex<Kept>,
}

/// The entries, and the answered ones in the order they were answered (oldest first), so
/// that dropping the expired ones costs what is dropped, not a pass over all of them.
#[derive(Debug, Default)]
struct Kept {
    by_id: HashMap<String, Entry>,
    answered: VecDeque<(Instant, String, u64)>,
    /// The number of the next answer.
    next: u64,
}

impl Kept {
    /// Keeps `answer` to `id`, answered now, and drops the expired answers and, above
    /// [`MAX_KEPT`], the oldest.
    fn answered(&mut self, id: String, answer: Arc<Answer>) {
        let now = Instant::now();
        let number = self.next;
        self.next += 1;
        self.answered.push_back((now, id.clone(), number));
        self.by_id.insert(id, Entry::Done(answer, now, number));
        let over = |answered: &VecDeque<(Instant, String, u64)>| {
            answered.len() > MAX_KEPT
                || answered
                    .front()
                    .is_some_and(|(at, _, _)| now.duration_since(*at) >= KEPT_FOR)
        };
        while over(&self.answered)
            && let Some((_, id, number)) = self.answered.pop_front()
        {
            // Unless the id was answered again since (its answer expired and it ran anew).
            if matches!(self.by_id.get(&id), Some(Entry::Done(_, _, kept)) if *kept == number) {
                self.by_id.remove(&id);
            }
        }
    }
}

/// Removes an entry whose operation did not finish (its request was dropped), so that a repeat
/// runs it.
struct Unfinished<'a> {
    replays: &'a Replays,
    id: Option<String>,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.replays.lock().by_id.remove(&id);
        }
    }
}

impl Replays {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.entries.lock().expect("BUG: replays poisoned")
    }

    /// The first answer to `id`, if there is one; else a sender to give it, or a receiver to
    /// wait for the one being given.
    fn look(&self, id: &str) -> Look {
        let mut entries = self.lock();
        match entries.by_id.get(id) {
            Some(Entry::Done(answer, at, _)) if at.elapsed() < KEPT_FOR => {
                Look::Answered(answer.clone())
            }
            Some(Entry::Running(receiver)) => Look::Wait(receiver.clone()),
            _ => {
                let (sender, receiver) = watch::channel(None);
                entries
                    .by_id
                    .insert(id.to_owned(), Entry::Running(receiver));
                Look::First(sender)
            }
        }
    }
}

enum Look {
    Answered(Arc<Answer>),
    Wait(watch::Receiver<Option<Arc<Answer>>>),
    First(watch::Sender<Option<Arc<Answer>>>),
}

/// The middleware: a write with an idempotency key is done once per caller, route and key.
pub(crate) async fn replay(
    State(replays): State<Arc<Replays>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET {
        return next.run(request).await;
    }
    let (key, fresh) = match headers(request.headers()) {
        Ok(Some(found)) => found,
        Ok(None) => return next.run(request).await,
        Err(error) => return error.into_response(),
    };
    let caller = request
        .extensions()
        .get::<Caller>()
        .map_or("", |caller| caller.key_id.as_str());
    let id = format!(
        "{caller} {} {} {key}",
        request.method(),
        request.uri().path()
    );
    let sender = loop {
        match replays.look(&id) {
            Look::Answered(answer) => return answer.response(),
            Look::Wait(mut receiver) => {
                // Answered, or given up (the entry is gone): look again either way.
                let _ = receiver.wait_for(Option::is_some).await;
            }
            Look::First(sender) => break sender,
        }
    };
    let mut unfinished = Unfinished {
        replays: &replays,
        id: Some(id.clone()),
    };
    // The store records the answer with the write, under an id of this caller, route and
    // key: a repeat that reaches another server, or this one restarted, gets it from there.
    // A first send (the client says it made the key just now) needs no look for an answer.
    let operation = operation_id(&id);
    let response = if fresh {
        operation::fresh_scope(operation, next.run(request)).await
    } else {
        operation::scope(operation, next.run(request)).await
    };
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let answer = Arc::new(Answer {
        status: parts.status,
        content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
        body: bytes,
    });
    // Only a success is kept, as the store keeps only the answers of writes it did: a refused
    // request changed nothing, and a 5xx (the store did not answer) may not have done the
    // operation, so a repeat of either runs it again.
    if answer.status.is_success() {
        unfinished.id = None;
        replays.lock().answered(id, answer.clone());
    }
    let _ = sender.send(Some(answer.clone()));
    drop(unfinished);
    answer.response()
}

/// The longest idempotency key.
const MAX_KEY_LEN: usize = 200;

/// A write's idempotency key and whether it is marked as a first send, if it has a key; a
/// malformed key or mark is refused (400), never ignored, so that no client believes a write
/// protected that is not.
fn headers(headers: &HeaderMap) -> Result<Option<(String, bool)>, ApiError> {
    let fresh = match headers.get(FRESH_OPERATION).map(HeaderValue::as_bytes) {
        None => false,
        Some(b"true") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!("header `{FRESH_OPERATION}` is `true` or absent"),
            ));
        }
    };
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        if fresh {
            return Err(ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!(
                    "header `{FRESH_OPERATION}` marks the first send of an idempotency key; send `{IDEMPOTENCY_KEY}` with it"
                ),
            ));
        }
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|key| !key.is_empty() && key.len() <= MAX_KEY_LEN && !key.contains(' '))
        .ok_or_else(|| {
            ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!(
                    "header `{IDEMPOTENCY_KEY}` is 1 to {MAX_KEY_LEN} visible ASCII characters \
                     (a UUID made per operation, the same for each repeat of it)"
                ),
            )
        })?;
    Ok(Some((key.to_owned(), fresh)))
}

/// The store's operation id of the request named `id` (caller, method, path and idempotency
/// key): their SHA-256, so that callers cannot meet in the store's answers by choosing keys.
fn operation_id(id: &str) -> OperationId {
    let digest = Sha256::digest(id.as_bytes());
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    OperationId::new(hex).expect("BUG: a hex digest is an operation id")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: &'static str) -> Arc<Answer> {
        Arc::new(Answer {
            status: StatusCode::OK,
            content_type: None,
            body: Bytes::from_static(body.as_bytes()),
        })
    }

    #[test]
    fn above_the_most_kept_the_oldest_answers_go_first() {
        let mut kept = Kept::default();
        for n in 0..MAX_KEPT + 2 {
            kept.answered(format!("id-{n}"), answer("first"));
        }
        assert_eq!(kept.by_id.len(), MAX_KEPT);
        assert_eq!(kept.answered.len(), MAX_KEPT);
        assert!(!kept.by_id.contains_key("id-0"));
        assert!(!kept.by_id.contains_key("id-1"));
        assert!(kept.by_id.contains_key("id-2"));
        assert!(kept.by_id.contains_key(&format!("id-{}", MAX_KEPT + 1)));
    }

    #[test]
    fn an_id_answered_again_keeps_its_newer_answer_when_the_older_goes() {
        let mut kept = Kept::default();
        kept.answered("again".to_owned(), answer("older"));
        kept.answered("again".to_owned(), answer("newer"));
        for n in 0..MAX_KEPT - 1 {
            kept.answered(format!("id-{n}"), answer("other"));
        }
        // The older answer's place in the order went; the newer answer stays.
        match kept.by_id.get("again") {
            Some(Entry::Done(answer, _, _)) => assert_eq!(answer.body, "newer"),
            other => panic!("{other:?}"),
        }
    }
}
