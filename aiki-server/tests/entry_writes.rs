//! The entry writes of several runs in one request (`POST /entries`), which an `HttpStore` sends
//! for every run of its process that wrote while its previous request was in flight: each write
//! is answered on its own; a wrong request is refused whole and writes nothing; an `HttpStore`
//! sends the writes of its runs together, and goes back to a request per run's writes on a
//! server of an earlier release, which does not serve the route.

use crate::support;

use std::sync::{Arc, Mutex};

use aiki::ManualClock;
use aiki_server::ServerConfig;
use aiki_store::http::HttpStore;
use aiki_store::prelude::*;
use aiki_store::{
    BoxStore, EntryKind, EntryRecord, EntryStatus, ErrorBody, RunId, RunRecord, StoreError,
};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use support::requests::{NOW, post_json, queued_run, roomy_server, server, snapshot};

fn entry(run: RunId, address: &str, index: u32) -> EntryRecord {
    EntryRecord::new(
        run,
        address,
        index,
        EntryKind::Task,
        EntryStatus::Running,
        NOW,
    )
    .attempts(1)
}

fn writes(writes: &[(u64, &EntryRecord)]) -> String {
    let writes: Vec<Value> = writes
        .iter()
        .map(|(expected, entry)| json!({ "expected": expected, "entry": entry }))
        .collect();
    json!({ "writes": writes }).to_string()
}

#[tokio::test]
async fn each_write_of_several_runs_is_answered_on_its_own() {
    let remote = server().await;
    let first = queued_run(&remote).await;
    let second = queued_run(&remote).await;
    let unknown = RunId::new();
    let mine = entry(first.id, "charge:aa", 0);
    let stale = entry(second.id, "charge:aa", 0);
    let nobody = entry(unknown, "charge:aa", 0);
    let body = writes(&[
        (first.revision, &mine),
        (second.revision + 7, &stale),
        (1, &nobody),
    ]);
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/entries", remote.url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(response.status().as_u16(), 200);
    let answers: Vec<Option<ErrorBody>> = response.json().await.expect("one answer per write");
    let codes: Vec<Option<&str>> = answers
        .iter()
        .map(|answer| answer.as_ref().map(|error| error.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        [None, Some("revision_conflict"), Some("not_found")],
        "{answers:?}"
    );
    assert_eq!(
        snapshot(&remote, first.id).await.1,
        1,
        "the first was written"
    );
    assert_eq!(
        snapshot(&remote, second.id).await.1,
        0,
        "the stale one was not"
    );
}

#[tokio::test]
async fn a_wrong_request_of_writes_is_refused_whole_and_writes_nothing() {
    let remote = server().await;
    let run = queued_run(&remote).await;
    let before = snapshot(&remote, run.id).await;
    let refused = |(status, body): (u16, ErrorBody), want: u16, says: &str| {
        assert_eq!(
            (status, body.code.as_str()),
            (want, "invalid_request"),
            "{body:?}"
        );
        assert!(body.message.contains(says), "says {says:?}: {body:?}");
    };
    let mine = entry(run.id, "charge:aa", 0);

    refused(
        post_json(&remote, "/entries", &writes(&[])).await,
        400,
        "1 to 512",
    );
    refused(
        post_json(
            &remote,
            "/entries",
            &writes(&[(run.revision, &mine), (run.revision, &mine)]),
        )
        .await,
        400,
        "twice",
    );
    refused(
        post_json(&remote, "/entries", &json!({ "writes": 7 }).to_string()).await,
        422,
        "writes",
    );
    refused(
        post_json(
            &remote,
            "/entries",
            &json!({ "writes": [{ "entry": mine }] }).to_string(),
        )
        .await,
        422,
        "expected",
    );
    let mut big = mine.clone();
    big.output = Some(Value::String("x".repeat(32 * 1024)));
    let (status, body) = post_json(&remote, "/entries", &writes(&[(run.revision, &big)])).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );

    // More writes than a request holds (a body the default body limit lets through).
    let roomy = roomy_server().await;
    let run = queued_run(&roomy).await;
    let many: Vec<EntryRecord> = (0..513)
        .map(|index| entry(run.id, "step:aa", index))
        .collect();
    let many: Vec<(u64, &EntryRecord)> = many.iter().map(|entry| (run.revision, entry)).collect();
    let (status, body) = post_json(&roomy, "/entries", &writes(&many)).await;
    assert_eq!(
        (status, body.code.as_str()),
        (400, "invalid_request"),
        "{body:?}"
    );
    assert!(body.message.contains("513 writes"), "{body:?}");
    assert_eq!(snapshot(&roomy, run.id).await.1, 0, "nothing was written");
}

/// The paths of the requests a server was sent, in order.
type Seen = Arc<Mutex<Vec<String>>>;

/// A real server on a memory store, each request's path noted in `seen`; with `earlier`, it
/// answers `POST /entries` as a server of an earlier release does: `no_route`.
async fn noting_server(earlier: bool) -> (String, BoxStore, Seen) {
    let store = aiki_store::connect("memory:").await.unwrap();
    let seen: Seen = Arc::default();
    let noted = seen.clone();
    let app = aiki_server::router(
        store.clone(),
        ServerConfig::default()
            .clock(ManualClock::new(NOW))
            .insecure_no_auth(),
    )
    .layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let noted = noted.clone();
            async move {
                let path = request.uri().path().to_owned();
                noted.lock().unwrap().push(path.clone());
                if earlier && path == "/api/v1/entries" {
                    let body =
                        json!({ "code": "no_route", "message": "no such route", "details": {} });
                    return (axum::http::StatusCode::NOT_FOUND, axum::Json(body)).into_response();
                }
                next.run(request).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, store, seen)
}

/// `n` queued runs of one namespace in `store`.
async fn runs(store: &BoxStore, n: usize) -> Vec<RunRecord> {
    let namespace = aiki_store::Namespace::new(format!("writes-{}", RunId::new()), "1.0.0");
    let mut runs = Vec::new();
    for i in 0..n {
        let mut new = support::routes::new_run(&namespace, json!({ "i": i }));
        new.reference_id = Some(format!("run-{i}"));
        match store.create_run(new).await.expect("create_run") {
            aiki_store::CreateOutcome::Created(run) => runs.push(run),
            other => panic!("a new run, got {other:?}"),
        }
    }
    runs
}

async fn entries_of(store: &BoxStore, id: RunId) -> usize {
    store.load_history(id).await.expect("history").entries.len()
}

#[tokio::test]
async fn an_http_store_sends_the_writes_of_its_runs_together() {
    let (url, store, seen) = noting_server(false).await;
    let http = HttpStore::new(&url).unwrap();
    let runs = runs(&store, 20).await;
    // Twenty runs write at once (this runtime runs one task at a time, so all are queued
    // before the writer's task takes them): one request.
    let calls = runs
        .iter()
        .map(|run| http.put_entry(run.revision, entry(run.id, "charge:aa", 0)));
    for outcome in futures_util::future::join_all(calls).await {
        outcome.expect("written");
    }
    for run in &runs {
        assert_eq!(entries_of(&store, run.id).await, 1, "{}", run.id);
    }
    assert_eq!(*seen.lock().unwrap(), ["/api/v1/entries"]);

    // A refused write is the caller's alone.
    let stale = &runs[0];
    let fine = &runs[1];
    let (refused, written) = tokio::join!(
        http.put_entry(stale.revision + 3, entry(stale.id, "charge:bb", 1)),
        http.put_entries(
            fine.revision,
            vec![
                entry(fine.id, "charge:bb", 1),
                entry(fine.id, "charge:cc", 2)
            ]
        ),
    );
    assert!(
        matches!(refused, Err(StoreError::RevisionConflict { .. })),
        "{refused:?}"
    );
    written.expect("written");
    assert_eq!(entries_of(&store, stale.id).await, 1);
    assert_eq!(entries_of(&store, fine.id).await, 3);
    assert_eq!(seen.lock().unwrap().len(), 2, "{:?}", seen.lock().unwrap());
}

#[tokio::test]
async fn an_http_store_writes_each_runs_entries_alone_to_a_server_of_an_earlier_release() {
    let (url, store, seen) = noting_server(true).await;
    let http = HttpStore::new(&url).unwrap();
    let runs = runs(&store, 2).await;
    // The server's payload limit, as an answer states it (so a run's several entries go in a
    // batch of its own).
    http.whoami().await.expect("whoami");
    let (first, second) = (&runs[0], &runs[1]);
    let (one, two) = tokio::join!(
        http.put_entries(
            first.revision,
            vec![
                entry(first.id, "charge:aa", 0),
                entry(first.id, "charge:bb", 1)
            ]
        ),
        http.put_entry(second.revision, entry(second.id, "charge:aa", 0)),
    );
    one.expect("written");
    two.expect("written");
    assert_eq!(entries_of(&store, first.id).await, 2);
    assert_eq!(entries_of(&store, second.id).await, 1);
    let mut asked = seen.lock().unwrap().clone();
    assert_eq!(asked.remove(0), "/api/v1/whoami");
    assert_eq!(
        asked.remove(0),
        "/api/v1/entries",
        "the route is tried once"
    );
    asked.sort();
    let mut want = vec![
        format!("/api/v1/runs/{}/entries/batch", first.id),
        format!("/api/v1/runs/{}/entries", second.id),
    ];
    want.sort();
    assert_eq!(asked, want);

    // It is not tried again.
    seen.lock().unwrap().clear();
    http.put_entry(second.revision, entry(second.id, "charge:bb", 1))
        .await
        .expect("written");
    assert_eq!(
        *seen.lock().unwrap(),
        [format!("/api/v1/runs/{}/entries", second.id)]
    );
}
