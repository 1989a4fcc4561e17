//! A store on the other side of an `aiki-server`: the executor, client and read roles of the
//! contract, each operation one HTTP request (feature `http`), except that the entry writes
//! of several runs share one (group commit, see `entries.rs`).
//!
//! It never sweeps: the server's leader does. A [`Worker`](https://docs.rs/aiki) on it runs no
//! daemons; give it as `WorkerStore::executor(Arc::new(store))`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::PREFIX;
use crate::{ErrorBody, StoreError};

mod entries;
mod roles;

use crate::batch::EntryBatcher;
use entries::EntryRequests;

/// A store reached over HTTP: an `aiki-server`'s API at a base URL such as
/// `http://127.0.0.1:9850`.
///
/// A request the server never answered (refused, reset, timed out) is
/// [`StoreError::Unavailable`], retried by the runtime as it retries a database outage; an
/// answered error comes back as the kind the server's store returned.
#[derive(Clone)]
pub struct HttpStore {
    pub(crate) transport: Transport,
    pub(crate) long_poll: Duration,
    /// The idempotency key of each claimer's last claim that got no answer: its next claim is
    /// that claim sent again (see `claim` in `roles.rs`).
    unanswered: Arc<Mutex<HashMap<String, String>>>,
    /// The group commit of entry writes: what this store's runs write while a request is in
    /// flight goes in the next one (see `entries.rs`).
    entries: Arc<EntryBatcher<EntryRequests>>,
}

/// What sends a request: the client, the server's address and the key.
#[derive(Clone)]
pub(crate) struct Transport {
    client: reqwest::Client,
    base: String,
    key: Option<String>,
    /// The server's payload limit, as its last answer said ([`crate::api::PAYLOAD_LIMIT`]);
    /// 0 until one says it.
    payload_limit: Arc<AtomicU64>,
}

impl std::fmt::Debug for HttpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStore")
            .field("base", &self.transport.base)
            .field("key", &self.transport.key.as_ref().map(|_| "<secret>"))
            .finish()
    }
}

impl HttpStore {
    /// A store at `url` (`http://host:port`, a path prefix allowed), with a 30 s timeout per
    /// request. [`StoreError::UnsupportedUrl`] for a URL that is not `http://` (or `https://`
    /// with the `http-tls` feature).
    pub fn new(url: &str) -> Result<Self, StoreError> {
        Self::with_timeout(url, Duration::from_secs(30))
    }

    /// A store at `url` whose requests each give up after `timeout`.
    pub fn with_timeout(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let unsupported = |reason: String| StoreError::UnsupportedUrl {
            url: crate::error::redact(url),
            reason,
        };
        let tls = cfg!(feature = "http-tls");
        if !(url.starts_with("http://") || (tls && url.starts_with("https://"))) {
            return Err(unsupported(if url.starts_with("https://") {
                "this build has no HTTPS: enable the `http-tls` feature of `aiki`".to_owned()
            } else {
                "an aiki server's URL starts with http://".to_owned()
            }));
        }
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|error| unsupported(error.to_string()))?;
        let transport = Transport {
            client,
            base: format!("{}{PREFIX}", url.trim_end_matches('/')),
            key: None,
            payload_limit: Arc::default(),
        };
        Ok(HttpStore {
            entries: EntryRequests::batcher(&transport),
            transport,
            long_poll: Duration::ZERO,
            unanswered: Arc::default(),
        })
    }

    /// Lets a claim that finds nothing wait up to `wait` on the server for a run to be queued
    /// (through any server on the store), instead of answering at once: a worker then gets a
    /// new run as soon as it is queued, with one request outstanding instead of one per poll.
    /// The server caps the wait (20 s, and below its request timeout); keep it below the
    /// request timeout of this store (30 s). A worker's graceful shutdown waits for a claim in
    /// flight. Default: no wait.
    pub fn long_poll(mut self, wait: Duration) -> Self {
        self.long_poll = wait;
        self
    }

    /// Sends `key` (`aiki_<id>_<secret>`, made by `aiki keys create`) with every request, as
    /// `Authorization: Bearer`.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.transport.key = Some(key.into());
        self.entries = EntryRequests::batcher(&self.transport);
        self
    }

    /// The server's payload limit, once an answer has said it.
    pub(crate) fn stated_payload_limit(&self) -> Option<crate::limit::PayloadLimit> {
        self.transport.stated_payload_limit()
    }

    /// The key this store sends, as the server knows it (its id, name and scopes).
    pub async fn whoami(&self) -> Result<crate::api::WhoAmI, StoreError> {
        self.transport.get(crate::api::path::WHOAMI).await
    }

    /// The idempotency key of each claimer's last claim that got no answer.
    pub(crate) fn unanswered_claims(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.unanswered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Transport {
    /// Sends `body` (if any) to `path` (under the API's prefix) and reads the answer as `R`.
    pub(crate) async fn call<B, R>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<R, StoreError>
    where
        B: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        let body = body.map(|body| encode(path, body)).transpose()?;
        // One operation, one key, however often it is sent: the server answers a repeat with
        // the first answer (see `crate::api::IDEMPOTENCY_KEY`). The operation in scope, if any,
        // names it, for every send of it by whatever retries it (see `crate::operation`).
        let (operation, fresh) = crate::operation::request_key().map_or_else(
            || (uuid::Uuid::new_v4().to_string(), true),
            |(id, fresh)| (id.to_string(), fresh),
        );
        self.send(method, path, body, &operation, fresh).await
    }

    /// Sends the serialized `body` to `path` as operation `operation` (`fresh`: a key made just
    /// now, sent for the first time) until an answer comes, at most [`SEND_ATTEMPTS`] times,
    /// and reads it as `R`.
    pub(crate) async fn send<R: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        operation: &str,
        fresh: bool,
    ) -> Result<R, StoreError> {
        let (status, bytes) = self.exchange(method, path, body, operation, fresh).await?;
        decode(path, status, &bytes)
    }

    /// Sends as [`send`](Transport::send) does and returns the answer's status and body
    /// unread.
    pub(crate) async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        operation: &str,
        fresh: bool,
    ) -> Result<(StatusCode, Vec<u8>), StoreError> {
        let mut pause = Duration::from_millis(50);
        let mut attempt = 1;
        loop {
            let mut request = self
                .client
                .request(method.clone(), format!("{}{path}", self.base))
                .header(crate::api::IDEMPOTENCY_KEY, operation);
            if fresh && attempt == 1 {
                // A key made just now: nothing can be recorded for it yet.
                request = request.header(crate::api::FRESH_OPERATION, "true");
            }
            if let Some(key) = &self.key {
                request = request.bearer_auth(key);
            }
            if let Some(body) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
            }
            let answered = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    self.note_payload_limit(response.headers());
                    response
                        .bytes()
                        .await
                        .map(|bytes| (status, Vec::from(bytes)))
                }
                Err(error) => Err(error),
            };
            let lost = match answered {
                // A gateway's error without the API's body: the answer was lost on the way.
                Ok((status, bytes)) if is_gateway_error(status, &bytes) => {
                    answered_without_body(status, &bytes)
                }
                Ok(answer) => return Ok(answer),
                Err(error) => self.unanswered(error),
            };
            if attempt == SEND_ATTEMPTS {
                return Err(lost);
            }
            tracing::debug!(%lost, attempt, path, "no answer from the aiki server; sending again");
            tokio::time::sleep(pause).await;
            pause *= 2;
            attempt += 1;
        }
    }

    /// Keeps the payload limit an answer states.
    fn note_payload_limit(&self, headers: &reqwest::header::HeaderMap) {
        let stated = headers
            .get(crate::api::PAYLOAD_LIMIT)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if let Some(limit) = stated {
            self.payload_limit.store(limit, Ordering::Relaxed);
        }
    }

    /// The server's payload limit, once an answer has said it.
    pub(crate) fn stated_payload_limit(&self) -> Option<crate::limit::PayloadLimit> {
        let limit = self.payload_limit.load(Ordering::Relaxed);
        (limit > 0)
            .then(|| crate::limit::PayloadLimit::new(usize::try_from(limit).unwrap_or(usize::MAX)))
    }

    /// `GET path` read as `R`.
    pub(crate) async fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R, StoreError> {
        self.call::<(), R>(Method::GET, path, None).await
    }

    /// `POST body` to `path`, read as `R`.
    pub(crate) async fn post<B: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<R, StoreError> {
        self.call(Method::POST, path, Some(body)).await
    }
}

/// An answer to `path` read as `R`: its body on a success, the error it stands for otherwise.
fn decode<R: DeserializeOwned>(
    path: &str,
    status: StatusCode,
    bytes: &[u8],
) -> Result<R, StoreError> {
    if status.is_success() {
        return serde_json::from_slice(bytes).map_err(|error| StoreError::Corrupt {
            message: format!(
                "the server's answer to {path} is not what this release reads: {error}"
            ),
        });
    }
    Err(match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(body) => StoreError::from_body(&body),
        Err(_) => answered_without_body(status, bytes),
    })
}

/// `path` with `query` as its query string, for a read that is a `GET`.
pub(crate) fn with_query<Q: Serialize>(path: &str, query: &Q) -> Result<String, StoreError> {
    let query = serde_urlencoded::to_string(query).map_err(|error| StoreError::Invalid {
        message: format!("the query of {path} does not serialize: {error}"),
    })?;
    Ok(format!("{path}?{query}"))
}

/// `body` as JSON, for a request to `path`.
pub(crate) fn encode<B: Serialize + ?Sized>(path: &str, body: &B) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(body).map_err(|error| StoreError::Invalid {
        message: format!("the request to {path} does not serialize: {error}"),
    })
}

/// How often a request is sent before its failure to get an answer is the caller's: the same
/// operation each time (one idempotency key), so a repeat never does it twice.
const SEND_ATTEMPTS: u32 = 4;

/// A 502, 503 or 504 that is not the API's own error body: a proxy or gateway answered, not
/// the server, so whether the server did the operation is unknown.
fn is_gateway_error(status: StatusCode, bytes: &[u8]) -> bool {
    matches!(
        status,
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
    ) && serde_json::from_slice::<ErrorBody>(bytes).is_err()
}

impl Transport {
    /// A request the server did not answer: the store is out of reach, as in a database
    /// outage; the message names the server, not a database.
    fn unanswered(&self, error: reqwest::Error) -> StoreError {
        let server = crate::error::redact(self.base.trim_end_matches(PREFIX));
        StoreError::Unavailable {
            message: format!(
                "the aiki server at {server} did not answer ({error}); check that it is running \
                 and reachable from here"
            ),
            source: Some(Box::new(error)),
        }
    }
}

/// An error status without the API's error body (a proxy's page, an overloaded server).
fn answered_without_body(status: StatusCode, bytes: &[u8]) -> StoreError {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
    let message = format!("the server answered {status} without an error body: {text}");
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        StoreError::Unavailable {
            message,
            source: None,
        }
    } else {
        StoreError::Backend {
            source: message.into(),
        }
    }
}
