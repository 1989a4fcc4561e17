//! Repeated operations answered with their first answer: a client sends each write with an
//! idempotency key (`aiki_store::api::IDEMPOTENCY_KEY`, the same for every repeat of one
//! operation), and a server that has answered, or is answering, that key for that caller and
//! route gives the repeat the same answer instead of doing the operation again. So an answer
//! lost on the way (a proxy that dropped it, a connection reset) costs a repeat, never a second
//! claim, a spurious revision conflict or a duplicated event. A key sent again with another
//! body is not a repeat: 422 `idempotency_key_reused`, nothing done.
//!
//! Only writes' answers are kept: not the reads a previous release sent as `POST`
//! (`aiki_store::api::READ_POSTS`, passed through as they are), nor a claim that claimed
//! nothing (its handler marks it [`NotKept`]). They are kept in this server's memory for
//! [`KEPT_FOR`], at most [`KEPT_BYTES`] of them (the least used go first), and the store keeps
//! the answer of each write with the write itself (see [`aiki_store::operation`]): a repeat
//! that reaches another server in front of the same store, or this one after a restart, gets
//! the first answer from the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aiki_store::StoreError;
use aiki_store::api::{FRESH_OPERATION, IDEMPOTENCY_KEY, READ_POSTS, path};
use aiki_store::operation::{self, OperationId};
use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::auth::Caller;
use crate::error::{ApiError, BodyLimit};

/// How long a first answer is kept for its repeats.
pub const KEPT_FOR: Duration = Duration::from_secs(600);

/// The most bytes of answers (bodies and keys) a server keeps: above it, the least used go
/// before they expire (a repeat of theirs gets the answer the store recorded with the write).
pub const KEPT_BYTES: u64 = 64 << 20;

/// What an answer costs beyond its body and key.
const ANSWER_OVERHEAD: u64 = 256;

/// A response its handler says is not to be kept for repeats (a claim that claimed nothing:
/// its repeat claims again).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NotKept;

/// A first answer, as sent, with the digest of the request it answered.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
    asked: [u8; 32],
    at: Instant,
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

/// Weighs a kept answer by its bytes.
#[derive(Clone, Debug)]
struct Bytesize;

impl quick_cache::Weighter<String, Arc<Answer>> for Bytesize {
    fn weight(&self, key: &String, answer: &Arc<Answer>) -> u64 {
        (key.len() + answer.body.len()) as u64 + ANSWER_OVERHEAD
    }
}

/// The answers of one server, by caller, route and key: those being answered (a repeat waits
/// for them; as many as requests in flight), and those answered (bounded in bytes).
pub(crate) struct Replays {
    running: Mutex<HashMap<String, watch::Receiver<Option<Arc<Answer>>>>>,
    kept: quick_cache::sync::Cache<String, Arc<Answer>, Bytesize>,
}

impl std::fmt::Debug for Replays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replays")
            .field("kept", &self.kept.len())
            .field("kept_bytes", &self.kept.weight())
            .finish_non_exhaustive()
    }
}

impl Default for Replays {
    fn default() -> Self {
        Replays::holding(KEPT_BYTES)
    }
}

/// Removes the entry of an operation being answered when its request ends, answered or
/// dropped, so that a repeat of a dropped one runs it.
struct Running<'a> {
    replays: &'a Replays,
    id: &'a str,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.replays.running().remove(self.id);
    }
}

impl Replays {
    /// Replays keeping at most `bytes` of answers.
    fn holding(bytes: u64) -> Self {
        Replays {
            running: Mutex::default(),
            // A guess at the count (a few KiB an answer); the bytes bound it.
            kept: quick_cache::sync::Cache::with_weighter(
                usize::try_from(bytes / 4096).unwrap_or(usize::MAX).max(16),
                bytes,
                Bytesize,
            ),
        }
    }

    fn running(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, watch::Receiver<Option<Arc<Answer>>>>> {
        self.running.lock().expect("BUG: replays poisoned")
    }

    /// The first answer to `id`, if there is one (or the refusal of a request that reuses its
    /// key); else a sender to give it, or a receiver to wait for the one being given.
    fn look(&self, id: &str, asked: &[u8; 32]) -> Look {
        if let Some(answer) = self.kept.get(id)
            && answer.at.elapsed() < KEPT_FOR
        {
            if answer.asked != *asked {
                return Look::Reused;
            }
            return Look::Answered(answer);
        }
        let mut running = self.running();
        if let Some(receiver) = running.get(id) {
            return Look::Wait(receiver.clone());
        }
        let (sender, receiver) = watch::channel(None);
        running.insert(id.to_owned(), receiver);
        Look::First(sender)
    }
}

enum Look {
    Answered(Arc<Answer>),
    Reused,
    Wait(watch::Receiver<Option<Arc<Answer>>>),
    First(watch::Sender<Option<Arc<Answer>>>),
}

/// The middleware: a write with an idempotency key is done once per caller, route and key.
pub(crate) async fn replay(
    State(replays): State<Arc<Replays>>,
    request: Request,
    next: Next,
) -> Response {
    let read = request_route(request.extensions()).is_some_and(|route| READ_POSTS.contains(&route));
    if request.method() == Method::GET || read {
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
    // The request's body, read once for its digest and handed on.
    let limit = request
        .extensions()
        .get::<BodyLimit>()
        .map_or(usize::MAX, |BodyLimit(limit)| *limit);
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return ApiError::from(StoreError::TooLarge {
            what: "the request body (the server's body limit applies, `ServerConfig::body_limit`)"
                .to_owned(),
            bytes: limit as u64 + 1,
            limit: limit as u64,
        })
        .into_response();
    };
    // A claimer resends an unanswered claim's key with its next claim, whose body differs
    // (its time, how many runs it wants): the key alone names a claim.
    let claim = request_route(&parts.extensions).is_some_and(|route| route == path::CLAIMS);
    let asked: [u8; 32] = if claim {
        [0; 32]
    } else {
        Sha256::digest(&body).into()
    };
    let request = Request::from_parts(parts, Body::from(body));
    let sender = loop {
        match replays.look(&id, &asked) {
            Look::Answered(answer) => return answer.response(),
            Look::Reused => return reused(&key),
            Look::Wait(mut receiver) => {
                // Answered, or given up (the entry is gone): look again either way.
                let _ = receiver.wait_for(Option::is_some).await;
            }
            Look::First(sender) => break sender,
        }
    };
    let running = Running {
        replays: &replays,
        id: &id,
    };
    // The store records the answer with the write, under an id of this caller, route and
    // key: a repeat that reaches another server, or this one restarted, gets it from there.
    // A first send (the client says it made the key just now) needs no look for an answer.
    // With the request's digest, which the store records with the answer: a repeat with
    // another is refused there too, through any server.
    let operation = operation_id(&id);
    let digest = (!claim).then(|| hex(&asked));
    let response = operation::request_scope(operation, fresh, digest, next.run(request)).await;
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let answer = Arc::new(Answer {
        status: parts.status,
        content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
        body: bytes,
        asked,
        at: Instant::now(),
    });
    // Only a write's success is kept, as the store keeps only the answers of writes it did: a
    // refused request changed nothing, and a 5xx (the store did not answer) may not have done
    // the operation, so a repeat of either runs it again.
    if answer.status.is_success() && parts.extensions.get::<NotKept>().is_none() {
        replays.kept.insert(id.clone(), answer.clone());
    }
    // No longer being answered before the repeats waiting look again.
    drop(running);
    let _ = sender.send(Some(answer.clone()));
    answer.response()
}

/// The route a request matched, without the API's prefix.
fn request_route(extensions: &axum::http::Extensions) -> Option<&str> {
    extensions
        .get::<MatchedPath>()
        .map(|route| route.as_str())
        .map(|route| route.strip_prefix(aiki_store::api::PREFIX).unwrap_or(route))
}

/// The answer to a key sent again with another body: 422, nothing done.
fn reused(key: &str) -> Response {
    let error = StoreError::KeyReused {
        message: format!(
            "idempotency key `{key}` was sent before with another request body within the \
             last {} minutes; a repeat sends the same body, and a new operation a key of its \
             own",
            KEPT_FOR.as_secs() / 60
        ),
    };
    ApiError::from(error).into_response()
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
    let digest: [u8; 32] = Sha256::digest(id.as_bytes()).into();
    OperationId::new(hex(&digest)).expect("BUG: a hex digest is an operation id")
}

/// A digest in hex.
fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(body: &'static str) -> Arc<Answer> {
        Arc::new(Answer {
            status: StatusCode::OK,
            content_type: None,
            body: Bytes::from_static(body.as_bytes()),
            asked: [0; 32],
            at: Instant::now(),
        })
    }

    #[test]
    fn the_answers_kept_stay_within_their_bytes() {
        let replays = Replays::holding(1 << 20);
        let body: &'static str = Box::leak("x".repeat(10_000).into_boxed_str());
        for n in 0..1_000 {
            replays.kept.insert(format!("id-{n}"), answer(body));
        }
        assert!(
            replays.kept.weight() <= 1 << 20,
            "{}",
            replays.kept.weight()
        );
        assert!(replays.kept.len() < 1_000 && replays.kept.len() > 10);
    }

    #[test]
    fn a_key_sent_again_with_another_body_is_not_a_repeat() {
        let replays = Replays::holding(1 << 20);
        replays.kept.insert("k".to_owned(), answer("first"));
        assert!(matches!(replays.look("k", &[0; 32]), Look::Answered(_)));
        assert!(matches!(replays.look("k", &[1; 32]), Look::Reused));
    }
}
