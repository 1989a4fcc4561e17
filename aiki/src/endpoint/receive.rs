//! One delivery: the signature checked on the raw body, the body read, the run claimed by
//! name and executed within the budget, and the answer once the execution has ended.

use aiki_store::push::{PushAnswer, PushBody, SIGNATURE_HEADER, verify};
use aiki_store::{ErrorBody, Namespace, StoreError};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::time::Instant;

use super::Endpoint;
use crate::error::ClientError;
use crate::executor::Budget;

/// The axum handler of deliveries: mount it on a `POST` route with an [`Endpoint`] as the
/// state. Answers as the [module](super) docs say.
pub async fn receive(State(endpoint): State<Endpoint>, headers: HeaderMap, body: Body) -> Response {
    // The budget counts from the request's arrival.
    let arrived = Instant::now();
    let inner = &endpoint.inner;
    let body = match axum::body::to_bytes(body, inner.body_limit).await {
        Ok(body) => body,
        Err(error) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!(
                    "the delivery's body could not be read within {} bytes: {error}",
                    inner.body_limit
                ),
            );
        }
    };
    let header = match headers.get(SIGNATURE_HEADER).map(|value| value.to_str()) {
        None => None,
        Some(Ok(header)) => Some(header),
        Some(Err(_)) => Some("\u{fffd}"),
    };
    let checked = match header {
        None => Err(aiki_store::push::SignatureError::Missing),
        Some(header) => verify(
            header,
            &body,
            &inner.secrets,
            crate::clock::Clock::now(&crate::clock::SystemClock),
            inner.tolerance,
        ),
    };
    if let Err(error) = checked {
        tracing::warn!(%error, "delivery refused");
        return refuse(StatusCode::UNAUTHORIZED, "unauthorized", error.to_string());
    }
    let delivery: PushBody = match serde_json::from_slice(&body) {
        Ok(delivery) => delivery,
        Err(error) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!(
                    "the body is not a delivery ({error}); expected \
                     {{\"run_id\": ..., \"workflow\": ..., \"version\": ...}}"
                ),
            );
        }
    };
    let namespace = Namespace::new(delivery.workflow, delivery.version);
    if inner.executor.registry().workflow(&namespace).is_none() {
        return refuse(
            StatusCode::NOT_FOUND,
            "unknown_version",
            format!(
                "this endpoint does not serve {namespace}; point that version's endpoint \
                 elsewhere (`aiki endpoints set`) or register it here"
            ),
        );
    }
    let ends_at = arrived + inner.budget;
    let budget = Budget {
        drain_at: ends_at - inner.margin,
        ends_at,
        max_idle: inner.max_idle,
    };
    let run_id = delivery.run_id;
    // Its own task: a caller that hangs up does not cut the execution short (its writes
    // would stop mid-run, the claim held until claim recovery).
    let executor = inner.executor.clone();
    let execution = tokio::spawn(async move {
        executor
            .claim_and_execute_within(run_id, Some(budget))
            .await
    });
    let executed = match execution.await {
        Ok(executed) => executed,
        Err(error) => {
            tracing::error!(run_id = %run_id, %error, "the execution of a delivered run panicked");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("the execution of run {run_id} panicked; see the endpoint's log"),
            );
        }
    };
    match executed {
        Ok(Some(report)) => {
            if report.overran {
                tracing::error!(
                    run_id = %run_id,
                    budget = ?inner.budget,
                    "a task was still running when the execution budget ran out: a task longer \
                     than the budget does not finish on a platform that ends the request; raise \
                     the budget or run this version on workers"
                );
            }
            let answer = PushAnswer::new(report.outcome, report.tasks_recorded);
            (StatusCode::OK, Json(answer)).into_response()
        }
        Ok(None) => refuse(
            StatusCode::CONFLICT,
            "not_claimable",
            format!("run {run_id} is not queued: another executor has it, or it moved on"),
        ),
        Err(ClientError::Store(StoreError::NotFound { what })) => refuse(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        ),
        Err(error) => {
            tracing::warn!(run_id = %run_id, %error, "could not claim a delivered run");
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("run {run_id} could not be claimed: {error}; deliver it again later"),
            )
        }
    }
}

fn refuse(status: StatusCode, code: &str, message: String) -> Response {
    (status, Json(ErrorBody::new(code, message, json!({})))).into_response()
}
