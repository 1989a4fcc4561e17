//! The store's payload size limit, end to end, on every backend and through a server: a start,
//! an event or a child start over the limit gives the caller a typed error and stores nothing;
//! a task whose output is over it fails once, never retried, and the workflow may handle that;
//! a workflow whose output is over it fails the run, never retried. Each with a message that
//! says what is too large, its size, the limit and what to do.

use std::time::Duration;

use aiki::store::limit::DEFAULT_PAYLOAD_LIMIT;
use aiki::store::{EntryStatus, ListRuns, RunFilter};
use aiki::{
    Client, ClientError, Connection, Run, RunStatus, State, StoreError, TaskError, Worker,
    WorkerHandle, WorkflowError,
};
use aiki_tests::{Backend, Executions, PATIENCE, on_every_backend};

/// A string whose JSON text is `bytes` long.
fn text_of(bytes: usize) -> String {
    "x".repeat(bytes - 2)
}

/// Asserts `message` says what is too large, both sizes and what to do.
#[track_caller]
fn says_what_to_do(message: &str, what: &str) {
    for part in [what, "3.0 MiB", "over the limit of 2.0 MiB", "reference"] {
        assert!(message.contains(part), "`{part}` in: {message}");
    }
}

const OVER: usize = 3 * 1024 * 1024;

#[aiki::workflow(name = "limits-echo", version = "1", events(upload = String))]
async fn echo(run: &Run, input: String) -> Result<usize, WorkflowError> {
    let upload = run.events().upload().wait().await?;
    Ok(input.len() + upload.len())
}

/// Returns a string of `bytes` of JSON text; retried up to three times if it fails.
#[aiki::task(name = "limits-produce", retry = fixed(max_attempts = 3, delay_ms = 1))]
async fn produce(bytes: usize, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record("limits-produce");
    Ok(text_of(bytes))
}

/// Asks for an output of `bytes`; handles its task failing by saying why.
#[aiki::workflow(name = "limits-task", version = "1")]
async fn task_output(run: &Run, bytes: usize) -> Result<String, WorkflowError> {
    match Produce.start(run, bytes).await {
        Ok(output) => Ok(format!("got {} bytes", output.len() + 2)),
        Err(WorkflowError::TaskFailed {
            attempts, message, ..
        }) => Ok(format!("failed after {attempts}: {message}")),
        Err(other) => Err(other),
    }
}

/// Returns `bytes` of JSON text as its output; its retry policy would retry a failure.
#[aiki::workflow(
    name = "limits-output",
    version = "1",
    retry = fixed(max_attempts = 3, delay_ms = 1)
)]
async fn run_output(_run: &Run, bytes: usize) -> Result<String, WorkflowError> {
    Ok(text_of(bytes))
}

/// Starts a child whose input is a string of `bytes`; handles a refusal by saying why.
#[aiki::workflow(name = "limits-big-parent", version = "1")]
async fn big_parent(run: &Run, bytes: usize) -> Result<String, WorkflowError> {
    match run.child::<Echo>(text_of(bytes)).await {
        Ok(_) => Ok("started".to_owned()),
        Err(refused @ WorkflowError::TooLarge { .. }) => Ok(format!("refused: {refused}")),
        Err(other) => Err(other),
    }
}

/// A store, a client on it and a worker serving every workflow above.
struct World {
    store: Connection,
    client: Client,
    executions: Executions,
    _worker: WorkerHandle,
    _server: Option<tokio::task::JoinHandle<()>>,
}

impl World {
    async fn on(backend: Backend) -> World {
        let url = backend.fresh_url().await;
        let store = aiki::store::open(&url, aiki::MigrationMode::Apply)
            .await
            .expect("the store opens");
        World::serving(store, None)
    }

    /// Workers and clients reach a memory store through an aiki server as `aiki server`
    /// starts one (its default limits).
    async fn through_a_server() -> World {
        let backing = aiki::store::connect("memory:").await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let config = aiki_server::ServerConfig::default().insecure_no_auth();
        let serving = aiki_server::serve(listener, backing, config, std::future::pending());
        let server = tokio::spawn(async move {
            serving.await.expect("the server serves");
        });
        let store = aiki::store::open(&format!("http://{address}"), aiki::MigrationMode::Apply)
            .await
            .expect("the server's store opens");
        World::serving(store, Some(server))
    }

    fn serving(store: Connection, server: Option<tokio::task::JoinHandle<()>>) -> World {
        let executions = Executions::default();
        let worker = Worker::builder(&store)
            .register(Echo)
            .register(TaskOutput)
            .register(RunOutput)
            .register(BigParent)
            .task(Produce)
            .state(executions.clone())
            .poll_interval(Duration::from_millis(5))
            .build()
            .expect("worker config")
            .start();
        World {
            client: Client::new(store.clone()).with_poll_interval(Duration::from_millis(5)),
            store,
            executions,
            _worker: worker,
            _server: server,
        }
    }

    async fn run_count(&self) -> usize {
        self.store
            .list_runs(ListRuns::new(RunFilter::default(), 100))
            .await
            .expect("list runs")
            .runs
            .len()
    }
}

/// A start whose input is over the limit is refused with the typed error; no run is stored.
async fn a_start_over_the_limit_is_refused(world: World) {
    let error = world.client.start::<Echo>(text_of(OVER)).await.unwrap_err();
    match &error {
        ClientError::Store(StoreError::TooLarge { bytes, limit, .. }) => {
            assert_eq!(*bytes, OVER as u64);
            assert_eq!(*limit, DEFAULT_PAYLOAD_LIMIT as u64);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(error.code(), "too_large");
    says_what_to_do(&error.to_string(), "the input of run");
    assert_eq!(world.run_count().await, 0, "no run was stored");
}

/// An event whose payload is over the limit is refused with the typed error and not stored;
/// the run waits on, and takes the next event.
async fn an_event_over_the_limit_is_refused(world: World) {
    let run = world.client.start::<Echo>("in".to_owned()).await.unwrap();
    let error = run
        .send::<EchoUpload>(text_of(OVER))
        .await
        .expect_err("refused");
    assert!(
        matches!(error, ClientError::Store(StoreError::TooLarge { .. })),
        "{error:?}"
    );
    says_what_to_do(&error.to_string(), "the payload of event `upload`");
    let history = world.store.load_history(run.id()).await.unwrap();
    assert!(history.events.is_empty(), "no event was stored");
    run.send::<EchoUpload>("ok".to_owned()).await.unwrap();
    let output = tokio::time::timeout(PATIENCE, run.result()).await;
    assert_eq!(output.expect("in time").unwrap(), 4);
}

/// A task whose output is over the limit fails at its first attempt, though its policy allows
/// three: the workflow gets `TaskFailed` with the reason and may handle it. Its entry is
/// recorded failed (`too_large`), without the output.
async fn a_task_output_over_the_limit_fails_the_task_once(world: World) {
    let run = world.client.start::<TaskOutput>(OVER).await.unwrap();
    let output = tokio::time::timeout(PATIENCE, run.result()).await;
    let output = output.expect("in time").unwrap();
    assert!(output.starts_with("failed after 1: "), "{output}");
    says_what_to_do(&output, "the output of the call at `limits-produce:");
    assert_eq!(world.executions.count("limits-produce"), 1, "never retried");
    let history = world.store.load_history(run.id()).await.unwrap();
    assert_eq!(history.entries.len(), 1, "{:?}", history.entries);
    let entry = &history.entries[0];
    assert_eq!(entry.status, EntryStatus::Failed);
    assert_eq!(entry.output, None);
    assert_eq!(
        entry.error.as_ref().map(|e| e.kind.as_str()),
        Some("too_large")
    );

    // An output at the limit is kept.
    let run = world
        .client
        .start::<TaskOutput>(DEFAULT_PAYLOAD_LIMIT)
        .await
        .unwrap();
    let output = tokio::time::timeout(PATIENCE, run.result()).await;
    assert_eq!(
        output.expect("in time").unwrap(),
        format!("got {DEFAULT_PAYLOAD_LIMIT} bytes")
    );
}

/// A workflow whose output is over the limit fails the run (`too_large`) at its first
/// attempt, though its policy allows three; its caller learns why.
async fn a_workflow_output_over_the_limit_fails_the_run(world: World) {
    let run = world.client.start::<RunOutput>(OVER).await.unwrap();
    let failed = tokio::time::timeout(
        PATIENCE,
        run.wait_for_status_timeout(RunStatus::Failed, PATIENCE),
    )
    .await
    .expect("in time")
    .expect("the run fails");
    let error = failed.error.expect("its error");
    assert_eq!(error.kind, "too_large");
    says_what_to_do(&error.message, &format!("the output of run {}", run.id()));
    assert_eq!(failed.attempts, 1, "never retried");
    assert_eq!(failed.output, None);
    let error = run.result().await.unwrap_err();
    says_what_to_do(&error.to_string(), "the output of run");
}

/// A child whose input is over the limit is not started: the parent gets
/// `WorkflowError::TooLarge` and may handle it; neither the child nor its start is stored.
async fn a_child_input_over_the_limit_is_refused(world: World) {
    let parent = world.client.start::<BigParent>(OVER).await.unwrap();
    let output = tokio::time::timeout(PATIENCE, parent.result()).await;
    let output = output.expect("in time").unwrap();
    assert!(output.starts_with("refused: "), "{output}");
    says_what_to_do(&output, "the input of child run");
    let history = world.store.load_history(parent.id()).await.unwrap();
    assert!(history.entries.is_empty(), "no child start recorded");
    assert!(history.children.is_empty());
    assert_eq!(world.run_count().await, 1, "only the parent");
}

async fn start(backend: Backend) {
    a_start_over_the_limit_is_refused(World::on(backend).await).await;
}

async fn event(backend: Backend) {
    an_event_over_the_limit_is_refused(World::on(backend).await).await;
}

async fn task_output_fails_the_task(backend: Backend) {
    a_task_output_over_the_limit_fails_the_task_once(World::on(backend).await).await;
}

async fn workflow_output_fails_the_run(backend: Backend) {
    a_workflow_output_over_the_limit_fails_the_run(World::on(backend).await).await;
}

async fn child_input(backend: Backend) {
    a_child_input_over_the_limit_is_refused(World::on(backend).await).await;
}

on_every_backend!(
    start,
    event,
    task_output_fails_the_task,
    workflow_output_fails_the_run,
    child_input,
);

mod through_a_server {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn start() {
        a_start_over_the_limit_is_refused(World::through_a_server().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn event() {
        an_event_over_the_limit_is_refused(World::through_a_server().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn task_output_fails_the_task() {
        a_task_output_over_the_limit_fails_the_task_once(World::through_a_server().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn workflow_output_fails_the_run() {
        a_workflow_output_over_the_limit_fails_the_run(World::through_a_server().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn child_input() {
        a_child_input_over_the_limit_is_refused(World::through_a_server().await).await;
    }
}
