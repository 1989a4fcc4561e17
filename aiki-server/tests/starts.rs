//! Several starts in one request (`POST /starts`), which an `HttpStore` sends for the starts its
//! callers make while its previous start request is in flight: each start is made and answered
//! on its own; a repeat of the request, to this server or another in front of the same store,
//! gets each start's first answer; a wrong request is refused whole and starts nothing; an
//! `HttpStore` sends starts made at once together, a lone start or one made as an operation
//! alone, and goes back to a request per start on a server of an earlier release.

mod support;

use std::time::Duration;

use aiki::ManualClock;
use aiki_server::ServerConfig;
use aiki_store::api::{FRESH_OPERATION, IDEMPOTENCY_KEY, StartAnswer};
use aiki_store::http::HttpStore;
use aiki_store::operation::{self, OperationId};
use aiki_store::prelude::*;
use aiki_store::{BoxStore, CreateOutcome, Namespace, NewRun, RunId, RunStatus, StoreError};
use serde_json::{Value, json};
use support::remote::Remote;
use support::requests::{NOW, noting_server, post_json, refused, roomy_server, server};

fn namespace() -> Namespace {
    Namespace::new(format!("starts-{}", RunId::new()), "1.0.0")
}

fn new_run(namespace: &Namespace, reference: Option<&str>) -> NewRun {
    let mut run = NewRun::new(
        namespace.clone(),
        json!({ "order": 1 }),
        "0".repeat(64),
        NOW,
    );
    run.reference_id = reference.map(str::to_owned);
    run
}

/// Posts `runs` to `url`'s `POST /starts` with idempotency key `key` (marked as a first send
/// if `fresh`); the status and the answers.
async fn post_starts(url: &str, runs: &[NewRun], key: &str, fresh: bool) -> Vec<StartAnswer> {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/api/v1/starts"))
        .header(IDEMPOTENCY_KEY, key)
        .json(&json!({ "runs": runs }));
    if fresh {
        request = request.header(FRESH_OPERATION, "true");
    }
    let response = request.send().await.expect("the server answers");
    assert_eq!(response.status().as_u16(), 200);
    response.json().await.expect("one answer per start")
}

/// What an answer says: the outcome (`created` or `existing`) and the run's id, or the error's
/// code.
fn said(answer: &StartAnswer) -> (String, Option<RunId>) {
    match answer {
        StartAnswer::Outcome(outcome) => {
            let kind = match **outcome {
                CreateOutcome::Created(_) => "created",
                CreateOutcome::Existing(_) => "existing",
            };
            (kind.to_owned(), Some(outcome.run().id))
        }
        StartAnswer::Refused(error) => (error.code.clone(), None),
    }
}

async fn runs_of(store: &BoxStore, namespace: &Namespace) -> usize {
    let filter = aiki_store::RunFilter::default().workflow(&namespace.workflow);
    store
        .list_runs(aiki_store::ListRuns::new(filter, 200))
        .await
        .expect("list")
        .runs
        .len()
}

#[tokio::test]
async fn each_start_is_answered_on_its_own_and_a_repeat_gets_the_first_answers() {
    let store = aiki_store::connect("memory:").await.unwrap();
    let config = || {
        ServerConfig::default()
            .clock(ManualClock::new(NOW))
            .request_timeout(Duration::from_secs(5))
            .insecure_no_auth()
    };
    let first = Remote::start(store.clone(), config()).await;
    let namespace = namespace();
    let taken = match store.create_run(new_run(&namespace, None)).await.unwrap() {
        CreateOutcome::Created(run) => run,
        other => panic!("a new run, got {other:?}"),
    };
    let mut holder = new_run(&namespace, None);
    holder.id = taken.id;
    let runs = [
        new_run(&namespace, None),
        new_run(&namespace, Some("order-7")),
        new_run(&namespace, Some("order-7")),
        holder,
    ];
    let answers = post_starts(&first.url(), &runs, "batch-1", true).await;
    let first_said: Vec<_> = answers.iter().map(said).collect();
    assert_eq!(first_said[0], ("created".to_owned(), Some(runs[0].id)));
    assert_eq!(first_said[1], ("created".to_owned(), Some(runs[1].id)));
    assert_eq!(
        first_said[2],
        ("existing".to_owned(), Some(runs[1].id)),
        "a taken reference id is answered with the run holding it"
    );
    assert_eq!(
        first_said[3],
        ("already_exists".to_owned(), None),
        "{answers:?}"
    );
    assert_eq!(runs_of(&store, &namespace).await, 3);
    let created = store.get_run(runs[0].id).await.unwrap();
    assert_eq!(
        (created.status, created.created_at),
        (RunStatus::Queued, NOW),
        "started as POST /runs starts a run: by the server's clock"
    );

    // The same request again: from this server's memory, then from the store through another
    // server (each start's answer recorded as a part of the request's operation).
    let again = post_starts(&first.url(), &runs, "batch-1", false).await;
    assert_eq!(again, answers);
    let second = Remote::start(store.clone(), config()).await;
    let elsewhere = post_starts(&second.url(), &runs, "batch-1", false).await;
    let elsewhere: Vec<_> = elsewhere.iter().map(said).collect();
    assert_eq!(
        elsewhere[..3],
        first_said[..3],
        "the first answers, from the store"
    );
    assert_eq!(
        elsewhere[3],
        ("already_exists".to_owned(), None),
        "a refused start recorded nothing, and is refused again"
    );
    assert_eq!(
        runs_of(&store, &namespace).await,
        3,
        "nothing started twice"
    );
}

#[tokio::test]
async fn a_wrong_request_of_starts_is_refused_whole_and_starts_nothing() {
    let remote = server().await;
    let namespace = namespace();
    refused(
        post_json(&remote, "/starts", &json!({ "runs": [] }).to_string()).await,
        400,
        "1 to 32",
    );
    refused(
        post_json(&remote, "/starts", &json!({ "runs": 7 }).to_string()).await,
        422,
        "runs",
    );
    let mut partial = serde_json::to_value(new_run(&namespace, None)).unwrap();
    partial.as_object_mut().unwrap().remove("namespace");
    refused(
        post_json(
            &remote,
            "/starts",
            &json!({ "runs": [partial] }).to_string(),
        )
        .await,
        422,
        "namespace",
    );
    let (status, body) = post_json(&remote, "/starts", "{\"runs\": [").await;
    assert_eq!(status, 400, "{body:?}");
    let big = NewRun::new(
        namespace.clone(),
        Value::String("x".repeat(32 * 1024)),
        "0".repeat(64),
        NOW,
    );
    let (status, body) = post_json(&remote, "/starts", &json!({ "runs": [big] }).to_string()).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    assert_eq!(runs_of(remote.backing(), &namespace).await, 0);

    // More starts than a request holds (a body the default body limit lets through).
    let roomy = roomy_server().await;
    let many: Vec<NewRun> = (0..33).map(|_| new_run(&namespace, None)).collect();
    let (status, body) = post_json(&roomy, "/starts", &json!({ "runs": many }).to_string()).await;
    refused((status, body), 400, "33 runs");
    assert_eq!(runs_of(roomy.backing(), &namespace).await, 0);
}

#[tokio::test]
async fn an_http_store_sends_starts_made_at_once_together() {
    let (url, store, seen) = noting_server(None).await;
    let http = HttpStore::new(&url).unwrap();
    let namespace = namespace();
    // Twenty starts at once (this runtime runs one task at a time, so all are queued before
    // the sending task takes them): one request.
    let runs: Vec<NewRun> = (0..20)
        .map(|i| new_run(&namespace, (i % 5 == 0).then_some("shared")))
        .collect();
    let outcomes =
        futures_util::future::join_all(runs.iter().map(|run| http.create_run(run.clone()))).await;
    assert_eq!(*seen.lock().unwrap(), ["/api/v1/starts"]);
    let holder = outcomes[0].as_ref().expect("started").run().id;
    for (run, outcome) in runs.iter().zip(&outcomes) {
        let outcome = outcome.as_ref().expect("started");
        if run.reference_id.is_some() {
            assert_eq!(outcome.run().id, holder, "the run holding `shared`");
        } else {
            assert!(matches!(outcome, CreateOutcome::Created(_)), "{outcome:?}");
            assert_eq!(outcome.run().id, run.id);
        }
    }
    assert_eq!(runs_of(&store, &namespace).await, 17);

    // A refused start is its caller's alone; a lone start, and one made as an operation (which
    // names its key), go as `POST /runs`.
    seen.lock().unwrap().clear();
    let mut taken = new_run(&namespace, None);
    taken.id = holder;
    let fine = new_run(&namespace, None);
    let (refused, started) = tokio::join!(http.create_run(taken), http.create_run(fine.clone()));
    assert!(
        matches!(refused, Err(StoreError::AlreadyExists { .. })),
        "{refused:?}"
    );
    assert_eq!(started.expect("started").run().id, fine.id);
    http.create_run(new_run(&namespace, None))
        .await
        .expect("started");
    let id = OperationId::new("start-as-an-operation").unwrap();
    operation::scope(id, http.create_run(new_run(&namespace, None)))
        .await
        .expect("started");
    assert_eq!(
        *seen.lock().unwrap(),
        ["/api/v1/starts", "/api/v1/runs", "/api/v1/runs"]
    );
    assert_eq!(runs_of(&store, &namespace).await, 20);
}

#[tokio::test]
async fn many_starts_at_once_go_in_full_requests() {
    let (url, store, seen) = noting_server(None).await;
    let http = HttpStore::new(&url).unwrap();
    let namespace = namespace();
    let runs: Vec<NewRun> = (0..100).map(|_| new_run(&namespace, None)).collect();
    let started = runs.iter().map(|run| http.create_run(run.clone()));
    for (run, outcome) in runs
        .iter()
        .zip(futures_util::future::join_all(started).await)
    {
        assert_eq!(outcome.expect("started").run().id, run.id);
    }
    // Three full requests of 32 at once, the last 4 once fewer than two are in flight.
    assert_eq!(seen.lock().unwrap().len(), 4, "{:?}", seen.lock().unwrap());
    assert_eq!(runs_of(&store, &namespace).await, 100);
}

#[tokio::test]
async fn an_http_store_starts_each_run_alone_on_a_server_of_an_earlier_release() {
    let (url, store, seen) = noting_server(Some("/api/v1/starts")).await;
    let http = HttpStore::new(&url).unwrap();
    let namespace = namespace();
    let runs: Vec<NewRun> = (0..3).map(|_| new_run(&namespace, None)).collect();
    let outcomes =
        futures_util::future::join_all(runs.iter().map(|run| http.create_run(run.clone()))).await;
    for (run, outcome) in runs.iter().zip(outcomes) {
        assert_eq!(outcome.expect("started").run().id, run.id);
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "/api/v1/starts",
            "/api/v1/runs",
            "/api/v1/runs",
            "/api/v1/runs"
        ],
        "the route is tried once, then each start goes alone"
    );
    seen.lock().unwrap().clear();
    let again: Vec<NewRun> = (0..2).map(|_| new_run(&namespace, None)).collect();
    for outcome in
        futures_util::future::join_all(again.iter().map(|run| http.create_run(run.clone()))).await
    {
        outcome.expect("started");
    }
    assert_eq!(
        *seen.lock().unwrap(),
        ["/api/v1/runs", "/api/v1/runs"],
        "it is not tried again"
    );
    assert_eq!(runs_of(&store, &namespace).await, 5);
}
