//! Repeats of a write across servers: a resend under the same idempotency key, through the
//! other of two servers in front of one store, gets the first answer and writes nothing (the
//! store keeps the answer with the write); a malformed key or first-send mark is refused with
//! 400 and writes nothing, never silently ignored.

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

    // The resend carries another run id, as a client that rebuilt its request would: the key
    // decides, and nothing more is written, even when it is wrongly marked as a first send.
    for fresh in [None, Some("true")] {
        let again = new_run();
        let mut headers = vec![(IDEMPOTENCY_KEY, key.as_str())];
        headers.extend(fresh.map(|mark| (FRESH_OPERATION, mark)));
        let (status, answer) = start(&two, &again, &headers).await;
        assert_eq!((status, &answer), (200, &created), "the first answer");
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
