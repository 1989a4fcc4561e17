//! A client error on the wire: its stable code, its body, and a store error an aiki server
//! answered read back as the client error it stands for.

use aiki_store::StoreError;

use super::ClientError;

impl ClientError {
    /// Every code a client error of its own has (see [`code`](ClientError::code)); a store
    /// error keeps its code (one of [`StoreError::CODES`]).
    pub const CODES: &'static [&'static str] = &[
        "reference_conflict",
        "invalid_input",
        "unknown_event",
        "not_in_catalog",
        "blocked",
        "not_registered",
        "fork_refused",
        "ended_in_other_status",
        "wrong_workflow",
        "output_mismatch",
        "invalid_action",
        "interrupted_task",
        "observed_by_parent",
        "retry_would_fail_again",
        "child_not_retryable",
        "shared_child_dropped",
        "claim_not_stale",
        "unknown_address",
        "run_ended",
        "timeout",
        "invalid_config",
    ];

    /// The error's stable code on the wire (one per kind; a store error keeps its own).
    pub fn code(&self) -> &'static str {
        match self {
            ClientError::Store(error) => error.code(),
            ClientError::ReferenceConflict { .. } => "reference_conflict",
            ClientError::InvalidInput { .. } => "invalid_input",
            ClientError::UnknownEvent { .. } => "unknown_event",
            ClientError::NotInCatalog { .. } => "not_in_catalog",
            ClientError::Blocked { .. } => "blocked",
            ClientError::NotRegistered { .. } => "not_registered",
            ClientError::ForkRefused { .. } => "fork_refused",
            ClientError::EndedInOtherStatus { .. } => "ended_in_other_status",
            ClientError::WrongWorkflow { .. } => "wrong_workflow",
            ClientError::OutputMismatch { .. } => "output_mismatch",
            ClientError::InvalidAction { .. } => "invalid_action",
            ClientError::InterruptedTask { .. } => "interrupted_task",
            ClientError::ObservedByParent { .. } => "observed_by_parent",
            ClientError::RetryWouldFailAgain { .. } => "retry_would_fail_again",
            ClientError::ChildNotRetryable { .. } => "child_not_retryable",
            ClientError::SharedChildDropped { .. } => "shared_child_dropped",
            ClientError::ClaimNotStale { .. } => "claim_not_stale",
            ClientError::UnknownAddress { .. } => "unknown_address",
            ClientError::RunEnded { .. } => "run_ended",
            ClientError::Timeout(_) => "timeout",
            ClientError::Config(_) => "invalid_config",
        }
    }

    /// The error as a wire body: its code, its message, and its fields.
    pub fn to_body(&self) -> aiki_store::ErrorBody {
        use serde_json::json;
        let details = match self {
            ClientError::Store(error) => return error.to_body(),
            ClientError::ReferenceConflict {
                namespace,
                reference_id,
                existing,
            } => {
                json!({"namespace": namespace, "reference_id": reference_id, "existing": existing})
            }
            ClientError::InvalidInput { what, message } => {
                json!({"what": what, "message": message})
            }
            ClientError::UnknownEvent {
                namespace,
                event,
                declared,
            } => json!({"namespace": namespace, "event": event, "declared": declared}),
            ClientError::NotInCatalog { namespace, known } => {
                json!({"namespace": namespace, "known": known})
            }
            ClientError::NotRegistered { namespace } => json!({"namespace": namespace}),
            ClientError::Blocked { run_id, status, .. } => {
                json!({"run_id": run_id, "status": status})
            }
            ClientError::ForkRefused {
                run_id,
                namespace,
                diverging,
                ..
            } => json!({"run_id": run_id, "namespace": namespace, "diverging": diverging}),
            ClientError::EndedInOtherStatus {
                run_id,
                status,
                wanted,
                error,
            } => json!({"run_id": run_id, "status": status, "wanted": wanted, "error": error}),
            ClientError::WrongWorkflow {
                run_id,
                expected,
                actual,
            } => json!({"run_id": run_id, "expected": expected, "actual": actual}),
            ClientError::OutputMismatch { run_id, .. } => json!({"run_id": run_id}),
            ClientError::InvalidAction {
                run_id,
                action,
                status,
                expected,
            } => {
                json!({"run_id": run_id, "action": action, "status": status, "expected": expected})
            }
            ClientError::InterruptedTask { run_id, call } => {
                json!({"run_id": run_id, "call": call})
            }
            ClientError::ObservedByParent { run_id, parent } => {
                json!({"run_id": run_id, "parent": parent})
            }
            ClientError::RetryWouldFailAgain {
                run_id,
                child,
                status,
            }
            | ClientError::ChildNotRetryable {
                run_id,
                child,
                status,
            } => json!({"run_id": run_id, "child": child, "status": status}),
            ClientError::SharedChildDropped {
                run_id,
                address,
                reference_id,
            } => json!({"run_id": run_id, "address": address, "reference_id": reference_id}),
            ClientError::ClaimNotStale {
                run_id,
                owner,
                allowed_at,
                release_due,
            } => json!({"run_id": run_id, "owner": owner, "allowed_at": allowed_at,
                "release_due": release_due}),
            ClientError::UnknownAddress { run_id, address } => {
                json!({"run_id": run_id, "address": address})
            }
            ClientError::RunEnded { run_id, status } => json!({"run_id": run_id, "status": status}),
            ClientError::Timeout(after) => json!({"after_ms": after.as_millis() as u64}),
            ClientError::Config(_) => json!({}),
        };
        aiki_store::ErrorBody::new(self.code(), self.to_string(), details)
    }
}

impl From<StoreError> for ClientError {
    /// The store's error, except a refusal of the runtime's own that an aiki server answered
    /// ([`StoreError::Refused`]): that is the [`ClientError`] kind the server refused with, as
    /// a client on the store itself would have got it.
    fn from(error: StoreError) -> Self {
        let StoreError::Refused {
            code,
            message,
            details,
        } = error
        else {
            return ClientError::Store(error);
        };
        let field = |key: &str| details[key].as_str().map(str::to_owned);
        let kind = match code {
            "invalid_input" => field("what")
                .zip(field("message"))
                .map(|(what, message)| ClientError::InvalidInput { what, message }),
            "unknown_event" => field("namespace")
                .zip(field("event"))
                .map(|(namespace, event)| ClientError::UnknownEvent {
                    namespace,
                    event,
                    declared: field("declared").unwrap_or_default(),
                }),
            "not_in_catalog" => field("namespace").map(|namespace| ClientError::NotInCatalog {
                namespace,
                known: field("known").unwrap_or_default(),
            }),
            _ => None,
        };
        kind.unwrap_or(ClientError::Store(StoreError::Refused {
            code,
            message,
            details,
        }))
    }
}

#[cfg(test)]
mod codes {
    use aiki_store::{RunId, RunStatus};

    use super::*;

    /// One error of every kind.
    fn every_kind() -> Vec<ClientError> {
        let run_id = RunId::new();
        let text = || "x".to_owned();
        let status = RunStatus::Failed;
        vec![
            ClientError::Store(StoreError::NotFound { what: text() }),
            ClientError::ReferenceConflict {
                namespace: "a@1".into(),
                reference_id: "r".into(),
                existing: run_id,
            },
            ClientError::InvalidInput {
                what: "input".into(),
                message: "bad".into(),
            },
            ClientError::UnknownEvent {
                namespace: text(),
                event: text(),
                declared: text(),
            },
            ClientError::NotInCatalog {
                namespace: text(),
                known: text(),
            },
            ClientError::Blocked {
                run_id,
                status,
                waits: text(),
            },
            ClientError::NotRegistered { namespace: text() },
            ClientError::ForkRefused {
                run_id,
                namespace: text(),
                problem: text(),
                diverging: vec![text()],
            },
            ClientError::EndedInOtherStatus {
                run_id,
                status,
                wanted: RunStatus::Completed,
                error: None,
            },
            ClientError::WrongWorkflow {
                run_id,
                expected: text(),
                actual: text(),
            },
            ClientError::OutputMismatch {
                run_id,
                message: text(),
            },
            ClientError::InvalidAction {
                run_id,
                action: "retry",
                status,
                expected: vec![RunStatus::Failed],
            },
            ClientError::InterruptedTask {
                run_id,
                call: aiki_store::CallRef::new("t:1", 0),
            },
            ClientError::ObservedByParent {
                run_id,
                parent: run_id,
            },
            ClientError::RetryWouldFailAgain {
                run_id,
                child: run_id,
                status,
            },
            ClientError::ChildNotRetryable {
                run_id,
                child: run_id,
                status,
            },
            ClientError::SharedChildDropped {
                run_id,
                address: text(),
                reference_id: text(),
            },
            ClientError::ClaimNotStale {
                run_id,
                owner: text(),
                allowed_at: None,
                release_due: None,
            },
            ClientError::UnknownAddress {
                run_id,
                address: text(),
            },
            ClientError::RunEnded {
                run_id,
                status: RunStatus::Completed,
            },
            ClientError::Timeout(std::time::Duration::from_secs(1)),
            ClientError::Config(text()),
        ]
    }

    /// A refusal of the runtime's own that a server answers comes back through `HttpStore`
    /// (its body read as a [`StoreError`]) as the same kind, with the same message and fields.
    #[test]
    fn a_refusal_a_server_answered_comes_back_as_its_kind() {
        let refusals = every_kind()
            .into_iter()
            .filter(|error| aiki_store::RUNTIME_CODES.contains(&error.code()));
        let mut seen = Vec::new();
        for error in refusals {
            let body = error.to_body();
            let back = ClientError::from(StoreError::from_body(&body));
            assert_eq!(back.code(), error.code(), "{back:?}");
            assert_eq!(back.to_string(), error.to_string());
            assert_eq!(back.to_body(), body);
            seen.push(error.code());
        }
        assert_eq!(
            seen,
            aiki_store::RUNTIME_CODES,
            "every runtime code is a client code"
        );
    }

    /// The codes are a contract with remote clients: one per kind, listed in `CODES`, none
    /// taken from the store's (a client must tell the two apart by code alone).
    #[test]
    fn each_client_error_kind_has_its_own_code() {
        let errors = every_kind();
        let codes: Vec<&str> = errors.iter().skip(1).map(ClientError::code).collect();
        assert_eq!(codes, ClientError::CODES, "every kind's code, in order");
        let mut distinct = codes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), codes.len(), "one code per kind");
        for code in &codes {
            assert!(
                !StoreError::CODES.contains(code),
                "`{code}` is also a store error's code"
            );
        }
        assert_eq!(
            errors[0].code(),
            "not_found",
            "a store error keeps its code"
        );
        let ended = &errors[errors.len() - 3];
        let body = ended.to_body();
        assert_eq!(body.code, "run_ended");
        assert_eq!(body.details["status"], "completed");
        assert_eq!(body.message, ended.to_string());
        for error in &errors {
            assert_eq!(error.to_body().code, error.code(), "{error}");
        }
    }
}
