//! Remote workers through a fault layer that drops the answer of every tenth write after the
//! server did it: every run completes, every task runs exactly once, and no run is lost to a
//! spurious revision conflict, because each repeat carries its operation's idempotency key
//! and gets the first answer. 400 runs × 5 tasks by default; `AIKI_FAULT_RUNS` sets how many
//! (the figure is 2,000). And a claim whose every send loses its answer: the claimer's
//! next claim sends it again and runs what it took.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{Client, Run, RunStatus, TaskError, Worker, WorkerStore, WorkflowError};
use aiki_server::ServerConfig;
use aiki_store::RunId;
use aiki_store::http::HttpStore;
use support::remote::Remote;

/// Every task execution: (run input, step).
static EXECUTIONS: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());

/// Step `step` of run `n`, as `n * 10 + step`.
#[aiki::task(name = "fault-step")]
async fn fault_step(at: u32) -> Result<u32, TaskError> {
    EXECUTIONS.lock().unwrap().push((at / 10, at % 10));
    Ok(at % 10 + 1)
}

#[aiki::workflow(name = "fault-five", version = "1")]
async fn fault_five(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    let mut step = 0;
    while step < 5 {
        step = FaultStep.start(run, n * 10 + step).await?;
    }
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_task_runs_once_though_every_tenth_answer_is_lost() {
    let runs: u32 = std::env::var("AIKI_FAULT_RUNS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(400);
    let path = std::env::temp_dir().join(format!("aiki-faults-{}.db", RunId::new()));
    let store = aiki_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let remote =
        Remote::start_with_faults(store, ServerConfig::default().insecure_no_auth(), 10).await;
    let http = Arc::new(
        HttpStore::new(&remote.url())
            .unwrap()
            .long_poll(Duration::from_secs(2)),
    );
    let workers: Vec<_> = (0..2)
        .map(|_| {
            Worker::builder(WorkerStore::executor(http.clone()))
                .register(FaultFive)
                .build()
                .unwrap()
                .start()
        })
        .collect();
    let client = Client::new(http.clone()).with_poll_interval(Duration::from_millis(20));
    let mut handles = Vec::new();
    for n in 0..runs {
        handles.push(client.start::<FaultFive>(n).await.unwrap());
    }
    for (n, handle) in (0..).zip(&handles) {
        let output = tokio::time::timeout(Duration::from_secs(300), handle.result())
            .await
            .expect("every run completes")
            .unwrap_or_else(|error| panic!("run {n} failed: {error}"));
        assert_eq!(output, n);
    }
    for worker in workers {
        worker.shutdown().await;
    }
    let mut counts: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for execution in EXECUTIONS.lock().unwrap().iter() {
        *counts.entry(*execution).or_default() += 1;
    }
    let again: Vec<_> = counts.iter().filter(|(_, count)| **count > 1).collect();
    let dropped = remote.dropped();
    eprintln!(
        "faults: {runs} runs x 5 tasks through a layer that dropped {dropped} answers after the \
         write: {} task executions, {} run again, every run completed",
        counts.values().sum::<usize>(),
        again.len()
    );
    assert!(dropped > 0, "the layer dropped answers");
    assert_eq!(counts.len(), runs as usize * 5, "every task ran");
    assert!(again.is_empty(), "tasks run twice: {again:?}");
    let statuses = remote.backing().run_counts().await.unwrap();
    assert!(
        statuses.iter().all(|counts| counts
            .by_status
            .iter()
            .all(|(status, _)| *status == RunStatus::Completed)),
        "{statuses:?}"
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[aiki::task(name = "claimed-once")]
async fn claimed_once(n: u32) -> Result<u32, TaskError> {
    Ok(n + 1)
}

#[aiki::workflow(name = "claimed-once", version = "1")]
async fn claimed_once_flow(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    ClaimedOnce.start(run, n).await
}

/// A claim whose answer is lost on every send (the server claimed the run each time it was
/// asked, as the first answer) gives the worker an error; its next claim is that claim sent
/// again, and runs the run it took. Before, the next claim was a new one that found nothing,
/// and the run stayed `running` under a claimer that never ran it until claim recovery (here,
/// with no sweeper, for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_every_answer_is_lost_is_run_by_its_claimer() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let store = aiki_store::connect("memory:").await.unwrap();
    let lost = AtomicUsize::new(0);
    // Every answer of the first claim's sends (one more than the store sends a request).
    let remote = Remote::start_losing(
        store,
        ServerConfig::default().insecure_no_auth(),
        move |method, path| {
            *method == axum::http::Method::POST
                && path.ends_with(aiki_store::api::path::CLAIMS)
                && lost.fetch_add(1, Ordering::SeqCst) < 4
        },
    )
    .await;
    let http = Arc::new(HttpStore::new(&remote.url()).unwrap());
    let client = Client::new(http.clone()).with_poll_interval(Duration::from_millis(20));
    let handle = client.start::<ClaimedOnceFlow>(41).await.unwrap();
    let worker = Worker::builder(WorkerStore::executor(http))
        .register(ClaimedOnceFlow)
        .build()
        .unwrap()
        .start();
    let output = tokio::time::timeout(Duration::from_secs(30), handle.result())
        .await
        .expect("the claimed run completes without claim recovery")
        .unwrap();
    worker.shutdown().await;
    assert_eq!(output, 42);
    assert!(remote.dropped() >= 4, "every send of the first claim lost");
    let claims = remote
        .backing()
        .timeline(handle.id())
        .await
        .unwrap()
        .into_iter()
        .filter(|change| change.to == RunStatus::Running)
        .count();
    assert_eq!(claims, 1, "claimed once");
}
