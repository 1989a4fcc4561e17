//! An execution that awaits something no drain reaches, past its push budget: dropped and
//! handed back at the budget, its idle hand-backs counted by their typed error kind.

use std::time::{Duration, Instant};

use aiki::RunStatus;
use aiki::store::push::{SIGNATURE_HEADER, sign};
use aiki_tests::Backend;

use super::now;

/// Awaits `secs` seconds of its own (no task, no durable wait): what no drain reaches.
#[aiki::workflow(name = "awaits-outside", version = "1")]
async fn awaits_outside(_run: &aiki::Run, secs: u64) -> Result<u64, aiki::WorkflowError> {
    tokio::time::sleep(Duration::from_secs(secs)).await;
    Ok(secs)
}

/// An execution that awaits something other than a task or a durable wait past its budget is
/// dropped and its run handed back at the budget (not held, claimed, until the await ends),
/// and the hand-backs that recorded nothing are counted by their typed error kind, whoever the
/// change's actor is: through an aiki server, which names the endpoint's API key as the actor,
/// the second such delivery fails the run (`max_idle_deliveries(2)`) with `execution_budget`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_past_its_budget_is_handed_back_and_counted() {
    use tower::ServiceExt;
    let url = Backend::Sqlite.fresh_url().await;
    let store = aiki::store::connect(&url).await.unwrap();
    let key = aiki_server::keys::generate("endpoint", vec![aiki::store::Scope::Executor], now());
    store.create_key(key.record.clone()).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(aiki_server::serve(
        listener,
        store.clone(),
        aiki_server::ServerConfig::default(),
        std::future::pending(),
    ));
    let remote = aiki::store::http::HttpStore::new(&server)
        .unwrap()
        .with_key(key.token);
    let registry = aiki::Registry::builder()
        .register(AwaitsOutside)
        .build()
        .unwrap();
    let budget = Duration::from_secs(3);
    let endpoint = aiki::endpoint::Endpoint::builder(std::sync::Arc::new(remote), registry)
        .secret("s3cret")
        .budget(budget)
        .margin(Duration::from_secs(1))
        .max_idle_deliveries(2)
        .build()
        .unwrap();
    let client = aiki::Client::new(store.clone());
    let run = client.start::<AwaitsOutside>(60).await.unwrap();
    let deliver = || {
        let body = serde_json::to_vec(&serde_json::json!({
            "run_id": run.id(), "workflow": "awaits-outside", "version": "1",
        }))
        .unwrap();
        let signature = sign(&["s3cret"], now(), &body);
        let request = axum::http::Request::post("/")
            .header(SIGNATURE_HEADER, signature)
            .body(axum::body::Body::from(body))
            .unwrap();
        let router = endpoint.clone().router();
        async move {
            let started = Instant::now();
            let answer = tokio::time::timeout(Duration::from_secs(20), router.oneshot(request))
                .await
                .expect("the delivery is answered at its budget, not when the await ends")
                .unwrap();
            assert_eq!(answer.status(), 200);
            let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
                .await
                .unwrap();
            let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
            (answer, started.elapsed())
        }
    };
    let (first, took) = deliver().await;
    assert_eq!(first["outcome"], "handed_back", "{first}");
    assert!(
        took < budget + Duration::from_secs(2),
        "answered after {took:?}"
    );
    let record = store.get_run(run.id()).await.unwrap();
    assert_eq!(record.status, RunStatus::Queued, "{record:?}");
    assert_eq!(
        record.error.as_ref().map(|error| error.kind.as_str()),
        Some("execution_budget_idle")
    );
    let (second, _) = deliver().await;
    assert_eq!(second["outcome"], "failed", "{second}");
    let failed = store.get_run(run.id()).await.unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error.unwrap().kind, "execution_budget");
    let timeline = store.timeline(run.id()).await.unwrap();
    let handed_back = timeline
        .iter()
        .find(|change| change.from == Some(RunStatus::Running) && change.to == RunStatus::Queued)
        .expect("a hand-back");
    assert!(
        handed_back
            .actor
            .as_deref()
            .is_some_and(|actor| actor.starts_with("key:")),
        "the server names the key as the hand-back's actor: {timeline:?}"
    );
    println!(
        "push budget: an execution awaiting 60 s of its own under a 3 s budget was handed back \
         after {took:?}, failed at the second idle delivery"
    );
    serving.abort();
}
