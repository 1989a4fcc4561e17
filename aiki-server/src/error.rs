//! What the API answers when a request fails: the store's [`ErrorBody`] with its status, and
//! the extractors that turn a malformed request into one, never into axum's plain-text
//! rejection.

use aiki_store::api::status_of;
use aiki_store::bounds::{Bounded, Field, OutOfBounds};
use aiki_store::{ErrorBody, RunId, StoreError};
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

/// An error answer: a status and the contract's error body.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    pub(crate) body: ErrorBody,
}

impl ApiError {
    /// A request the API refuses before the store sees it (`invalid_request`).
    pub fn invalid(status: StatusCode, message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError {
            status,
            body: ErrorBody::new(
                "invalid_request",
                message.clone(),
                json!({ "message": message }),
            ),
        }
    }

    /// A refusal of the runtime's own (an input or event the catalog refuses): its body, with
    /// `status`.
    pub(crate) fn refused(status: StatusCode, error: &aiki::ClientError) -> Self {
        ApiError {
            status,
            body: error.to_body(),
        }
    }

    /// The status answered.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// A request with a field out of the store's bounds (400 `invalid_request`, the field in
    /// `details.field`).
    pub(crate) fn out_of_bounds(error: OutOfBounds) -> Self {
        let mut refused = ApiError::invalid(
            StatusCode::BAD_REQUEST,
            StoreError::from(error.clone()).to_string(),
        );
        refused.body.details["field"] = json!(error.field);
        refused
    }
}

impl ApiError {
    /// `error`'s answer, as the store's errors are answered, for an error of the server's own
    /// whose message is the server's (nothing is logged, no driver text).
    pub(crate) fn answering(error: &StoreError) -> Self {
        ApiError {
            status: StatusCode::from_u16(status_of(error))
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            body: error.to_body(),
        }
    }
}

impl From<StoreError> for ApiError {
    /// The error's body, but for a failure of the server's own (5xx): its cause (a driver's
    /// text, a table's name) goes to the log, and the caller gets the code with a message that
    /// says what to do.
    fn from(error: StoreError) -> Self {
        let status =
            StatusCode::from_u16(status_of(&error)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if !status.is_server_error() {
            return ApiError {
                status,
                body: error.to_body(),
            };
        }
        let code = error.code();
        tracing::warn!(%error, code, "a request failed in the store");
        let message = match error {
            StoreError::Unavailable { .. } => {
                "the server cannot reach its store right now: send the request again in a \
                 moment"
                    .to_owned()
            }
            _ => format!(
                "the server's store failed to do this request ({code}); the server's log says \
                 why"
            ),
        };
        ApiError {
            status,
            body: ErrorBody::new(code, message.clone(), json!({ "message": message })),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

/// A JSON request body of type `T` within the store's bounds
/// ([`aiki_store::bounds`]); a body that is not one is answered with the error body: 400 for
/// JSON that does not parse or a field out of bounds (naming it), 422 for JSON of the wrong
/// shape, 415 without a JSON content type, 413 over the body limit (`too_large`, as a payload
/// over the store's limit is, when the request says its length).
#[derive(Debug)]
pub(crate) struct Body<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned + Bounded> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let length = request
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        let limit = request.extensions().get::<BodyLimit>().copied();
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => {
                value
                    .check_bounds(Field::ROOT)
                    .map_err(ApiError::out_of_bounds)?;
                Ok(Body(value))
            }
            Err(rejection) => match (rejection.status(), length, limit) {
                (StatusCode::PAYLOAD_TOO_LARGE, Some(bytes), Some(BodyLimit(limit))) => {
                    Err(StoreError::TooLarge {
                        what: "the request body (the server's body limit applies, \
                               `ServerConfig::body_limit`)"
                            .to_owned(),
                        bytes,
                        limit: limit as u64,
                    }
                    .into())
                }
                _ => Err(rejected(rejection)),
            },
        }
    }
}

/// The server's request body limit, for [`Body`]'s answer to a body over it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyLimit(pub(crate) usize);

fn rejected(rejection: JsonRejection) -> ApiError {
    let status = rejection.status();
    let message = match status {
        StatusCode::PAYLOAD_TOO_LARGE => {
            "the request body is over the server's limit: send less, or raise the server's body limit".to_owned()
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            "the request body must be JSON, sent with `content-type: application/json`".to_owned()
        }
        _ => format!("the request body is not what this route takes: {}", rejection.body_text()),
    };
    ApiError::invalid(status, message)
}

/// A query string of type `T`; one that is not is 400 with the error body.
#[derive(Debug)]
pub(crate) struct QueryOf<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned + Bounded> FromRequestParts<S> for QueryOf<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => {
                value
                    .check_bounds(Field::ROOT)
                    .map_err(ApiError::out_of_bounds)?;
                Ok(QueryOf(value))
            }
            Err(rejection) => Err(ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!(
                    "the query string is not what this route takes: {}",
                    rejection.body_text()
                ),
            )),
        }
    }
}

/// The run id of a `/runs/{id}…` path; one that is not a run id is 400.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunPath(pub(crate) RunId);

impl<S: Send + Sync> FromRequestParts<S> for RunPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| {
                ApiError::invalid(StatusCode::BAD_REQUEST, rejection.body_text())
            })?;
        text.parse::<RunId>().map(RunPath).map_err(|_| {
            ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!("`{text}` is not a run id (a UUID such as 0191d7c8-…)"),
            )
        })
    }
}

/// Refuses a body whose run id is not the path's: the route names the run it writes.
pub(crate) fn same_run(path: RunId, body: RunId) -> Result<(), ApiError> {
    if path == body {
        Ok(())
    } else {
        Err(ApiError::invalid(
            StatusCode::BAD_REQUEST,
            format!("the path names run {path} but the body's record belongs to run {body}"),
        ))
    }
}

/// The answer to a route that is not one of the API's.
pub(crate) async fn no_route() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        body: ErrorBody::new(
            aiki_store::api::NO_ROUTE,
            "no such route: the API's routes are under /api/v1 (see the API reference)",
            json!({}),
        ),
    }
}

/// The answer to a route of the API asked with a method it does not take.
pub(crate) async fn wrong_method() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        body: ErrorBody::new(
            "method_not_allowed",
            "this route does not take this method (see the API reference)",
            json!({}),
        ),
    }
}
