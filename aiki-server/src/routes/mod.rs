//! The handlers, one per operation of the contract, by role; each is one call to the store.

pub(crate) mod client;
mod executor;
mod read;

pub(crate) use client::*;
pub(crate) use executor::*;
pub(crate) use read::*;

use axum::Json;
use axum::extract::State;

use crate::AppState;
use crate::error::ApiError;

/// What a handler answers: the operation's result as JSON, or the error body.
pub(crate) type Answer<T> = Result<Json<T>, ApiError>;

/// `GET /health`: the server answers.
pub(crate) async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// `GET /whoami`: the key in use.
pub(crate) async fn whoami(
    caller: Option<axum::Extension<crate::auth::Caller>>,
) -> Json<aiki_store::api::WhoAmI> {
    Json(match caller {
        Some(axum::Extension(caller)) => aiki_store::api::WhoAmI {
            key: Some(caller.key_id),
            name: Some(caller.name),
            scopes: caller.scopes,
            auth: true,
        },
        None => aiki_store::api::WhoAmI {
            key: None,
            name: None,
            scopes: aiki_store::Scope::ALL.to_vec(),
            auth: false,
        },
    })
}

/// `GET /metrics`: the Prometheus text of [`aiki::metrics`].
pub(crate) async fn metrics(
    State(app): State<AppState>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let text = aiki::metrics::prometheus_text(&*app.store).await?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            aiki::metrics::PROMETHEUS_CONTENT_TYPE,
        )],
        text,
    )
        .into_response())
}

/// `GET /ready`: the store answers (one cheap read); 503 with the error body when it does not.
pub(crate) async fn ready(State(app): State<AppState>) -> Answer<serde_json::Value> {
    app.store.runtime_config().await?;
    Ok(Json(serde_json::json!({
        "status": "ready",
        "backend": app.store.backend(),
    })))
}
