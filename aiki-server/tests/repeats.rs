//! Repeats of a write across servers: a resend under the same idempotency key, through the
//! other of two servers in front of one store, gets the first answer and writes nothing (the
//! store keeps the answer with the write), and another request under the key is refused 422;
//! only writes' answers are kept; a malformed key or first-send mark is refused with 400 and
//! writes nothing, never silently ignored.

use aiki_server::ServerConfig;
use aiki_store::api::{FRESH_OPERATION, IDEMPOTENCY_KEY};
use aiki_store::{BoxStore, ErrorBody, Namespace, NewRun, RunId, StoreError};
use serde_json::{Value, json};

/// Serves `store` with its own router on a free port; the base URL.
async fn serve(store: BoxStore) -> String {
    let app = aiki_server::router(store, ServerConfig::default().insecure_no_auth());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/api/v1/runs")
}

fn new_run() -> NewRun {
    NewRun::new(
        Namespace::new(format!("repeats-{}", RunId::new()), "1.0.0"),
        json!({"order": 1}),
        aiki::input_hash(&json!({"order": 1})).unwrap(),
        4_000_000_000_000,
    )
}

/// Posts `run` to `url` with `headers`: the status and the answer's body.
async fn start(url: &str, run: &NewRun, headers: &[(&str, &str)]) -> (u16, Value) {
    let mut request = reqwest::Client::new().post(url).json(run);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn absent(store: &BoxStore, id: RunId) -> bool {
    matches!(store.get_run(id).await, Err(StoreError::NotFound { .. }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resend_through_another_server_gets_the_first_answer() {
    let path = std::env::temp_dir().join(format!("aiki-repeats-{}.db", RunId::new()));
    let store = aiki_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let (one, two) = (serve(store.clone()).await, serve(store.clone()).await);
    let key = RunId::new().to_string();

    let first = new_run();
    let (status, created) = start(
        &one,
        &first,
        &[(IDEMPOTENCY_KEY, &key), (FRESH_OPERATION, "true")],
    )
    .await;
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["run"]["id"], json!(first.id.to_string()));

    // The same request through the other server: the first answer, and nothing more written,
    // even when it is wrongly marked as a first send.
    for fresh in [None, Some("true")] {
        let mut headers = vec![(IDEMPOTENCY_KEY, key.as_str())];
        headers.extend(fresh.map(|mark| (FRESH_OPERATION, mark)));
        let (status, answer) = start(&two, &first, &headers).await;
        assert_eq!((status, &answer), (200, &created), "the first answer");
    }
    // Another request under the key (a client that rebuilt it with another run id): not a
    // repeat, refused 422 through either server (the store keeps the request's digest with
    // the answer), nothing written.
    for (server, fresh) in [(&two, None), (&one, Some("true")), (&two, Some("true"))] {
        let again = new_run();
        let mut headers = vec![(IDEMPOTENCY_KEY, key.as_str())];
        headers.extend(fresh.map(|mark| (FRESH_OPERATION, mark)));
        let (status, answer) = start(server, &again, &headers).await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["code"], "idempotency_key_reused", "{answer}");
        assert!(absent(&store, again.id).await, "no second run");
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn malformed_repeat_headers_are_refused_and_write_nothing() {
    let store = aiki_store::connect("memory:").await.unwrap();
    let url = serve(store.clone()).await;
    let long = "k".repeat(201);
    let cases: [&[(&str, &str)]; 5] = [
        &[(IDEMPOTENCY_KEY, "")],
        &[(IDEMPOTENCY_KEY, &long)],
        &[(IDEMPOTENCY_KEY, "two words")],
        &[(IDEMPOTENCY_KEY, "k1"), (FRESH_OPERATION, "yes")],
        &[(FRESH_OPERATION, "true")],
    ];
    for headers in cases {
        let run = new_run();
        let (status, body) = start(&url, &run, headers).await;
        assert_eq!(status, 400, "{headers:?}: {body}");
        let body: ErrorBody = serde_json::from_value(body).unwrap();
        assert_eq!(body.code, "invalid_request", "{headers:?}");
        assert!(
            body.message.contains(IDEMPOTENCY_KEY) || body.message.contains(FRESH_OPERATION),
            "the message names the header: {}",
            body.message
        );
        assert!(absent(&store, run.id).await, "{headers:?}: nothing written");
    }
}

/// Only writes' answers are kept for repeats: a read a previous release sends as `POST`
/// (`READ_POSTS`) and a claim that claimed nothing are done again when repeated, and a key sent
/// again with another body is refused 422 `idempotency_key_reused`, nothing written.
#[tokio::test]
async fn only_writes_are_kept_and_a_reused_key_is_refused() {
    let store = aiki_store::connect("memory:").await.unwrap();
    let base = serve(store.clone()).await;
    let base = base.trim_end_matches("/runs").to_owned();
    let client = reqwest::Client::new();
    let post = |path: &str, body: Value, key: &str| {
        client
            .post(format!("{base}{path}"))
            .header(IDEMPOTENCY_KEY, key)
            .json(&body)
    };
    let run = new_run();
    let namespace = run.namespace.clone();
    let listing = serde_json::to_value(aiki_store::ListRuns::new(
        aiki_store::RunFilter::default().workflow(namespace.workflow.clone()),
        10,
    ))
    .unwrap();
    let empty = post("/runs/list", listing.clone(), "list-1")
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 200);
    let empty: Value = empty.json().await.unwrap();
    assert_eq!(empty["runs"], json!([]));
    let claim = serde_json::to_value(aiki_store::ClaimRequest::new(
        "w1",
        vec![namespace.clone()],
        "default",
        5,
        0,
    ))
    .unwrap();
    let nothing: Value = post("/claims", claim.clone(), "claim-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(nothing["runs"], json!([]));
    let (status, created) = start(
        &format!("{base}/runs"),
        &run,
        &[(IDEMPOTENCY_KEY, "start-1")],
    )
    .await;
    assert_eq!(status, 200, "{created}");
    // The listing repeated sees the run; the claim repeated claims it.
    let again: Value = post("/runs/list", listing, "list-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["runs"][0]["id"], json!(run.id.to_string()), "{again}");
    let claimed: Value = post("/claims", claim, "claim-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        claimed["runs"][0]["id"],
        json!(run.id.to_string()),
        "{claimed}"
    );
    // The start repeated gets its first answer; with another body, a refusal.
    let (status, first) = start(
        &format!("{base}/runs"),
        &run,
        &[(IDEMPOTENCY_KEY, "start-1")],
    )
    .await;
    assert_eq!((status, &first), (200, &created));
    let other = new_run();
    let (status, refused) = start(
        &format!("{base}/runs"),
        &other,
        &[(IDEMPOTENCY_KEY, "start-1")],
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["code"], "idempotency_key_reused", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("start-1"),
        "{refused}"
    );
    assert!(absent(&store, other.id).await, "nothing written");
}
