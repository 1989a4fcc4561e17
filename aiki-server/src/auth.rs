//! Who may call which route: every route but health and readiness needs an API key
//! (`Authorization: Bearer aiki_<id>_<secret>`) holding the route's scope. No key or a bad one
//! is 401, a key without the scope 403; the handler never runs either way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aiki_store::api::path;
use aiki_store::{ApiKeyRecord, BoxStore, Scope, StoreError};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ApiError;
use crate::keys;

/// How long a server trusts a key it read from the store: a revocation reaches every server
/// within this.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(5);

/// The key a request was made with: it is the actor of what the request does.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub(crate) key_id: String,
    pub(crate) name: String,
    pub(crate) scopes: Vec<Scope>,
}

impl Caller {
    /// The key as the timeline shows it: `key:<id> (<name>)`.
    pub(crate) fn who(&self) -> String {
        format!("key:{} ({})", self.key_id, self.name)
    }

    /// The actor recorded for an operator's request that named `actor` (unchecked, so kept
    /// only as the name the key acted as): `key:<id> (<name>) as <actor>`. Without keys, the
    /// name the request gave.
    pub(crate) fn operator(caller: Option<&Caller>, actor: Option<String>) -> Option<String> {
        match (caller, actor) {
            (Some(caller), Some(actor)) => Some(format!("{} as {actor}", caller.who())),
            (Some(caller), None) => Some(caller.who()),
            (None, actor) => actor,
        }
    }

    /// The actor recorded for an executor's request: the key, whatever the request named (a
    /// leaked executor key cannot write another key's name on the timeline). Without keys,
    /// the name the request gave.
    pub(crate) fn executor(caller: Option<&Caller>, actor: Option<String>) -> Option<String> {
        match caller {
            Some(caller) => Some(caller.who()),
            None => actor,
        }
    }
}

/// The keys a server has read lately, by id, and the requests each may still make.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    read: Mutex<HashMap<String, (Option<ApiKeyRecord>, Instant)>>,
    limit: Option<Limiter>,
}

/// The per-key rate limit (governor's keyed GCRA limiter).
struct Limiter(governor::DefaultKeyedRateLimiter<String>);

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Limiter")
    }
}

impl Keys {
    /// The keys of a server whose keys may each make `rate` (per second, burst) requests.
    pub(crate) fn limited(rate: Option<(std::num::NonZeroU32, std::num::NonZeroU32)>) -> Self {
        Keys {
            read: Mutex::default(),
            limit: rate.map(|(per_second, burst)| {
                Limiter(governor::RateLimiter::keyed(
                    governor::Quota::per_second(per_second).allow_burst(burst),
                ))
            }),
        }
    }

    /// `Err` with how long to wait when `key` is over its rate.
    fn admit(&self, key: &str) -> Result<(), Duration> {
        let Some(Limiter(limiter)) = &self.limit else {
            return Ok(());
        };
        let result = limiter.check_key(&key.to_owned());
        if limiter.len() > 10_000 {
            limiter.retain_recent();
        }
        result.map_err(|not_until| {
            not_until.wait_time_from(governor::clock::Clock::now(
                &governor::clock::DefaultClock::default(),
            ))
        })
    }
}

impl Keys {
    /// The key of `id` as the store held it at most [`KEY_CACHE_TTL`] ago; an unknown id is
    /// remembered as unknown as long, so that requests with made-up ids do not each cost a
    /// store read.
    async fn get(&self, store: &BoxStore, id: &str) -> Result<Option<ApiKeyRecord>, ApiError> {
        if let Some((key, read)) = self.read.lock().expect("BUG: keys poisoned").get(id)
            && read.elapsed() < KEY_CACHE_TTL
        {
            return Ok(key.clone());
        }
        let key = store.key(id).await?;
        let mut read = self.read.lock().expect("BUG: keys poisoned");
        if read.len() > 10_000 {
            read.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
            if read.len() > 10_000 {
                read.clear();
            }
        }
        read.insert(id.to_owned(), (key.clone(), Instant::now()));
        Ok(key)
    }
}

/// The scope a route needs (`None`: open to anyone).
fn scope_of(method: &Method, route: &str) -> Option<Scope> {
    let route = route.strip_prefix(aiki_store::api::PREFIX).unwrap_or(route);
    match route {
        path::HEALTH | path::READY => None,
        path::RUNS_LIST | path::CHANGES | path::SCHEDULE | path::SCHEDULE_LOG => Some(Scope::Read),
        path::SCHEDULES if method == Method::GET => Some(Scope::Read),
        path::RUNS
        | path::EVENTS
        | path::ACTIONS
        | path::RELEASE
        | path::FORKS
        | path::TRANSITIONS
        | path::SCHEDULES
        | path::SCHEDULE_ACTIONS
        | path::CONFIG_KEY => Some(Scope::Operator),
        path::WORKERS | path::CATALOG if method == Method::GET => Some(Scope::Read),
        path::RUN
        | path::RUNS_COUNTS
        | path::HISTORY
        | path::TIMELINE
        | path::CONFIG
        | path::WHOAMI
        | path::METRICS => Some(Scope::Read),
        path::ENTRIES
        | path::ENTRY_BATCH
        | path::ENTRY_WRITES
        | path::CHILDREN
        | path::SLEEPS
        | path::EVENT_SLOTS
        | path::CLAIM_RUN
        | path::REFRESH
        | path::TRANSITION
        | path::CONTINUATION
        | path::CLAIMS
        | path::WORKERS
        | path::CATALOG
        | path::CATALOG_TASKS
        | path::SCHEDULES_DECLARED => Some(Scope::Executor),
        // A route this table does not name: the operator's, so that a new route fails closed.
        _ => Some(Scope::Operator),
    }
}

/// Whether a key's scopes admit a route needing `needed`: the executor and operator roles
/// read too (their traits extend the read role).
fn admits(key: &ApiKeyRecord, needed: Scope) -> bool {
    key.allows(needed)
        || (needed == Scope::Read && (key.allows(Scope::Executor) || key.allows(Scope::Operator)))
}

fn unauthorized(message: &str) -> Response {
    let body = StoreError::Unauthorized {
        message: message.to_owned(),
    }
    .to_body();
    let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        "Bearer".parse().expect("a header value"),
    );
    response
}

/// The most of a refused request's body the server reads before answering: what it reads,
/// the connection keeps (its client's next request goes on it); past this, the answer says
/// `Connection: close`.
const DRAINED: usize = 256 * 1024;

/// `response` to a request refused before its body was read, once the body is drained (up to
/// [`DRAINED`]): a client that sent the body before reading the answer, as HTTP/1 clients do,
/// then reads the answer instead of meeting a reset connection.
async fn drained(request: Request, mut response: Response) -> Response {
    if axum::body::to_bytes(request.into_body(), DRAINED)
        .await
        .is_err()
    {
        response.headers_mut().insert(
            header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// The middleware: checks the request's key against the route's scope.
pub(crate) async fn require_key(
    State(keys): State<(BoxStore, Arc<Keys>)>,
    request: Request,
    next: Next,
) -> Response {
    match checked(keys, request).await {
        Ok((request, caller)) => {
            let mut request = request;
            if let Some(caller) = caller {
                request.extensions_mut().insert(caller);
            }
            next.run(request).await
        }
        Err((request, refusal)) => drained(request, refusal).await,
    }
}

/// The request and the caller its key names (`None`: a route open to anyone), or the request
/// and its refusal.
async fn checked(
    (store, keys): (BoxStore, Arc<Keys>),
    request: Request,
) -> Result<(Request, Option<Caller>), (Request, Response)> {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|matched| matched.as_str().to_owned())
        .unwrap_or_default();
    let Some(needed) = scope_of(request.method(), &route) else {
        return Ok((request, None));
    };
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(token) = token else {
        let refusal = unauthorized(
            "this route needs an API key: send `Authorization: Bearer aiki_<id>_<secret>` (create \
             one with `aiki keys create`)",
        );
        return Err((request, refusal));
    };
    let Some((id, secret)) = keys::parse(token.trim()) else {
        let refusal = unauthorized("the API key is not shaped `aiki_<id>_<secret>`");
        return Err((request, refusal));
    };
    let key = match keys.get(&store, id).await {
        Ok(key) => key,
        Err(error) => return Err((request, error.into_response())),
    };
    let Some(key) = key.filter(|key| keys::verify(key, secret)) else {
        let refusal = unauthorized("the API key is not one this store knows");
        return Err((request, refusal));
    };
    if key.revoked_at.is_some() {
        let refusal = unauthorized("the API key was revoked");
        return Err((request, refusal));
    }
    if !admits(&key, needed) {
        let message = format!(
            "API key {} may not do this: the route needs the `{needed}` scope and the key holds \
             `{}`",
            key.id,
            key.scope_list()
        );
        let mut body = StoreError::Forbidden {
            message: message.clone(),
        }
        .to_body();
        // The message itself, as every other body's details carry it: a client reads it back
        // into `StoreError::Forbidden`, whose text adds `forbidden: ` again.
        body.details = json!({
            "message": message,
            "key": key.id,
            "needed": needed,
            "holds": key.scopes,
        });
        return Err((
            request,
            (StatusCode::FORBIDDEN, axum::Json(body)).into_response(),
        ));
    }
    if let Err(wait) = keys.admit(&key.id) {
        let body = StoreError::RateLimited {
            message: format!(
                "API key {} sent more requests than this server allows a key; send again in {} ms",
                key.id,
                wait.as_millis().max(1)
            ),
        }
        .to_body();
        let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
        let seconds = wait.as_secs().max(1).to_string();
        if let Ok(value) = seconds.parse() {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return Err((request, response));
    }
    let caller = Caller {
        key_id: key.id,
        name: key.name,
        scopes: key.scopes,
    };
    Ok((request, Some(caller)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_needs_the_scope_of_its_role() {
        let get = Method::GET;
        let post = Method::POST;
        let expected = [
            (&get, path::HEALTH, None),
            (&get, path::READY, None),
            (&get, path::RUN, Some(Scope::Read)),
            (&get, path::HISTORY, Some(Scope::Read)),
            (&get, path::TIMELINE, Some(Scope::Read)),
            (&get, path::RUNS_COUNTS, Some(Scope::Read)),
            (&post, path::RUNS_LIST, Some(Scope::Read)),
            (&post, path::CHANGES, Some(Scope::Read)),
            (&get, path::WORKERS, Some(Scope::Read)),
            (&get, path::CATALOG, Some(Scope::Read)),
            (&get, path::CONFIG, Some(Scope::Read)),
            (&get, path::WHOAMI, Some(Scope::Read)),
            (&get, path::METRICS, Some(Scope::Read)),
            (&post, path::ENTRIES, Some(Scope::Executor)),
            (&post, path::ENTRY_BATCH, Some(Scope::Executor)),
            (&post, path::ENTRY_WRITES, Some(Scope::Executor)),
            (&post, path::CHILDREN, Some(Scope::Executor)),
            (&post, path::SLEEPS, Some(Scope::Executor)),
            (&post, path::EVENT_SLOTS, Some(Scope::Executor)),
            (&post, path::CLAIM_RUN, Some(Scope::Executor)),
            (&post, path::REFRESH, Some(Scope::Executor)),
            (&post, path::TRANSITION, Some(Scope::Executor)),
            (&post, path::CONTINUATION, Some(Scope::Executor)),
            (&post, path::CLAIMS, Some(Scope::Executor)),
            (&post, path::WORKERS, Some(Scope::Executor)),
            (&post, path::CATALOG, Some(Scope::Executor)),
            (&post, path::CATALOG_TASKS, Some(Scope::Executor)),
            (&post, path::RUNS, Some(Scope::Operator)),
            (&post, path::EVENTS, Some(Scope::Operator)),
            (&post, path::ACTIONS, Some(Scope::Operator)),
            (&post, path::RELEASE, Some(Scope::Operator)),
            (&post, path::FORKS, Some(Scope::Operator)),
            (&post, path::TRANSITIONS, Some(Scope::Operator)),
            (&Method::PUT, path::CONFIG_KEY, Some(Scope::Operator)),
            (&get, path::SCHEDULES, Some(Scope::Read)),
            (&post, path::SCHEDULE, Some(Scope::Read)),
            (&post, path::SCHEDULE_LOG, Some(Scope::Read)),
            (&post, path::SCHEDULES, Some(Scope::Operator)),
            (&post, path::SCHEDULE_ACTIONS, Some(Scope::Operator)),
            (&post, path::SCHEDULES_DECLARED, Some(Scope::Executor)),
            (&post, "/a-route-added-later", Some(Scope::Operator)),
        ];
        for (method, route, scope) in expected {
            let full = format!("{}{route}", aiki_store::api::PREFIX);
            assert_eq!(scope_of(method, &full), scope, "{method} {route}");
        }
    }
}
