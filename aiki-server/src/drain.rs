//! A graceful shutdown: once [`serve`](crate::serve)'s shutdown signal comes, the server stops
//! accepting connections, answers its waiting long polls at once (empty: the claimer claims
//! again elsewhere or after the restart), refuses a request that still arrives on an open
//! connection with 503 `store_unavailable` and `Retry-After` (clients send it again), and lets
//! the requests in flight finish within the grace period ([`ServerConfig::shutdown_grace`]),
//! after which the connections left are dropped. A write cut off by the grace period is sent
//! again by its client under the same idempotency key, and answered by the store's record of
//! it (see `replay.rs`).
//!
//! [`ServerConfig::shutdown_grace`]: crate::ServerConfig::shutdown_grace

use aiki_store::StoreError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

use crate::ApiError;

/// Whether the server is shutting down: `true` from the shutdown signal on.
pub(crate) type Draining = watch::Receiver<bool>;

/// A flag that never turns: the router of a server whose shutdown is its owner's.
pub(crate) fn never() -> Draining {
    watch::channel(false).1
}

/// The middleware: a request that arrives while the server drains is refused, 503 with
/// `Retry-After: 1`, and its connection closed.
pub(crate) async fn refuse_while_draining(
    State(draining): State<Draining>,
    request: Request,
    next: Next,
) -> Response {
    if !*draining.borrow() {
        return next.run(request).await;
    }
    let error = StoreError::Unavailable {
        message: "the aiki server is shutting down; send the request again (to another server \
                  in front of the same store, or to this one once it has restarted)"
            .to_owned(),
        source: None,
    };
    let mut response = ApiError::answering(&error).into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    fn app(draining: Draining) -> Router {
        Router::new()
            .route("/", get(|| async { "served" }))
            .route_layer(axum::middleware::from_fn_with_state(
                draining,
                refuse_while_draining,
            ))
    }

    #[tokio::test]
    async fn a_request_that_arrives_while_draining_is_refused_to_be_sent_again() {
        let (drain, draining) = watch::channel(false);
        let request = || Request::get("/").body(Body::empty()).unwrap();
        let served = app(draining.clone()).oneshot(request()).await.unwrap();
        assert_eq!(served.status(), StatusCode::OK);
        drain.send_replace(true);
        let refused = app(draining).oneshot(request()).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        assert_eq!(refused.headers()[header::CONNECTION], "close");
        let body = axum::body::to_bytes(refused.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: aiki_store::ErrorBody = serde_json::from_slice(&body).unwrap();
        assert!(StoreError::from_body(&body).is_transient(), "{body:?}");
    }
}
