//! The `tracing` spans and events of executions and task attempts, seen by a capturing layer
//! (no OpenTelemetry involved): one span per execution attempt, one per task attempt that
//! runs, replays as events, user logs inside the task's span, failures and divergences as
//! `warn` events.

use std::time::Duration;

use aiki::{Client, Run, RunStatus, TaskContext, TaskError, Worker, WorkflowError};
use aiki_tests::{Backend, Harness};
use tracing::Level;
use tracing::instrument::WithSubscriber;

use super::capture::Captured;

#[aiki::task(name = "obs-first")]
async fn obs_first(input: String) -> Result<String, TaskError> {
    Ok(format!("first({input})"))
}

/// Fails its first attempt; logs from inside every attempt.
#[aiki::task(name = "obs-second", retry = fixed(max_attempts = 2, delay_ms = 1))]
async fn obs_second(input: String, ctx: TaskContext) -> Result<String, TaskError> {
    tracing::info!(attempt = ctx.attempt(), "inside the task");
    if ctx.attempt() == 1 {
        return Err(TaskError::new("the first attempt fails"));
    }
    Ok(format!("second({input})"))
}

#[aiki::workflow(name = "obs-flow", version = "1", events(proceed))]
async fn obs_flow(run: &Run, input: String) -> Result<String, WorkflowError> {
    let first = ObsFirst.start(run, input).await?;
    run.events().proceed().wait().await?;
    ObsSecond.start(run, first).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_and_task_attempts_are_spans_and_replays_are_events() {
    super::init();
    let (dispatch, captured) = Captured::dispatch();
    // A real clock: the second task's in-process retry sleeps on it.
    let store = aiki::store::connect("memory:").await.unwrap();
    let worker_id = format!("obs-worker-{}", aiki::RunId::new());
    // Started under the capturing dispatcher: the worker and its executions report to it.
    let worker = tracing::dispatcher::with_default(&dispatch, || {
        Worker::builder(store.clone())
            .register(ObsFlow)
            .worker_id(&worker_id)
            .poll_interval(Duration::from_millis(5))
            .build()
            .unwrap()
            .start()
    });
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let run = client.start::<ObsFlow>("x".into()).await.unwrap();
    run.wait_for_status_timeout(RunStatus::AwaitingEvent, Duration::from_secs(30))
        .await
        .unwrap();
    run.send::<ObsFlowProceed>(()).await.unwrap();
    assert_eq!(run.result().await.unwrap(), "second(first(x))");
    worker.shutdown().await;

    let executions = captured.spans("aiki.execution");
    assert_eq!(executions.len(), 2, "{executions:#?}");
    for execution in &executions {
        let field = |name: &str| execution.fields.get(name).cloned().unwrap_or_default();
        assert_eq!(field("run_id"), run.id().to_string());
        assert_eq!(field("workflow"), "obs-flow");
        assert_eq!(field("version"), "1");
        assert_eq!(field("attempt"), "1");
        assert_eq!(field("worker"), worker_id);
        assert_eq!(execution.parent, None, "an execution is a root span");
    }
    let (asleep, resumed) = (&executions[0], &executions[1]);
    assert_eq!(asleep.fields["outcome"], "awaiting_event");
    assert_eq!(resumed.fields["outcome"], "completed");
    assert!(
        asleep.fields["revision"].parse::<u64>().unwrap()
            < resumed.fields["revision"].parse::<u64>().unwrap()
    );

    let tasks = captured.spans("aiki.task");
    let summary: Vec<(&str, &str, &str, Option<u64>)> = tasks
        .iter()
        .map(|t| {
            (
                t.fields["task"].as_str(),
                t.fields["attempt"].as_str(),
                t.fields["outcome"].as_str(),
                t.parent,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("obs-first", "1", "completed", Some(asleep.id)),
            ("obs-second", "1", "failed", Some(resumed.id)),
            ("obs-second", "2", "completed", Some(resumed.id)),
        ],
        "one span per attempt that ran, inside its execution; the replay of obs-first is not one"
    );

    let replayed = captured.events("task replayed");
    assert_eq!(replayed.len(), 1, "{replayed:#?}");
    assert_eq!(replayed[0].span, Some(resumed.id));
    assert_eq!(replayed[0].fields["task"], "obs-first");
    assert!(replayed[0].fields["address"].starts_with("obs-first:"));

    let suspended = captured.events("run suspended");
    assert_eq!(suspended.len(), 1);
    assert_eq!(suspended[0].span, Some(asleep.id));
    assert_eq!(suspended[0].fields["status"], "awaiting_event");

    let inside = captured.events("inside the task");
    let spans_of_second: Vec<Option<u64>> = tasks[1..].iter().map(|t| Some(t.id)).collect();
    assert_eq!(
        inside.iter().map(|e| e.span).collect::<Vec<_>>(),
        spans_of_second,
        "the task's own logs are inside its attempt's span"
    );

    let failed = captured.events("task attempt failed");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0].level, Level::WARN);
    assert_eq!(failed[0].span, Some(tasks[1].id));
    assert_eq!(failed[0].fields["error"], "the first attempt fails");
    assert_eq!(failed[0].fields["kind"], "task_failed");
}

// A divergence: the code changed under a run so that a new address comes first.
mod before {
    use super::*;

    #[aiki::workflow(name = "obs-diverge", version = "1")]
    pub async fn diverging(run: &Run, input: String) -> Result<String, WorkflowError> {
        ObsFirst.start(run, input.clone()).await?;
        run.sleep("pause", Duration::from_secs(60)).await?;
        Ok(input)
    }
}

mod after {
    use super::*;

    #[aiki::workflow(name = "obs-diverge", version = "1")]
    pub async fn diverging(run: &Run, input: String) -> Result<String, WorkflowError> {
        ObsSecond.start(run, input.clone()).await?;
        ObsFirst.start(run, input.clone()).await?;
        run.sleep("pause", Duration::from_secs(60)).await?;
        Ok(input)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_divergence_is_a_warning_naming_the_addresses() {
    super::init();
    let (dispatch, captured) = Captured::dispatch();
    let mut h = Harness::new(Backend::Memory).await;
    h.deploy(|w| w.register(before::Diverging)).await;
    let run = h
        .client
        .start::<before::Diverging>("x".into())
        .await
        .unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    h.deploy(|w| w.register(after::Diverging))
        .with_subscriber(dispatch.clone())
        .await;
    h.advance(Duration::from_secs(61));
    let failed = h.reach(&run, RunStatus::Failed).await;
    assert_eq!(failed.error.unwrap().kind, "non_determinism");
    let diverged = captured
        .events("replay diverged: a new task address while recorded results are unconsumed");
    assert_eq!(diverged.len(), 1, "{diverged:#?}");
    assert_eq!(diverged[0].level, Level::WARN);
    assert!(diverged[0].fields["new_address"].starts_with("obs-second:"));
    assert!(diverged[0].fields["unconsumed"].contains("obs-first:"));
    let execution = captured.spans("aiki.execution");
    assert_eq!(diverged[0].span, Some(execution[0].id));
    assert_eq!(execution[0].fields["outcome"], "failed");
}
