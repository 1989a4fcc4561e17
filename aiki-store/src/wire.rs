//! The wire form of errors: one stable code per kind, the message, and the kind's fields, so
//! that a remote client (the HTTP API's, a dashboard) tells kinds apart without parsing text,
//! and gets the same [`StoreError`] back.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{RunId, RunStatus, StoreError};

/// An error as a JSON body: `{"code", "message", "details"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ErrorBody {
    /// What kind of error, in `snake_case`: stable, one per kind.
    pub code: String,
    /// What happened and what to do, for people.
    pub message: String,
    /// The kind's fields (a run id, revisions, statuses), for programs; `{}` when none.
    #[serde(default)]
    pub details: Value,
}

impl ErrorBody {
    /// A body of `code` with `message` and `details`.
    pub fn new(code: impl Into<String>, message: impl Into<String>, details: Value) -> Self {
        ErrorBody {
            code: code.into(),
            message: message.into(),
            details,
        }
    }
}

/// The codes of the runtime's own refusals (`aiki::ClientError`'s) that an aiki server answers
/// (422): a body of one of them is read back as [`StoreError::Refused`], which `aiki` turns into
/// the same `ClientError` kind. They are not store codes ([`StoreError::CODES`]).
pub const RUNTIME_CODES: &[&str] = &["invalid_input", "unknown_event", "not_in_catalog"];

impl StoreError {
    /// Every code a store error has (see [`code`](StoreError::code)), in declaration order.
    pub const CODES: &'static [&'static str] = &[
        "not_found",
        "revision_conflict",
        "pause_requested",
        "invalid_request",
        "invalid_transition",
        "already_exists",
        "store_unavailable",
        "migration_failed",
        "schema_mismatch",
        "unsupported_url",
        "cannot_open",
        "incompatible_record",
        "corrupt_record",
        "unauthorized",
        "forbidden",
        "rate_limited",
        "too_large",
        "idempotency_key_reused",
        "backend_error",
    ];

    /// The error's stable code (see [`ErrorBody::code`]); a [`StoreError::Refused`] keeps the
    /// runtime's.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Refused { code, .. } => code,
            StoreError::NotFound { .. } => "not_found",
            StoreError::RevisionConflict { .. } => "revision_conflict",
            StoreError::PauseRequested { .. } => "pause_requested",
            StoreError::Invalid { .. } => "invalid_request",
            StoreError::InvalidTransition { .. } => "invalid_transition",
            StoreError::AlreadyExists { .. } => "already_exists",
            StoreError::Unavailable { .. } => "store_unavailable",
            StoreError::Migration { .. } => "migration_failed",
            StoreError::Schema { .. } => "schema_mismatch",
            StoreError::UnsupportedUrl { .. } => "unsupported_url",
            StoreError::CannotOpen { .. } => "cannot_open",
            StoreError::Incompatible { .. } => "incompatible_record",
            StoreError::Corrupt { .. } => "corrupt_record",
            StoreError::Unauthorized { .. } => "unauthorized",
            StoreError::Forbidden { .. } => "forbidden",
            StoreError::RateLimited { .. } => "rate_limited",
            StoreError::TooLarge { .. } => "too_large",
            StoreError::KeyReused { .. } => "idempotency_key_reused",
            StoreError::Backend { .. } => "backend_error",
        }
    }

    /// The error as a wire body.
    pub fn to_body(&self) -> ErrorBody {
        let details = match self {
            StoreError::NotFound { what } => json!({ "what": what }),
            StoreError::RevisionConflict {
                run_id,
                expected,
                actual,
            } => json!({ "run_id": run_id, "expected": expected, "actual": actual }),
            StoreError::PauseRequested { run_id } => json!({ "run_id": run_id }),
            StoreError::InvalidTransition { run_id, from, to } => {
                json!({ "run_id": run_id, "from": from, "to": to })
            }
            StoreError::AlreadyExists { what } => json!({ "what": what }),
            StoreError::TooLarge { what, bytes, limit } => {
                json!({ "what": what, "bytes": bytes, "limit": limit })
            }
            StoreError::UnsupportedUrl { url, reason } | StoreError::CannotOpen { url, reason } => {
                json!({ "url": url, "reason": reason })
            }
            StoreError::Invalid { message }
            | StoreError::Migration { message }
            | StoreError::Schema { message }
            | StoreError::Incompatible { message }
            | StoreError::Corrupt { message }
            | StoreError::Unauthorized { message }
            | StoreError::Forbidden { message }
            | StoreError::RateLimited { message }
            | StoreError::KeyReused { message }
            | StoreError::Unavailable { message, .. } => json!({ "message": message }),
            StoreError::Backend { source } => json!({ "message": source.to_string() }),
            StoreError::Refused { details, .. } => details.clone(),
        };
        ErrorBody::new(self.code(), self.to_string(), details)
    }

    /// The error a wire body stands for: the same kind and fields (a driver error's source
    /// becomes its message). A code this release does not know is [`StoreError::Backend`].
    pub fn from_body(body: &ErrorBody) -> StoreError {
        let d = &body.details;
        let text = |key: &str| d[key].as_str().map(str::to_owned);
        let message = || text("message").unwrap_or_else(|| body.message.clone());
        let run_id = || d["run_id"].as_str().and_then(|id| id.parse::<RunId>().ok());
        let status = |key: &str| {
            d[key]
                .as_str()
                .and_then(|status| status.parse::<RunStatus>().ok())
        };
        let number = |key: &str| d[key].as_u64();
        let known = match body.code.as_str() {
            "not_found" => text("what").map(|what| StoreError::NotFound { what }),
            "revision_conflict" => run_id().zip(number("expected")).zip(number("actual")).map(
                |((run_id, expected), actual)| StoreError::RevisionConflict {
                    run_id,
                    expected,
                    actual,
                },
            ),
            "pause_requested" => run_id().map(|run_id| StoreError::PauseRequested { run_id }),
            "invalid_transition" => run_id()
                .zip(status("from"))
                .zip(status("to"))
                .map(|((run_id, from), to)| StoreError::InvalidTransition { run_id, from, to }),
            "already_exists" => text("what").map(|what| StoreError::AlreadyExists { what }),
            "too_large" => text("what")
                .zip(number("bytes"))
                .zip(number("limit"))
                .map(|((what, bytes), limit)| StoreError::TooLarge { what, bytes, limit }),
            "unsupported_url" => text("url")
                .zip(text("reason"))
                .map(|(url, reason)| StoreError::UnsupportedUrl { url, reason }),
            "cannot_open" => text("url")
                .zip(text("reason"))
                .map(|(url, reason)| StoreError::CannotOpen { url, reason }),
            "invalid_request" => Some(StoreError::Invalid { message: message() }),
            "migration_failed" => Some(StoreError::Migration { message: message() }),
            "schema_mismatch" => Some(StoreError::Schema { message: message() }),
            "incompatible_record" => Some(StoreError::Incompatible { message: message() }),
            "corrupt_record" => Some(StoreError::Corrupt { message: message() }),
            "unauthorized" => Some(StoreError::Unauthorized { message: message() }),
            "forbidden" => Some(StoreError::Forbidden { message: message() }),
            "rate_limited" => Some(StoreError::RateLimited { message: message() }),
            "idempotency_key_reused" => Some(StoreError::KeyReused { message: message() }),
            "store_unavailable" => Some(StoreError::Unavailable {
                message: message(),
                source: None,
            }),
            "backend_error" => Some(StoreError::Backend {
                source: message().into(),
            }),
            code => RUNTIME_CODES
                .iter()
                .find(|known| **known == code)
                .map(|code| StoreError::Refused {
                    code,
                    message: body.message.clone(),
                    details: d.clone(),
                }),
        };
        known.unwrap_or_else(|| StoreError::Backend {
            source: body.message.clone().into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind, with its code: the codes are a contract with remote clients, pinned here.
    fn every_kind() -> Vec<(StoreError, &'static str)> {
        let run_id = RunId::new();
        vec![
            (
                StoreError::NotFound {
                    what: "run x".into(),
                },
                "not_found",
            ),
            (
                StoreError::RevisionConflict {
                    run_id,
                    expected: 4,
                    actual: 6,
                },
                "revision_conflict",
            ),
            (StoreError::PauseRequested { run_id }, "pause_requested"),
            (
                StoreError::Invalid {
                    message: "bad cursor".into(),
                },
                "invalid_request",
            ),
            (
                StoreError::InvalidTransition {
                    run_id,
                    from: RunStatus::Completed,
                    to: RunStatus::Queued,
                },
                "invalid_transition",
            ),
            (
                StoreError::AlreadyExists {
                    what: "run y".into(),
                },
                "already_exists",
            ),
            (
                StoreError::Unavailable {
                    message: "connection refused".into(),
                    source: None,
                },
                "store_unavailable",
            ),
            (
                StoreError::Migration {
                    message: "m".into(),
                },
                "migration_failed",
            ),
            (
                StoreError::Schema {
                    message: "s".into(),
                },
                "schema_mismatch",
            ),
            (
                StoreError::UnsupportedUrl {
                    url: "ftp://x".into(),
                    reason: "no".into(),
                },
                "unsupported_url",
            ),
            (
                StoreError::CannotOpen {
                    url: "sqlite://a/b".into(),
                    reason: "no folder".into(),
                },
                "cannot_open",
            ),
            (
                StoreError::Incompatible {
                    message: "i".into(),
                },
                "incompatible_record",
            ),
            (
                StoreError::Corrupt {
                    message: "c".into(),
                },
                "corrupt_record",
            ),
            (
                StoreError::Unauthorized {
                    message: "no key".into(),
                },
                "unauthorized",
            ),
            (
                StoreError::Forbidden {
                    message: "no scope".into(),
                },
                "forbidden",
            ),
            (
                StoreError::RateLimited {
                    message: "slow down".into(),
                },
                "rate_limited",
            ),
            (
                StoreError::TooLarge {
                    what: "the output of run x".into(),
                    bytes: 3 << 20,
                    limit: 2 << 20,
                },
                "too_large",
            ),
            (
                StoreError::KeyReused {
                    message: "key k".into(),
                },
                "idempotency_key_reused",
            ),
            (
                StoreError::Backend {
                    source: "driver".into(),
                },
                "backend_error",
            ),
        ]
    }

    #[test]
    fn each_kind_has_its_own_stable_code_and_comes_back_from_its_body() {
        let kinds = every_kind();
        let mut codes: Vec<&str> = kinds.iter().map(|(_, code)| *code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), kinds.len(), "one code per kind");
        let mut listed = StoreError::CODES.to_vec();
        listed.sort_unstable();
        assert_eq!(codes, listed, "CODES lists every kind's code");
        for (error, code) in kinds {
            assert_eq!(error.code(), code);
            let body = error.to_body();
            assert_eq!(body.message, error.to_string());
            let wire = serde_json::to_string(&body).unwrap();
            let back = StoreError::from_body(&serde_json::from_str(&wire).unwrap());
            assert_eq!(back.code(), code, "{wire}");
            assert_eq!(back.to_string(), error.to_string(), "{wire}");
        }
    }

    #[test]
    fn a_refusal_of_the_runtimes_own_comes_back_as_refused_with_its_code() {
        for code in RUNTIME_CODES {
            let details = json!({"what": "input of a@1", "message": "not an integer"});
            let body = ErrorBody::new(*code, "invalid input of a@1: not an integer", details);
            let error = StoreError::from_body(&body);
            assert!(
                matches!(&error, StoreError::Refused { code: got, .. } if got == code),
                "{error:?}"
            );
            assert_eq!(error.code(), *code);
            assert_eq!(error.to_body(), body, "the same body on the way out");
            assert_eq!(crate::api::status_of(&error), 422);
            assert!(!error.is_transient());
        }
        for code in RUNTIME_CODES {
            assert!(
                !StoreError::CODES.contains(code),
                "`{code}` is a store code"
            );
        }
    }

    #[test]
    fn an_unknown_code_is_a_backend_error_with_the_message() {
        let body = ErrorBody::new("from_the_future", "something new", json!({}));
        let error = StoreError::from_body(&body);
        assert_eq!(error.code(), "backend_error");
        assert!(error.to_string().contains("something new"));
    }
}
