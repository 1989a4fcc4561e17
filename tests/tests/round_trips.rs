//! One store round trip per task step: a task's result travels with the `running` record of
//! the workflow's next call (`ExecutorStore::put_entries`). The workflow goes on before the
//! result is durable, yet no handler starts, and no suspension or completion is written,
//! before it is; a workflow waiting on a task still running has the results it has seen
//! written at once. Checked on every backend and through a server, by the calls the runtime
//! makes, in the order the store answered them.

use std::sync::Arc;
use std::time::Duration;

use aiki::store::{EntryStatus, RunId};
use aiki::{BoxStore, Client, Run, State, TaskError, Worker, WorkflowError};
use aiki_tests::{Backend, PATIENCE, on_every_backend};

use crate::counting;

use counting::Counting;

const STEPS: u64 = 10;

#[aiki::task(name = "rt-step")]
async fn rt_step(n: u64, State(log): State<Arc<Counting>>) -> Result<u64, TaskError> {
    log.note(format!("handler {n}"));
    Ok(n + 1)
}

#[aiki::workflow(name = "rt-steps", version = "1")]
async fn rt_steps(run: &Run, steps: u64) -> Result<u64, WorkflowError> {
    let mut n = 0;
    for _ in 0..steps {
        n = RtStep.start(run, n).await?;
    }
    Ok(n)
}

/// Runs one ten-step run to its end with a worker on `executor`, whose handlers note
/// themselves in `counting`'s log.
async fn run_steps(
    counting: &Arc<Counting>,
    executor: impl Into<aiki::WorkerStore>,
    client_store: BoxStore,
) {
    let worker = Worker::builder(executor)
        .register(RtSteps)
        .state(counting.clone())
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(client_store).with_poll_interval(Duration::from_millis(5));
    let run = client.start::<RtSteps>(STEPS).await.unwrap();
    let output = tokio::time::timeout(PATIENCE, run.result())
        .await
        .expect("the run ends")
        .unwrap();
    worker.shutdown().await;
    assert_eq!(output, STEPS);
}

/// Runs one ten-step run with a worker on `executor`, whose entry writes and transitions
/// reach `counting` (directly, or through a server that writes to it), and checks what the
/// store answered, in order: the first `running` record alone; then, before each handler,
/// one call holding the previous step's result and this step's `running` record; the last
/// result; the completion.
async fn steps_on(
    counting: Arc<Counting>,
    executor: impl Into<aiki::WorkerStore>,
    client_store: BoxStore,
    lone: Lone,
) {
    run_steps(&counting, executor, client_store).await;
    let log = counting.log.lock().unwrap().clone();
    // The addresses of the steps, in call order, from their `running` records.
    let addresses: Vec<String> = log
        .iter()
        .flat_map(|line| line.split(' '))
        .filter_map(|record| record.strip_prefix("running:"))
        .map(str::to_owned)
        .collect();
    assert_eq!(addresses.len() as u64, STEPS, "{log:#?}");
    let mut expected = vec![
        format!("entries running:{}", addresses[0]),
        "handler 0".into(),
    ];
    for step in 1..STEPS as usize {
        expected.push(format!(
            "entries completed:{} running:{}",
            addresses[step - 1],
            addresses[step]
        ));
        expected.push(format!("handler {step}"));
    }
    expected.push(format!(
        "entries completed:{}",
        addresses[STEPS as usize - 1]
    ));
    expected.push("transition completed".into());
    assert_eq!(log, expected);
    let (put_entry, put_entries) = match lone {
        Lone::AsCalled => (1, STEPS),
        Lone::PutEntry => (2, STEPS - 1),
    };
    assert_eq!(counting.calls("put_entry"), put_entry);
    assert_eq!(counting.calls("put_entries"), put_entries);
}

/// How the store is asked to write a call's lone entry.
enum Lone {
    /// By the method the runtime called (`put_entry` for the first `running` record,
    /// `put_entries` for the last result).
    AsCalled,
    /// By `put_entry` (through a server: a request of several runs' writes does not say which
    /// method wrote a lone one).
    PutEntry,
}

async fn a_task_step_is_one_store_call(backend: Backend) {
    let store = backend.open().await;
    let counting = Arc::new(Counting::new(store.clone()));
    steps_on(
        counting.clone(),
        counting as BoxStore,
        store,
        Lone::AsCalled,
    )
    .await;
}

#[aiki::task(name = "rt-quick")]
async fn rt_quick() -> Result<u32, TaskError> {
    Ok(1)
}

/// Holds until the test lets it go.
#[derive(Clone, Default)]
struct Gate(Arc<tokio::sync::Notify>);

#[aiki::task(name = "rt-held")]
async fn rt_held(State(gate): State<Gate>) -> Result<u32, TaskError> {
    gate.0.notified().await;
    Ok(2)
}

#[aiki::workflow(name = "rt-beside", version = "1")]
async fn rt_beside(run: &Run) -> Result<u32, WorkflowError> {
    let (quick, held) = tokio::join!(RtQuick.start(run), RtHeld.start(run));
    Ok(quick? + held?)
}

/// The entries of run `id`'s history with status `status`.
async fn entries_with(store: &BoxStore, id: RunId, status: EntryStatus) -> usize {
    let history = store.load_history(id).await.unwrap();
    history
        .entries
        .iter()
        .filter(|entry| entry.status == status)
        .count()
}

/// A worker on `executor` holding `gate`, and a run of `rt-beside` it executes.
async fn start_beside(
    executor: BoxStore,
    client_store: BoxStore,
    gate: &Gate,
) -> (aiki::WorkerHandle, aiki::RunHandle<RtBeside>) {
    let worker = Worker::builder(executor)
        .register(RtBeside)
        .state(gate.clone())
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(client_store).with_poll_interval(Duration::from_millis(5));
    let run = client.start::<RtBeside>(aiki::NoInput).await.unwrap();
    (worker, run)
}

/// A result the workflow has seen is durable while a task beside it still runs: the workflow
/// makes no write to carry it, so the executor writes it at once.
async fn a_result_is_written_while_a_task_beside_it_runs(backend: Backend) {
    let store = backend.open().await;
    let gate = Gate::default();
    let (worker, run) = start_beside(store.clone(), store.clone(), &gate).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while entries_with(&store, run.id(), EntryStatus::Completed).await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the quick task's result was not written while the held one ran"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        entries_with(&store, run.id(), EntryStatus::Running).await,
        1,
        "the held task is still running"
    );
    gate.0.notify_one();
    let output = tokio::time::timeout(PATIENCE, run.result())
        .await
        .expect("the run ends")
        .unwrap();
    worker.shutdown().await;
    assert_eq!(output, 3);
}

/// The workflow ends while the executor's write of an earlier result is still being retried:
/// the completion waits for that write, and the result that ended meanwhile is written after
/// it and before the completion.
async fn a_run_ends_while_its_results_are_being_written(backend: Backend) {
    let store = backend.open().await;
    let counting = Arc::new(Counting::new(store.clone()));
    // The executor's write of the quick task's result fails three times (retried after 50,
    // 100, 200 ms): the held task ends meanwhile, and with it the workflow.
    counting.failures.lock().unwrap().insert("put_entries", 3);
    let gate = Gate::default();
    let (worker, run) = start_beside(counting.clone(), store.clone(), &gate).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while counting.calls("put_entries") == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no write of the result"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    gate.0.notify_one();
    let output = tokio::time::timeout(PATIENCE, run.result())
        .await
        .expect("the run ends")
        .unwrap();
    worker.shutdown().await;
    assert_eq!(output, 3);
    assert_eq!(
        entries_with(&store, run.id(), EntryStatus::Completed).await,
        2,
        "both results are recorded"
    );
}

on_every_backend!(
    a_task_step_is_one_store_call,
    a_result_is_written_while_a_task_beside_it_runs,
    a_run_ends_while_its_results_are_being_written,
);

/// Serves `counting` on a free port; the server's task and a store reaching it.
async fn serve(counting: &Arc<Counting>) -> (tokio::task::JoinHandle<()>, aiki::Connection) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let config = aiki_server::ServerConfig::default().insecure_no_auth();
    let serving = aiki_server::serve(
        listener,
        counting.clone() as BoxStore,
        config,
        std::future::pending(),
    );
    let server = tokio::spawn(async move { serving.await.expect("the server serves") });
    let remote = aiki::connect(&format!("http://{address}"))
        .await
        .expect("the server's store opens");
    (server, remote)
}

/// Through a server: its answers state the payload limit, so a remote worker sends each step
/// as one request (the server makes one store call per request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_server_a_task_step_is_one_request() {
    let store = Backend::Sqlite.open().await;
    // The server writes through the counting store: one call of it per request.
    let counting = Arc::new(Counting::new(store.clone()));
    let (server, remote) = serve(&counting).await;
    steps_on(counting, &remote, store, Lone::PutEntry).await;
    server.abort();
}

/// A server that states no payload limit (one of an earlier release, which does not serve the
/// batch route either) gets each record in a request of its own: the remote worker waits for
/// each result before the workflow goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stating_no_limit_gets_one_request_per_record() {
    let store = Backend::Sqlite.open().await;
    let counting = Arc::new(Counting::new(store.clone()).hiding_limit());
    let (server, remote) = serve(&counting).await;
    run_steps(&counting, &remote, store).await;
    server.abort();
    assert_eq!(counting.calls("put_entries"), 0);
    assert_eq!(counting.calls("put_entry"), 2 * STEPS);
}
