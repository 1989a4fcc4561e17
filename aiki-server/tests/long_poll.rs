//! Long-polling claims: a claim that finds nothing waits on the server and is answered as soon
//! as a run is queued, through this server or another one on the same store; one that finds
//! nothing within its wait answers empty.

use crate::support;

use std::time::{Duration, Instant};

use aiki_server::ServerConfig;
use aiki_store::http::HttpStore;
use aiki_store::prelude::*;
use aiki_store::{BoxStore, ClaimRequest, Namespace, NewRun, RunId};
use serde_json::json;
use support::remote::Remote;

fn config() -> ServerConfig {
    ServerConfig::default().insecure_no_auth()
}

fn claim_request(namespace: &Namespace) -> ClaimRequest {
    ClaimRequest::new("long-poller", vec![namespace.clone()], "default", 1, 0)
}

async fn a_waiting_claim_is_answered_when_another_server_queues_a_run(store: BoxStore) {
    let first = Remote::start(store.clone(), config()).await;
    let second = Remote::start(store, config()).await;
    let namespace = Namespace::new(format!("long-poll-{}", RunId::new()), "1.0.0");
    let wait = Duration::from_secs(15);
    let poller = HttpStore::new(&first.url()).unwrap().long_poll(wait);
    let request = claim_request(&namespace);
    let started = Instant::now();
    let claim = tokio::spawn(async move { poller.claim(request).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !claim.is_finished(),
        "the claim waits while nothing is queued"
    );
    let run = NewRun::new(
        namespace.clone(),
        json!({}),
        support::routes::hash(&json!({})),
        0,
    );
    let id = run.id;
    HttpStore::new(&second.url())
        .unwrap()
        .create_run(run)
        .await
        .unwrap();
    let claimed = claim.await.unwrap().expect("the claim answers");
    let waited = started.elapsed();
    assert_eq!(
        claimed.runs.iter().map(|run| run.id).collect::<Vec<_>>(),
        [id],
        "the run queued through the other server"
    );
    // Woken by the queued run, not by the end of its wait (which would also find it).
    assert!(
        waited < wait / 3,
        "answered after {waited:?} of a {wait:?} wait"
    );
    eprintln!("long-poll: queued through another server, claimed after {waited:?}");
}

async fn a_claim_that_finds_nothing_answers_empty_after_its_wait(store: BoxStore) {
    let remote = Remote::start(store, config()).await;
    let namespace = Namespace::new(format!("long-poll-{}", RunId::new()), "1.0.0");
    let poller = HttpStore::new(&remote.url())
        .unwrap()
        .long_poll(Duration::from_millis(300));
    let claimed = poller.claim(claim_request(&namespace)).await.unwrap();
    assert!(claimed.runs.is_empty());
    // A malformed wait is refused, not taken as no wait.
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/claims?wait_ms=soon", remote.url()))
        .json(&claim_request(&namespace))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
}

mod memory {
    use super::*;

    async fn store() -> BoxStore {
        aiki_store::connect("memory:").await.unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiting_claim_is_answered_when_another_server_queues_a_run() {
        super::a_waiting_claim_is_answered_when_another_server_queues_a_run(store().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_that_finds_nothing_answers_empty_after_its_wait() {
        super::a_claim_that_finds_nothing_answers_empty_after_its_wait(store().await).await;
    }
}

mod sqlite {
    use super::*;

    async fn store() -> BoxStore {
        let path = std::env::temp_dir().join(format!("aiki-long-poll-{}.db", RunId::new()));
        aiki_store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_waiting_claim_is_answered_when_another_server_queues_a_run() {
        super::a_waiting_claim_is_answered_when_another_server_queues_a_run(store().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_that_finds_nothing_answers_empty_after_its_wait() {
        super::a_claim_that_finds_nothing_answers_empty_after_its_wait(store().await).await;
    }
}

/// A server asked to stop answers its waiting long polls at once (empty), and `serve` returns
/// well within its grace period instead of waiting for the polls' end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_server_answers_its_long_polls_at_once() {
    let store = aiki_store::connect("memory:").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(aiki_server::serve(
        listener,
        store,
        config().shutdown_grace(Duration::from_secs(10)),
        async move {
            let _ = stopped.await;
        },
    ));
    let namespace = Namespace::new(format!("long-poll-{}", RunId::new()), "1.0.0");
    let poller = HttpStore::new(&url)
        .unwrap()
        .long_poll(Duration::from_secs(15));
    let request = claim_request(&namespace);
    let claim = tokio::spawn(async move { poller.claim(request).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !claim.is_finished(),
        "the claim waits while nothing is queued"
    );
    let asked = Instant::now();
    stop.send(()).unwrap();
    let claimed = claim.await.unwrap().expect("the waiting claim is answered");
    assert!(claimed.runs.is_empty());
    let answered = asked.elapsed();
    serving.await.unwrap().expect("the server stops cleanly");
    let stopped = asked.elapsed();
    assert!(
        answered < Duration::from_secs(1) && stopped < Duration::from_secs(2),
        "answered {answered:?} and stopped {stopped:?} after the signal"
    );
    // Stopped: a new request finds nobody listening, which a client sends again.
    let refused = HttpStore::new(&url).unwrap().runtime_config().await;
    assert!(
        matches!(&refused, Err(error) if error.is_transient()),
        "{refused:?}"
    );
}

/// The same worker and client code on a server as on a database: one `aiki::connect`, only
/// the URL changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_and_a_client_connect_to_a_server_by_url() {
    let remote = Remote::start(aiki_store::connect("memory:").await.unwrap(), config()).await;
    let url = remote.url();
    let store = aiki::connect(&url).await.unwrap();
    assert!(
        store.clone().whole().is_none(),
        "a server is not a whole store"
    );
    let worker_store = aiki::WorkerStore::from(&store);
    assert!(
        !worker_store.sweeps(),
        "a server's worker leaves the sweeps to the server"
    );
    let worker = aiki::Worker::builder(worker_store)
        .register(Echo)
        .build()
        .unwrap()
        .start();
    let client = aiki::Client::new(store);
    let run = client.start::<Echo>(41).await.unwrap();
    assert_eq!(run.result().await.unwrap(), 42);
    worker.shutdown().await;
    // A database's connection is the whole store, and its worker sweeps.
    let database = aiki::connect("memory:").await.unwrap();
    assert!(aiki::WorkerStore::from(&database).sweeps());
    assert!(database.whole().is_some());
    // A whole store (every role) is not what a server offers: said, not half-served.
    let error = aiki_store::connect(&url)
        .await
        .expect_err("not a whole store");
    assert!(error.to_string().contains("aiki::connect"), "{error}");
}

#[aiki::task(name = "echo-step")]
async fn echo_step(n: u32) -> Result<u32, aiki::TaskError> {
    Ok(n + 1)
}

#[aiki::workflow(name = "echo", version = "1")]
async fn echo(run: &aiki::Run, n: u32) -> Result<u32, aiki::WorkflowError> {
    EchoStep.start(run, n).await
}
