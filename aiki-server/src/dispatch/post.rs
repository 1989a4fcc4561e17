//! One delivery: the run's id posted to its endpoint, signed afresh, and what came of it.

use std::time::Duration;

use aiki_store::push::{PushAnswer, PushBody, SIGNATURE_HEADER, sign};
use aiki_store::{EndpointRecord, RunId};

use super::unix_ms;

/// How much longer than an endpoint's budget the dispatcher waits for its answer before it
/// counts the delivery as lost.
pub const ANSWER_MARGIN: Duration = Duration::from_secs(10);

/// What came of one delivery.
#[derive(Debug)]
pub(super) enum Posted {
    /// The endpoint executed the run (200), or found it claimed (409): delivered.
    Delivered(Option<PushAnswer>),
    /// Refused or failed: deliver again after a backoff. The reason, for the log.
    Retry(String),
}

/// Posts `run` to `endpoint`, signed with its active secrets at the current time.
pub(super) async fn post(
    client: &reqwest::Client,
    endpoint: &EndpointRecord,
    run: RunId,
) -> Posted {
    let body = PushBody {
        run_id: run,
        workflow: endpoint.namespace.workflow.clone(),
        version: endpoint.namespace.version.clone(),
    };
    let body = serde_json::to_vec(&body).expect("a delivery serializes");
    let now = unix_ms();
    let secrets: Vec<&str> = endpoint
        .active_secrets(now)
        .map(|secret| secret.secret.as_str())
        .collect();
    if secrets.is_empty() {
        return Posted::Retry(format!(
            "the endpoint of {} has no active secret: rotate it (`aiki endpoints rotate`)",
            endpoint.namespace
        ));
    }
    let wait =
        Duration::from_millis(u64::try_from(endpoint.budget_ms).unwrap_or(0)) + ANSWER_MARGIN;
    let sent = client
        .post(&endpoint.url)
        .header(SIGNATURE_HEADER, sign(&secrets, now, &body))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .timeout(wait)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(error) if error.is_timeout() => {
            return Posted::Retry(format!(
                "no answer within the budget and a margin ({wait:?}): counted as lost"
            ));
        }
        Err(error) => return Posted::Retry(format!("could not post: {error}")),
    };
    let status = response.status();
    match status.as_u16() {
        200 => Posted::Delivered(response.json::<PushAnswer>().await.ok()),
        409 => Posted::Delivered(None),
        _ => {
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(300).collect();
            Posted::Retry(format!("answered {status}: {text}"))
        }
    }
}
