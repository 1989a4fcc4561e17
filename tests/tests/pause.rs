//! Pausing a running run never fences a task in flight: the pause is a request, the run's
//! executor starts no new task, lets the one in flight record its result, and moves the run to
//! `paused` itself. A task that may run at most once keeps its result and the run resumes past
//! it; a retriable one runs once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{Run, RunStatus, State, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, PATIENCE, on_every_backend};
use tokio::sync::Notify;

/// One gate per key: a task waits at its key's gate until the test opens it.
static GATES: Mutex<Option<HashMap<String, Arc<Notify>>>> = Mutex::new(None);

fn gate(key: &str) -> Arc<Notify> {
    GATES
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .entry(key.to_owned())
        .or_default()
        .clone()
}

/// At most once (retry `never`): waits at its gate, then answers.
#[aiki::task(name = "pause-once")]
async fn once(key: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record(&format!("once:{key}"));
    gate(&key).notified().await;
    Ok(format!("{key} done"))
}

/// Retriable: waits at its gate, then answers.
#[aiki::task(name = "pause-retriable", retry = fixed(max_attempts = 3, delay_ms = 1))]
async fn retriable(key: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record(&format!("retriable:{key}"));
    gate(&key).notified().await;
    Ok(format!("{key} done"))
}

#[aiki::task(name = "pause-next")]
async fn next(input: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record(&format!("next:{input}"));
    Ok(format!("then {input}"))
}

#[aiki::workflow(name = "pause-once-flow", version = "1")]
async fn once_flow(run: &Run, key: String) -> Result<String, WorkflowError> {
    let first = Once.start(run, key).await?;
    Next.start(run, first).await
}

#[aiki::workflow(name = "pause-retriable-flow", version = "1")]
async fn retriable_flow(run: &Run, key: String) -> Result<String, WorkflowError> {
    let first = Retriable.start(run, key).await?;
    Next.start(run, first).await
}

#[aiki::workflow(name = "pause-sleep-flow", version = "1")]
async fn sleep_flow(run: &Run, key: String) -> Result<String, WorkflowError> {
    let first = Once.start(run, key).await?;
    run.sleep("cool-down", Duration::from_secs(60)).await?;
    Ok(first)
}

#[aiki::workflow(name = "pause-child", version = "1")]
async fn pause_child(run: &Run, input: String) -> Result<String, WorkflowError> {
    Next.start(run, input).await
}

#[aiki::workflow(name = "pause-parent-flow", version = "1")]
async fn parent_flow(run: &Run, key: String) -> Result<String, WorkflowError> {
    let first = Once.start(run, key).await?;
    let child = run.child::<PauseChild>(first).await?;
    child.wait().await
}

/// Waits (real time) until `count` says a task has started.
async fn started(executions: &Executions, name: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while executions.count(name) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn harness_client(h: &Harness) -> aiki::Client {
    h.client.clone().with_actor("ops@test")
}

async fn pause_keeps_what_the_task_in_flight_did(backend: Backend, retriable: bool) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| {
        w.register(OnceFlow)
            .register(RetriableFlow)
            .task(Once)
            .task(Retriable)
            .task(Next)
    })
    .await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    let task = if retriable { "retriable" } else { "once" };
    let id = if retriable {
        h.client
            .start::<RetriableFlow>(key.clone())
            .await
            .unwrap()
            .id()
    } else {
        h.client.start::<OnceFlow>(key.clone()).await.unwrap().id()
    };
    started(&h.executions, &format!("{task}:{key}")).await;

    let requested = harness_client(&h).any_run(id).pause().await.unwrap();
    assert_eq!(
        requested.status,
        RunStatus::Running,
        "a request, not a move"
    );
    assert!(requested.pause_requested_at.is_some());
    assert_eq!(requested.pause_requested_by.as_deref(), Some("ops@test"));
    let before = h.store.get_run(id).await.unwrap();
    assert_eq!(
        before.revision, requested.revision,
        "no revision change: nothing fenced"
    );

    // The task in flight finishes while the pause is requested.
    gate(&key).notify_one();
    let handle = h.client.any_run(id);
    let paused = loop {
        let run = handle.record().await.unwrap();
        if run.status == RunStatus::Paused {
            break run;
        }
        assert!(!run.status.is_terminal(), "{run:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(paused.pause_requested_at, None, "the request is done");
    let history = h.store.load_history(id).await.unwrap();
    let entries: Vec<(String, aiki::store::EntryStatus)> = history
        .entries
        .iter()
        .map(|entry| {
            (
                entry.address.split(':').next().unwrap().to_owned(),
                entry.status,
            )
        })
        .collect();
    assert_eq!(
        entries,
        [(format!("pause-{task}"), aiki::store::EntryStatus::Completed)],
        "the task in flight kept its result; the next one did not start"
    );
    let change = h.store.timeline(id).await.unwrap().pop().unwrap();
    assert_eq!(
        (change.from, change.to, change.actor.as_deref()),
        (
            Some(RunStatus::Running),
            RunStatus::Paused,
            Some("ops@test")
        )
    );

    handle.resume().await.unwrap();
    let done = handle.wait_until_ended().await.unwrap();
    assert_eq!(done.status, RunStatus::Completed, "{done:?}");
    assert_eq!(
        done.output,
        Some(serde_json::json!(format!("then {key} done")))
    );
    assert_eq!(
        h.executions.count(&format!("{task}:{key}")),
        1,
        "the task ran once: its result was kept"
    );
    assert_eq!(h.executions.count(&format!("next:{key} done")), 1);
}

async fn a_never_task_in_flight_keeps_its_result_across_a_pause(backend: Backend) {
    pause_keeps_what_the_task_in_flight_did(backend, false).await;
}

async fn a_retriable_task_in_flight_runs_once_across_a_pause(backend: Backend) {
    pause_keeps_what_the_task_in_flight_did(backend, true).await;
}

/// A run that suspends with a pause requested (its task done, a sleep next) lands in
/// `paused`, and sleeps its sleep once resumed.
async fn a_run_suspending_with_a_pause_requested_is_paused(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(SleepFlow).task(Once)).await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    let run = h.client.start::<SleepFlow>(key.clone()).await.unwrap();
    started(&h.executions, &format!("once:{key}")).await;
    h.client.any_run(run.id()).pause().await.unwrap();
    gate(&key).notify_one();
    h.reach(&run, RunStatus::Paused).await;
    run.resume().await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    h.advance(Duration::from_secs(60));
    assert_eq!(run.result().await.unwrap(), format!("{key} done"));
    assert_eq!(h.executions.count(&format!("once:{key}")), 1);
}

/// A pause requested while a task is in flight stops the child start after it: the run is
/// paused with no child created, and starts it once resumed.
async fn a_pause_requested_starts_no_child(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| {
        w.register(ParentFlow)
            .register(PauseChild)
            .task(Once)
            .task(Next)
    })
    .await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    let run = h.client.start::<ParentFlow>(key.clone()).await.unwrap();
    started(&h.executions, &format!("once:{key}")).await;
    h.client.any_run(run.id()).pause().await.unwrap();
    gate(&key).notify_one();
    h.reach(&run, RunStatus::Paused).await;
    let history = h.store.load_history(run.id()).await.unwrap();
    assert!(
        history.children.is_empty() && history.entries.len() == 1,
        "no child started while the pause was requested: {history:?}"
    );
    run.resume().await.unwrap();
    assert_eq!(run.result().await.unwrap(), format!("then {key} done"));
    assert_eq!(h.executions.count(&format!("once:{key}")), 1);
}

on_every_backend!(
    a_pause_requested_starts_no_child,
    a_never_task_in_flight_keeps_its_result_across_a_pause,
    a_retriable_task_in_flight_runs_once_across_a_pause,
    a_run_suspending_with_a_pause_requested_is_paused,
);
