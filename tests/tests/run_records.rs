//! Run records that do not lie: a run whose first attempt failed and whose retry completed
//! keeps no error (a listing by error kind does not find it), and its timeline calls the retry a
//! workflow retry, not a suspension.

use std::time::Duration;

use aiki::store::RunFilter;
use aiki::{Run, RunStatus, State, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};

/// Fails its first execution (per test), succeeds after.
#[aiki::task(name = "records-flaky")]
async fn flaky(key: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record(&key);
    if executions.count(&key) == 1 {
        return Err(TaskError::new(std::io::Error::other("gateway timeout")));
    }
    Ok(key)
}

/// A workflow retried a minute after a failed attempt.
#[aiki::workflow(
    name = "records-retried",
    version = "1",
    retry = fixed(max_attempts = 2, delay_ms = 60000)
)]
async fn retried(run: &Run, key: String) -> Result<String, WorkflowError> {
    Flaky.start(run, key).await
}

async fn a_run_that_failed_an_attempt_then_completed_shows_no_error(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Retried)).await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    let run = h.client.start::<Retried>(key.clone()).await.unwrap();
    let retrying = h.reach(&run, RunStatus::AwaitingRetry).await;
    assert_eq!(
        retrying.error.as_ref().map(|e| e.kind.as_str()),
        Some("task_failed"),
        "while it waits for its retry, the run says why"
    );
    h.advance(Duration::from_secs(60));
    assert_eq!(run.result().await.unwrap(), key);
    let done = run.record().await.unwrap();
    assert_eq!(
        done.error, None,
        "completed: the old attempt's error is gone"
    );
    let listed = h
        .client
        .list_runs(
            RunFilter::default()
                .workflow("records-retried")
                .error_kind("task_failed"),
            None,
            100,
        )
        .await
        .unwrap();
    assert!(
        listed.runs.iter().all(|listed| listed.id != run.id()),
        "a completed run is not listed by an error it no longer has"
    );
    let reasons: Vec<(Option<RunStatus>, RunStatus, String)> = h
        .store
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .map(|change| (change.from, change.to, change.reason))
        .collect();
    assert!(
        reasons.contains(&(
            Some(RunStatus::Running),
            RunStatus::AwaitingRetry,
            "workflow retry scheduled".to_owned()
        )),
        "{reasons:?}"
    );
}

#[aiki::task(name = "records-measure")]
async fn measure(input: Vec<String>) -> Result<usize, TaskError> {
    Ok(input.len())
}

#[aiki::workflow(name = "records-inputs", version = "1")]
async fn inputs(run: &Run, words: u32) -> Result<usize, WorkflowError> {
    let small = Measure
        .start(run, vec!["a".to_owned(), "b".to_owned()])
        .await?;
    // About 100 KiB of input: over the cap, recorded by its size.
    let large = Measure
        .start(run, vec!["x".repeat(1_000); words as usize])
        .await?;
    Ok(small + large)
}

/// What each task call was given is recorded with its entry; an input over the cap is
/// recorded by its size.
async fn a_task_calls_input_is_recorded_with_it(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Inputs)).await;
    let run = h.client.start::<Inputs>(100).await.unwrap();
    assert_eq!(run.result().await.unwrap(), 102);
    let mut inputs: Vec<serde_json::Value> = h
        .store
        .load_history(run.id())
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|entry| entry.input.expect("recorded"))
        .collect();
    inputs.sort_by_key(|input| input.is_array());
    assert_eq!(inputs[1], serde_json::json!(["a", "b"]));
    let omitted = inputs[0]["aiki_input_omitted_bytes"].as_u64().unwrap();
    assert!(omitted > aiki::RECORDED_INPUT_MAX_BYTES as u64, "{omitted}");
}

on_every_backend!(
    a_run_that_failed_an_attempt_then_completed_shows_no_error,
    a_task_calls_input_is_recorded_with_it,
);
