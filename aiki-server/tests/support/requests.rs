//! Requests as a client that gets them wrong sends them: raw bodies to a server on a memory
//! store, and the error body each is answered with.

use std::time::Duration;

use aiki::ManualClock;
use aiki_server::ServerConfig;
use aiki_store::prelude::*;
use aiki_store::{CreateOutcome, ErrorBody, Namespace, NewRun, RunId, RunRecord};
use serde_json::json;

use super::remote::Remote;

/// The time the servers' clocks stand at.
pub const NOW: i64 = 4_000_000_000_000;

/// A server on a memory store with a small body limit.
pub async fn server() -> Remote {
    let config = ServerConfig::default()
        .clock(ManualClock::new(NOW))
        .body_limit(16 * 1024)
        .request_timeout(Duration::from_secs(5))
        .insecure_no_auth();
    Remote::start(aiki_store::connect("memory:").await.unwrap(), config).await
}

/// A server on a memory store with the default body limit, for bodies of many records.
pub async fn roomy_server() -> Remote {
    let config = ServerConfig::default()
        .clock(ManualClock::new(NOW))
        .request_timeout(Duration::from_secs(5))
        .insecure_no_auth();
    Remote::start(aiki_store::connect("memory:").await.unwrap(), config).await
}

/// A queued run of a namespace of its own.
pub async fn queued_run(remote: &Remote) -> RunRecord {
    let run = NewRun::new(
        Namespace::new(format!("bad-input-{}", RunId::new()), "1.0.0"),
        json!({"order": 1}),
        super::routes::hash(&json!({"order": 1})),
        NOW,
    );
    match remote.create_run(run).await.expect("create_run") {
        CreateOutcome::Created(run) => run,
        other => panic!("a new run, got {other:?}"),
    }
}

/// Sends `body` (raw bytes, with `content_type` if any) and returns the status and the error
/// body, checking it is the contract's.
pub async fn send(
    remote: &Remote,
    method: reqwest::Method,
    path: &str,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> (u16, ErrorBody) {
    let url = format!("{}/api/v1{path}", remote.url());
    let mut request = reqwest::Client::new().request(method, url).body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    let body: ErrorBody = serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{status}: not an error body ({error}): {text}"));
    assert!(!body.message.is_empty(), "the message says what is wrong");
    (status, body)
}

/// Posts `body` as JSON; the status and the error body.
pub async fn post_json(remote: &Remote, path: &str, body: &str) -> (u16, ErrorBody) {
    send(
        remote,
        reqwest::Method::POST,
        path,
        Some("application/json"),
        body.to_owned(),
    )
    .await
}

/// The run, its history and its timeline, to compare before and after a refused request.
pub async fn snapshot(remote: &Remote, id: RunId) -> (RunRecord, usize, usize, usize) {
    let store = remote.backing();
    let history = store.load_history(id).await.expect("history");
    let timeline = store.timeline(id).await.expect("timeline");
    (
        history.run.clone(),
        history.entries.len(),
        history.events.len(),
        timeline.len(),
    )
}
