//! Request metrics: every answer counted, and timed, by method, route template and status
//! ([`aiki::metrics::http_request`], served on `GET /metrics`). The route is the template the
//! router matched (`/api/v1/runs/{id}`), never the raw path, and a path no route matches is
//! `unmatched`, so the series stay as few as the routes.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

/// The route a request matched, filled in by [`matched`] inside the router and read by
/// [`observe`] around it (whoever made the answer: a handler, the auth check or the timeout).
#[derive(Clone, Debug, Default)]
struct Route(Arc<OnceLock<String>>);

/// The outer middleware: times the request and counts its answer.
pub(crate) async fn observe(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = Route::default();
    request.extensions_mut().insert(route.clone());
    let method = method_label(request.method());
    let response = next.run(request).await;
    let template = route.0.get().map_or("unmatched", String::as_str);
    aiki::metrics::http_request(
        method,
        template,
        response.status().as_u16(),
        started.elapsed(),
    );
    response
}

/// The inner middleware (a route layer): notes the template of the route matched.
pub(crate) async fn matched(request: Request, next: Next) -> Response {
    if let (Some(route), Some(path)) = (
        request.extensions().get::<Route>(),
        request.extensions().get::<MatchedPath>(),
    ) {
        let _ = route.0.set(path.as_str().to_owned());
    }
    next.run(request).await
}

/// The method as a label: the ones the API routes, any other `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}
