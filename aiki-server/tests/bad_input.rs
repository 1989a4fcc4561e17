//! Every way a request can be wrong is answered with the error body and the right status, and
//! leaves the store as it was; the server's clock, not the caller's, dates what it writes.

use crate::support;

mod owned;
mod values;

use std::time::Duration;

use aiki::ManualClock;
use aiki_server::ServerConfig;
use aiki_store::prelude::*;
use aiki_store::{CreateOutcome, Namespace, NewEvent, NewRun, RunId, RunStatus, Transition};
use serde_json::{Value, json};
use support::remote::Remote;

use support::requests::{NOW, post_json, queued_run, send, server, snapshot};

#[tokio::test]
async fn malformed_bodies_are_refused_with_their_status_and_write_nothing() {
    let remote = server().await;
    let run = queued_run(&remote).await;
    let before = snapshot(&remote, run.id).await;
    let events = format!("/runs/{}/events", run.id);
    let (status, body) = post_json(&remote, &events, "{\"name\": ").await;
    assert_eq!(
        (status, body.code.as_str()),
        (400, "invalid_request"),
        "{body:?}"
    );
    let (status, body) = post_json(&remote, &events, "{\"name\": 7}").await;
    assert_eq!(
        (status, body.code.as_str()),
        (422, "invalid_request"),
        "{body:?}"
    );
    assert!(body.message.contains("name"), "names the field: {body:?}");
    let (status, body) = send(
        &remote,
        reqwest::Method::POST,
        &events,
        None,
        "{}".to_owned(),
    )
    .await;
    assert_eq!(
        (status, body.code.as_str()),
        (415, "invalid_request"),
        "{body:?}"
    );
    let big = serde_json::to_string(&NewEvent::new(
        run.id,
        "big",
        Value::String("x".repeat(32 * 1024)),
        NOW,
    ))
    .unwrap();
    let (status, body) = post_json(&remote, &events, &big).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );
}

/// A server as `aiki server` starts one: the default body limit (4 MiB), above the store's
/// payload limit (2 MiB).
async fn server_with_default_limits() -> Remote {
    let config = ServerConfig::default()
        .clock(ManualClock::new(NOW))
        .request_timeout(Duration::from_secs(10))
        .insecure_no_auth();
    Remote::start(aiki_store::connect("memory:").await.unwrap(), config).await
}

/// A JSON string whose text is `bytes` long.
fn text_of(bytes: usize) -> Value {
    Value::String("x".repeat(bytes - 2))
}

/// A payload over the store's limit is refused by the store behind the server, a body over
/// the server's limit by the server: both with 413 and the `too_large` body naming what, its
/// size and the limit, which `HttpStore` turns back into `StoreError::TooLarge`; nothing is
/// written. A payload at the store's limit fits in one request and is kept.
#[tokio::test]
async fn payloads_over_the_limits_are_too_large_and_write_nothing() {
    use aiki_store::limit::DEFAULT_PAYLOAD_LIMIT;
    let remote = server_with_default_limits().await;
    let limit = DEFAULT_PAYLOAD_LIMIT as u64;
    let namespace = Namespace::new(format!("too-large-{}", RunId::new()), "1.0.0");

    // A run's input one byte over the store's limit.
    let big = support::routes::new_run(&namespace, text_of(DEFAULT_PAYLOAD_LIMIT + 1));
    let id = big.id;
    let (status, body) = post_json(&remote, "/runs", &serde_json::to_string(&big).unwrap()).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    assert_eq!(body.details["bytes"], json!(limit + 1), "{body:?}");
    assert_eq!(body.details["limit"], json!(limit), "{body:?}");
    let what = body.details["what"].as_str().unwrap_or_default();
    assert!(
        what.contains("input of run") && what.contains(&id.to_string()),
        "{body:?}"
    );
    assert!(
        body.message.contains("reference"),
        "says what to do: {body:?}"
    );
    assert!(
        remote.backing().get_run(id).await.is_err(),
        "no run was created"
    );

    // At the limit: one request carries it, and the store keeps it.
    let fits = support::routes::new_run(&namespace, text_of(DEFAULT_PAYLOAD_LIMIT));
    let run = match remote
        .create_run(fits)
        .await
        .expect("an input at the limit")
    {
        CreateOutcome::Created(run) => run,
        other => panic!("a new run, got {other:?}"),
    };
    let before = snapshot(&remote, run.id).await;

    // An event payload over the store's limit, straight and through `HttpStore`.
    let events = format!("/runs/{}/events", run.id);
    let event = NewEvent::new(run.id, "upload", text_of(DEFAULT_PAYLOAD_LIMIT + 1), NOW);
    let (status, body) = post_json(&remote, &events, &serde_json::to_string(&event).unwrap()).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    match remote.append_event(event).await {
        Err(aiki_store::StoreError::TooLarge {
            bytes, limit: at, ..
        }) => assert_eq!((bytes, at), (limit + 1, limit)),
        other => panic!("expected TooLarge through HttpStore, got {other:?}"),
    }

    // A body over the server's own limit (4 MiB): refused before the store sees it.
    let huge = NewEvent::new(run.id, "upload", text_of(5 << 20), NOW);
    let text = serde_json::to_string(&huge).unwrap();
    let (status, body) = post_json(&remote, &events, &text).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    assert_eq!(body.details["bytes"], json!(text.len()), "{body:?}");
    assert_eq!(body.details["limit"], json!(4 << 20), "{body:?}");
    assert!(
        body.details["what"]
            .as_str()
            .is_some_and(|what| what.contains("request body")),
        "{body:?}"
    );
    match remote.append_event(huge).await {
        Err(aiki_store::StoreError::TooLarge { limit, .. }) => assert_eq!(limit, 4 << 20),
        other => panic!("expected TooLarge through HttpStore, got {other:?}"),
    }
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );
}

#[tokio::test]
async fn a_path_that_names_no_run_or_another_run_is_refused() {
    let remote = server().await;
    let run = queued_run(&remote).await;
    let before = snapshot(&remote, run.id).await;
    let (status, body) = send(&remote, reqwest::Method::GET, "/runs/not-a-run", None, "").await;
    assert_eq!(
        (status, body.code.as_str()),
        (400, "invalid_request"),
        "{body:?}"
    );
    let unknown = RunId::new();
    let (status, body) = send(
        &remote,
        reqwest::Method::GET,
        &format!("/runs/{unknown}"),
        None,
        "",
    )
    .await;
    assert_eq!((status, body.code.as_str()), (404, "not_found"), "{body:?}");
    // An event for this run, posted to another run's path.
    let event = serde_json::to_string(&NewEvent::new(run.id, "go", json!(1), NOW)).unwrap();
    let (status, body) = post_json(&remote, &format!("/runs/{unknown}/events"), &event).await;
    assert_eq!(
        (status, body.code.as_str()),
        (400, "invalid_request"),
        "{body:?}"
    );
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );
    let (status, body) = send(&remote, reqwest::Method::GET, "/nowhere", None, "").await;
    assert_eq!((status, body.code.as_str()), (404, "no_route"), "{body:?}");
    let (status, body) = send(&remote, reqwest::Method::DELETE, "/runs", None, "").await;
    assert_eq!(
        (status, body.code.as_str()),
        (405, "method_not_allowed"),
        "{body:?}"
    );
    let (status, body) = send(
        &remote,
        reqwest::Method::PUT,
        "/config/noSuchKey",
        Some("application/json"),
        json!({"value": 1, "now": NOW}).to_string(),
    )
    .await;
    assert_eq!(
        (status, body.code.as_str()),
        (400, "invalid_request"),
        "{body:?}"
    );
    assert!(body.message.contains("noSuchKey"), "{body:?}");
}

#[tokio::test]
async fn a_stale_revision_is_a_conflict_with_its_details_and_writes_nothing() {
    let remote = server().await;
    let run = queued_run(&remote).await;
    let before = snapshot(&remote, run.id).await;
    let stale = json!({
        "expected": run.revision + 5,
        "transition": Transition::to(RunStatus::Cancelled, NOW),
    });
    let (status, body) = post_json(
        &remote,
        &format!("/runs/{}/transition", run.id),
        &stale.to_string(),
    )
    .await;
    assert_eq!(
        (status, body.code.as_str()),
        (409, "revision_conflict"),
        "{body:?}"
    );
    assert_eq!(body.details["expected"], json!(run.revision + 5));
    assert_eq!(body.details["actual"], json!(run.revision));
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );
    // The same through HttpStore: the kind comes back.
    let error = remote
        .transition(
            run.id,
            run.revision + 5,
            Transition::to(RunStatus::Cancelled, NOW),
        )
        .await
        .expect_err("a conflict");
    assert!(error.is_conflict(), "{error:?}");
}

#[tokio::test]
async fn the_servers_clock_dates_what_a_caller_writes() {
    let remote = server().await;
    // A caller whose clock is an hour behind the server's.
    let behind = NOW - 3_600_000;
    let run = NewRun::new(
        Namespace::new(format!("clock-{}", RunId::new()), "1.0.0"),
        json!(null),
        support::routes::hash(&json!(null)),
        behind,
    );
    let CreateOutcome::Created(run) = remote.create_run(run).await.unwrap() else {
        panic!("a new run");
    };
    assert_eq!(run.queued_at, Some(NOW), "queued at the server's time");
    let timeline = remote.timeline(run.id).await.unwrap();
    assert!(
        timeline.iter().all(|change| change.at == NOW),
        "every change at the server's time: {timeline:?}"
    );
    let cancelled = remote
        .act(run.id, aiki_store::RunAction::Cancel, None, behind)
        .await
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let timeline = remote.timeline(run.id).await.unwrap();
    assert_eq!(
        timeline.last().map(|change| change.at),
        Some(NOW),
        "{timeline:?}"
    );
}

#[tokio::test]
async fn metrics_are_prometheus_text_with_the_queue() {
    let remote = server().await;
    queued_run(&remote).await;
    let response = reqwest::get(format!("{}/api/v1/metrics", remote.url()))
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    assert!(text.contains("aiki_queue_depth"), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
}

#[tokio::test]
async fn starts_and_events_are_checked_against_the_catalog() {
    let remote = server().await;
    let namespace = Namespace::new(format!("catalogued-{}", RunId::new()), "1.0.0");
    let schema = |value: Value| aiki_store::SchemaRecord::new(value, "f");
    let mut entry = aiki_store::CatalogEntry::new(
        namespace.clone(),
        schema(
            json!({"type": "object", "properties": {"order": {"type": "integer"}},
                       "required": ["order"]}),
        ),
        schema(json!({})),
    );
    entry.events = vec![aiki_store::EventDeclaration::new(
        "paid",
        schema(json!({"type": "integer"})),
    )];
    remote.backing().publish_catalog(entry, NOW).await.unwrap();
    let start = |input: Value| {
        let mut run = support::routes::new_run(&namespace, input);
        run.id = RunId::new();
        serde_json::to_string(&run).unwrap()
    };
    let (status, body) = post_json(&remote, "/runs", &start(json!({"order": "seven"}))).await;
    assert_eq!(
        (status, body.code.as_str()),
        (422, "invalid_input"),
        "{body:?}"
    );
    assert!(
        remote.backing().run_counts().await.unwrap().is_empty(),
        "nothing was started"
    );
    let created: Value = reqwest::Client::new()
        .post(format!("{}/api/v1/runs", remote.url()))
        .header("content-type", "application/json")
        .body(start(json!({"order": 7})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["outcome"], "created", "{created}");
    let id: RunId = created["run"]["id"].as_str().unwrap().parse().unwrap();
    let events = format!("/runs/{id}/events");
    let event = |name: &str, data: Value| {
        serde_json::to_string(&NewEvent::new(id, name, data, NOW)).unwrap()
    };
    let (status, body) = post_json(&remote, &events, &event("refunded", json!(1))).await;
    assert_eq!(
        (status, body.code.as_str()),
        (422, "unknown_event"),
        "{body:?}"
    );
    let (status, body) = post_json(&remote, &events, &event("paid", json!("lots"))).await;
    assert_eq!(
        (status, body.code.as_str()),
        (422, "invalid_input"),
        "{body:?}"
    );
    assert!(
        remote
            .backing()
            .load_history(id)
            .await
            .unwrap()
            .events
            .is_empty()
    );
    // A version no worker has published cannot be checked: its start passes to the store.
    let unknown = NewRun::new(
        Namespace::new(format!("unpublished-{}", RunId::new()), "1"),
        json!("anything"),
        support::routes::hash(&json!("anything")),
        NOW,
    );
    assert!(matches!(
        remote.create_run(unknown).await.unwrap(),
        CreateOutcome::Created(_)
    ));
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let remote = server().await;
    for path in ["/health", "/ready"] {
        let response = reqwest::get(format!("{}/api/v1{path}", remote.url()))
            .await
            .expect("an answer");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let body: Value = response.json().await.unwrap();
        assert!(body["status"].is_string(), "{body}");
    }
}

/// The continuation route refuses a body without its continuation, a run that is not running
/// and a stale revision, each with its code, and writes nothing (no successor either).
#[tokio::test]
async fn a_continuation_that_cannot_apply_is_refused_and_writes_nothing() {
    let remote = server().await;
    let run = queued_run(&remote).await;
    let before = snapshot(&remote, run.id).await;
    let path = format!("/runs/{}/continuation", run.id);
    let (status, body) = post_json(&remote, &path, &json!({"expected": 1}).to_string()).await;
    assert_eq!(
        (status, body.code.as_str()),
        (422, "invalid_request"),
        "{body:?}"
    );
    assert!(
        body.message.contains("continuation"),
        "names the field: {body:?}"
    );
    let successor = NewRun::new(
        run.namespace.clone(),
        json!({"order": 2}),
        support::routes::hash(&json!({"order": 2})),
        NOW,
    );
    let successor_id = successor.id;
    let continuation = aiki_store::Continuation::new(successor, Default::default(), NOW);
    for (expected, code) in [
        (run.revision, "invalid_transition"),
        (run.revision + 5, "revision_conflict"),
    ] {
        let request = json!({"expected": expected, "continuation": continuation});
        let (status, body) = post_json(&remote, &path, &request.to_string()).await;
        assert_eq!((status, body.code.as_str()), (409, code), "{body:?}");
    }
    let unknown = format!("/runs/{}/continuation", RunId::new());
    let request = json!({"expected": 1, "continuation": continuation});
    let (status, body) = post_json(&remote, &unknown, &request.to_string()).await;
    assert_eq!((status, body.code.as_str()), (404, "not_found"), "{body:?}");
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );
    assert!(
        remote.backing().get_run(successor_id).await.is_err(),
        "no successor"
    );
}
