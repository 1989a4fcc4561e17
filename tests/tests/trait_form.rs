//! Scenarios written against the runtime traits by hand (`impl Task`, `impl Workflow`,
//! `impl Event`), without the attribute macros: the traits are public API in their own right.

use std::time::Duration;

use aiki::{
    Event, EventSpec, RetryPolicy, Run, RunStatus, Task, TaskContext, TaskError, Workflow,
    WorkflowError,
};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};

const MINUTE: Duration = Duration::from_secs(60);

/// Logs its execution and returns `"task-a(<input>)"`.
struct TaskA;

impl Task for TaskA {
    type Input = String;
    type Output = String;
    const NAME: &'static str = "task-a";

    async fn execute(&self, input: String, ctx: TaskContext) -> Result<String, TaskError> {
        ctx.state::<Executions>()?.record("task-a");
        Ok(format!("task-a({input})"))
    }
}

/// Logs its execution and returns `"task-b(<input>)"`.
struct TaskB;

impl Task for TaskB {
    type Input = String;
    type Output = String;
    const NAME: &'static str = "task-b";

    async fn execute(&self, input: String, ctx: TaskContext) -> Result<String, TaskError> {
        ctx.state::<Executions>()?.record("task-b");
        Ok(format!("task-b({input})"))
    }
}

/// An event without payload: "go on".
struct Proceed;

impl Event for Proceed {
    const NAME: &'static str = "proceed";
    type Payload = ();
}

/// An approval, with the approver's name.
struct Approved;

impl Event for Approved {
    const NAME: &'static str = "approved";
    type Payload = String;
}

/// A payment, in cents.
struct PaymentReceived;

impl Event for PaymentReceived {
    const NAME: &'static str = "payment_received";
    type Payload = u64;
}

// Reordering finished tasks (the refactoring guide's first case): A, then A' under the same
// name and version.
struct ReorderA;

impl Workflow for ReorderA {
    type Input = String;
    type Output = (String, String);
    const NAME: &'static str = "reorder";
    const VERSION: &'static str = "1";

    fn events() -> Vec<EventSpec> {
        vec![Proceed::spec()]
    }

    async fn run(&self, run: &Run, input: String) -> Result<(String, String), WorkflowError> {
        let a = TaskA.start(run, input.clone()).await?;
        let b = TaskB.start(run, input).await?;
        run.event::<Proceed>().wait().await?;
        Ok((a, b))
    }
}

struct ReorderA2;

impl Workflow for ReorderA2 {
    type Input = String;
    type Output = (String, String);
    const NAME: &'static str = "reorder";
    const VERSION: &'static str = "1";

    fn events() -> Vec<EventSpec> {
        vec![Proceed::spec()]
    }

    async fn run(&self, run: &Run, input: String) -> Result<(String, String), WorkflowError> {
        let b = TaskB.start(run, input.clone()).await?;
        let a = TaskA.start(run, input).await?;
        run.event::<Proceed>().wait().await?;
        Ok((a, b))
    }
}

async fn reordered_tasks_each_get_their_own_result(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ReorderA)).await;
    let run = h.client.start::<ReorderA>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(ReorderA2)).await;
    run.send::<Proceed>(()).await.unwrap();
    let output = h
        .client
        .handle::<ReorderA2>(run.id())
        .result()
        .await
        .unwrap();
    assert_eq!(output, ("task-a(x)".to_owned(), "task-b(x)".to_owned()));
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );
}

// join! of waits is AND; tasks started together run concurrently.
struct Both;

impl Workflow for Both {
    type Input = String;
    type Output = String;
    const NAME: &'static str = "both";
    const VERSION: &'static str = "1";

    fn events() -> Vec<EventSpec> {
        vec![Approved::spec(), PaymentReceived::spec()]
    }

    async fn run(&self, run: &Run, _input: String) -> Result<String, WorkflowError> {
        let (approver, cents) = tokio::join!(
            run.event::<Approved>().wait(),
            run.event::<PaymentReceived>().wait()
        );
        let (a, b) = tokio::join!(
            TaskA.start(run, approver?),
            TaskB.start(run, cents?.to_string())
        );
        Ok(format!("{}+{}", a?, b?))
    }
}

async fn joined_waits_mean_and(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Both)).await;
    let run = h.client.start::<Both>("x".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<Approved>("ann".into()).await.unwrap();
    h.reach_next(&run, RunStatus::AwaitingEvent, &waiting).await;
    run.send::<PaymentReceived>(7).await.unwrap();
    assert_eq!(run.result().await.unwrap(), "task-a(ann)+task-b(7)");
}

// A retried workflow: `Workflow::retry` by hand.

/// Fails on the first workflow attempt, succeeds on the next.
struct FirstAttemptFails;

impl Task for FirstAttemptFails {
    type Input = u32;
    type Output = String;
    const NAME: &'static str = "first-attempt-fails";

    async fn execute(&self, workflow_attempt: u32, ctx: TaskContext) -> Result<String, TaskError> {
        let executions = ctx.state::<Executions>()?;
        executions.record("first-attempt-fails");
        if executions.count("first-attempt-fails") == 1 {
            return Err(TaskError::new("not yet"));
        }
        Ok(format!("ok in workflow attempt {workflow_attempt}"))
    }
}

struct RetriedWorkflow;

impl Workflow for RetriedWorkflow {
    type Input = String;
    type Output = String;
    const NAME: &'static str = "retried-workflow";
    const VERSION: &'static str = "1";

    fn retry(&self) -> RetryPolicy {
        RetryPolicy::fixed(2, MINUTE).unwrap()
    }

    async fn run(&self, run: &Run, input: String) -> Result<String, WorkflowError> {
        TaskA.start(run, input).await?;
        FirstAttemptFails.start(run, 1).await
    }
}

async fn workflow_retry_replays_completed_tasks_and_reruns_failed_ones(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(RetriedWorkflow)).await;
    let run = h.client.start::<RetriedWorkflow>("x".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingRetry).await;
    assert_eq!(waiting.attempts, 2);
    assert_eq!(waiting.error.unwrap().kind, "task_failed");
    h.advance(MINUTE);
    assert_eq!(run.result().await.unwrap(), "ok in workflow attempt 1");
    assert_eq!(h.executions.count("task-a"), 1, "completed tasks replay");
    assert_eq!(
        h.executions.count("first-attempt-fails"),
        2,
        "the failed task ran again"
    );
}

on_every_backend!(
    reordered_tasks_each_get_their_own_result,
    joined_waits_mean_and,
    workflow_retry_replays_completed_tasks_and_reruns_failed_ones,
);
