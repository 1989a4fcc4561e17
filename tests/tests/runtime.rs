//! End-to-end behaviour of the runtime beyond refactoring: events, timeouts, children,
//! operator actions, versions, crashes, retries and zombie executors.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aiki::{
    ClientError, Clock, ConflictPolicy, Registry, Run, RunHandle, RunStatus, State, TaskContext,
    TaskError, Worker, Workflow, WorkflowError,
};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};
use common::{TaskA, TaskB};
use tokio::sync::Notify;

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

// Events.
#[aiki::workflow(name = "collect", version = "1", events(approved = String))]
async fn collect(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let approver = run.events().approved().wait().await?;
    let second = run.events().approved().wait().await?;
    Ok(format!("{approver},{second}"))
}

async fn events_sent_before_the_wait_are_kept_in_order(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let run = h.client.start::<Collect>("x".into()).await.unwrap();
    // `send` carries no reference id, so it is never dropped: it returns `()`, not a flag.
    run.send::<CollectApproved>("ann".into()).await.unwrap();
    run.send::<CollectApproved>("bob".into()).await.unwrap();
    h.deploy(|w| w.register(Collect)).await;
    assert_eq!(run.result().await.unwrap(), "ann,bob");
}

async fn events_with_a_seen_reference_id_are_dropped(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let run = h.client.start::<Collect>("x".into()).await.unwrap();
    let send = |who: &str| run.send_once::<CollectApproved>(who.to_owned(), "approval-1");
    assert!(send("ann").await.unwrap());
    assert!(!send("ann again").await.unwrap(), "a duplicate is dropped");
    assert!(
        run.send_once::<CollectApproved>("bob".into(), "approval-2")
            .await
            .unwrap()
    );
    h.deploy(|w| w.register(Collect)).await;
    assert_eq!(run.result().await.unwrap(), "ann,bob");
}

async fn invalid_event_payloads_are_refused(backend: Backend) {
    let h = Harness::new(backend).await;
    let run = h.client.start::<Collect>("x".into()).await.unwrap();
    let error = run
        .send_json("approved", serde_json::json!(42), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::InvalidInput { .. }), "{error}");
    let error = run
        .send_json("aproved", serde_json::json!("ann"), None)
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::UnknownEvent { .. }), "{error}");
    assert!(
        error.to_string().contains("`approved`"),
        "lists the declared events: {error}"
    );
    let history = h.store.load_history(run.id()).await.unwrap();
    assert!(history.events.is_empty(), "nothing invalid was stored");
}

#[aiki::workflow(name = "timeout", version = "1", events(approved = String))]
async fn timeout(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let approver = run.events().approved().wait_timeout(10 * MINUTE).await?;
    let seen = TaskA
        .start(run, approver.unwrap_or_else(|| "nobody".into()))
        .await?;
    run.sleep("after", HOUR).await?;
    Ok(seen)
}

async fn event_wait_timeout_is_recorded_for_replay(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Timeout)).await;
    let run = h.client.start::<Timeout>("x".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingEvent).await;
    h.advance(10 * MINUTE);
    h.reach_next(&run, RunStatus::Sleeping, &waiting).await;
    // A late event must not change what the timed-out wait returned when the run replays.
    run.send::<TimeoutApproved>("late".into()).await.unwrap();
    h.advance(HOUR);
    assert_eq!(run.result().await.unwrap(), "task-a(nobody)");
    assert_eq!(h.executions.count("task-a"), 1);
}

// join! of waits is AND; tasks started together run concurrently.
#[aiki::workflow(
    name = "both",
    version = "1",
    events(approved = String, payment_received = u64)
)]
async fn both(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let (approver, cents) = tokio::join!(
        run.events().approved().wait(),
        run.events().payment_received().wait()
    );
    let (a, b) = tokio::join!(
        TaskA.start(run, approver?),
        TaskB.start(run, cents?.to_string())
    );
    Ok(format!("{}+{}", a?, b?))
}

async fn joined_waits_mean_and(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Both)).await;
    let run = h.client.start::<Both>("x".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<BothApproved>("ann".into()).await.unwrap();
    h.reach_next(&run, RunStatus::AwaitingEvent, &waiting).await;
    run.send::<BothPaymentReceived>(7).await.unwrap();
    assert_eq!(run.result().await.unwrap(), "task-a(ann)+task-b(7)");
}

// Sleeps and operator actions.
#[aiki::workflow(name = "nap", version = "1")]
async fn nap(run: &Run, input: String) -> Result<bool, WorkflowError> {
    let outcome = run.sleep("nap", HOUR).await?;
    TaskA.start(run, input).await?;
    Ok(outcome.cancelled)
}

async fn wakeup_ends_a_sleep_early_as_cancelled(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Nap)).await;
    let run = h.client.start::<Nap>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    run.wakeup().await.unwrap();
    assert!(
        run.result().await.unwrap(),
        "the sleep reports it was cancelled"
    );
}

async fn a_sleep_ends_when_its_time_comes(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Nap)).await;
    let run = h.client.start::<Nap>("x".into()).await.unwrap();
    let asleep = h.reach(&run, RunStatus::Sleeping).await;
    assert_eq!(
        asleep.due_at,
        Some(asleep.created_at + HOUR.as_millis() as i64)
    );
    h.advance(59 * MINUTE);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(run.status().await.unwrap(), RunStatus::Sleeping);
    h.advance(MINUTE);
    assert!(!run.result().await.unwrap());
}

async fn pause_and_resume(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let run = h.client.start::<Nap>("x".into()).await.unwrap();
    run.pause().await.unwrap();
    h.deploy(|w| w.register(Nap)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        run.status().await.unwrap(),
        RunStatus::Paused,
        "a paused run is not delivered"
    );
    run.resume().await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    let error = h.client.handle::<Nap>(run.id()).resume().await.unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::InvalidAction {
                status: RunStatus::Sleeping,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("`paused`"), "{error}");
}

// Child workflows.
#[aiki::workflow(name = "child", version = "1")]
async fn child(run: &Run, input: u64) -> Result<u64, WorkflowError> {
    run.sleep("think", MINUTE).await?;
    if input == 13 {
        return Err(WorkflowError::failed("unlucky"));
    }
    Ok(input * 10)
}

#[aiki::workflow(name = "parent", version = "1")]
async fn parent(run: &Run, input: Vec<u64>) -> Result<Vec<String>, WorkflowError> {
    let mut children = Vec::new();
    for n in input {
        children.push(run.child::<Child>(n).start().await?);
    }
    let mut outputs = Vec::new();
    for child in &children {
        outputs.push(match child.wait().await {
            Ok(out) => out.to_string(),
            Err(WorkflowError::ChildFailed { status, .. }) => format!("child {status}"),
            Err(other) => return Err(other),
        });
    }
    Ok(outputs)
}

/// Waits until every child run of `parent` sleeps: a child that records its sleep only after
/// the clock moved would sleep a full minute from then, and the scenario would hang.
async fn children_asleep<W: Workflow>(h: &Harness, parent: &RunHandle<W>) {
    for child in h.store.load_history(parent.id()).await.unwrap().children {
        h.reach(&h.client.handle::<Child>(child.id), RunStatus::Sleeping)
            .await;
    }
}

async fn children_fan_out_and_gather(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Parent).register(Child)).await;
    let run = h.client.start::<Parent>(vec![1, 2, 13]).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    children_asleep(&h, &run).await;
    h.advance(MINUTE);
    assert_eq!(run.result().await.unwrap(), ["10", "20", "child failed"]);
    let history = h.store.load_history(run.id()).await.unwrap();
    assert_eq!(history.children.len(), 3);
    assert!(
        history
            .entries
            .iter()
            .all(|e| e.kind == aiki::store::EntryKind::Child)
    );
}

/// Sleeps `input` minutes; input 2 fails.
#[aiki::workflow(name = "join-child", version = "1")]
async fn join_child(run: &Run, input: u64) -> Result<u64, WorkflowError> {
    run.sleep("think", MINUTE * input as u32).await?;
    if input == 2 {
        return Err(WorkflowError::failed("two is not allowed"));
    }
    Ok(input)
}

/// Executions of each `join-parent` run.
static JOIN_EXECUTIONS: std::sync::Mutex<Vec<aiki::RunId>> = std::sync::Mutex::new(Vec::new());

fn join_executions(id: aiki::RunId) -> usize {
    JOIN_EXECUTIONS
        .lock()
        .unwrap()
        .iter()
        .filter(|run| **run == id)
        .count()
}

#[aiki::workflow(name = "join-parent", version = "1")]
async fn join_parent(run: &Run, input: Vec<u64>) -> Result<Vec<u64>, WorkflowError> {
    JOIN_EXECUTIONS.lock().unwrap().push(run.id());
    let mut children = Vec::new();
    for n in input {
        children.push(run.child::<JoinChild>(n).start().await?);
    }
    run.join_children(&children).await
}

/// `join_children` suspends once on all the children: the parent is not woken by the ones that
/// end before the last, and wakes once for the last, or for the first failure.
async fn join_children_wakes_once(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(JoinParent).register(JoinChild))
        .await;
    let run = h.client.start::<JoinParent>(vec![1, 3, 5]).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    let mut children = Vec::new();
    for c in h.store.load_history(run.id()).await.unwrap().children {
        let record = h.store.get_run(c.id).await.unwrap();
        children.push((record.input.as_u64().unwrap(), c.id));
        h.reach(&h.client.handle::<JoinChild>(c.id), RunStatus::Sleeping)
            .await;
    }
    children.sort();
    let wait = waiting.wait.clone().expect("a wait set");
    assert!(wait.all_children, "one all-of wait: {wait:?}");
    assert_eq!(wait.children.len(), 3);
    // The children end at 1, 3 and 5 minutes; the first two leave the parent waiting.
    for (minutes, (_, child)) in [1, 2].into_iter().zip(&children) {
        h.advance(MINUTE * minutes);
        h.reach(&h.client.handle::<JoinChild>(*child), RunStatus::Completed)
            .await;
        let parent = h.store.get_run(run.id()).await.unwrap();
        assert_eq!(parent.status, RunStatus::AwaitingChildWorkflow);
        assert_eq!(
            parent.revision, waiting.revision,
            "not woken by an early child"
        );
    }
    h.advance(MINUTE * 2);
    assert_eq!(run.result().await.unwrap(), [1, 3, 5]);
    assert_eq!(
        join_executions(run.id()),
        2,
        "started, then woken once by the last child"
    );
    let woken = h
        .store
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .filter(|change| change.reason == "a child run ended")
        .count();
    assert_eq!(woken, 1, "woken once");

    let failing = h.client.start::<JoinParent>(vec![1, 2, 5]).await.unwrap();
    h.reach(&failing, RunStatus::AwaitingChildWorkflow).await;
    for c in h.store.load_history(failing.id()).await.unwrap().children {
        h.reach(&h.client.handle::<JoinChild>(c.id), RunStatus::Sleeping)
            .await;
    }
    h.advance(MINUTE * 2);
    let failed = h.reach(&failing, RunStatus::Failed).await;
    assert!(
        failed.error.unwrap().message.contains("two is not allowed"),
        "the first failure fails the join"
    );
    assert_eq!(
        join_executions(failing.id()),
        2,
        "woken once, by the failure"
    );
}

async fn cancel_cancels_child_runs(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Parent).register(Child)).await;
    let run = h.client.start::<Parent>(vec![1, 2]).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    let children = h.store.load_history(run.id()).await.unwrap().children;
    assert_eq!(children.len(), 2);
    for child in &children {
        h.reach(&h.client.handle::<Child>(child.id), RunStatus::Sleeping)
            .await;
    }
    run.cancel().await.unwrap();
    assert_eq!(run.status().await.unwrap(), RunStatus::Cancelled);
    for child in children {
        assert_eq!(
            h.client.handle::<Child>(child.id).status().await.unwrap(),
            RunStatus::Cancelled
        );
    }
}

#[aiki::workflow(name = "shared-child", version = "1")]
async fn shared_child(run: &Run, input: u64) -> Result<(u64, u64, bool), WorkflowError> {
    let first = run
        .child::<Child>(input)
        .reference_id("the-one")
        .start()
        .await?;
    let again = run
        .child::<Child>(input)
        .reference_id("the-one")
        .start()
        .await?;
    let conflict = run
        .child::<Child>(input + 1)
        .reference_id("the-one")
        .start()
        .await;
    let same = first.id() == again.id();
    let is_conflict = matches!(conflict, Err(WorkflowError::ChildConflict { .. }));
    Ok((first.wait().await?, u64::from(same), is_conflict))
}

async fn child_starts_dedupe_by_reference_id(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(SharedChild).register(Child)).await;
    let run = h.client.start::<SharedChild>(4).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    children_asleep(&h, &run).await;
    h.advance(MINUTE);
    assert_eq!(run.result().await.unwrap(), (40, 1, true));
}

#[aiki::workflow(name = "impatient", version = "1")]
async fn impatient(run: &Run, input: u64) -> Result<Option<u64>, WorkflowError> {
    let child = run.child::<Child>(input).start().await?;
    child.wait_timeout(Duration::from_secs(30)).await
}

async fn child_wait_timeout(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Impatient).register(Child)).await;
    let run = h.client.start::<Impatient>(1).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    h.advance(Duration::from_secs(30));
    assert_eq!(run.result().await.unwrap(), None);
}

// Versions and delivery.
#[aiki::workflow(name = "greet", version = "1.0.0")]
async fn greet_v1(_run: &Run, input: String) -> Result<String, WorkflowError> {
    Ok(format!("hello {input}"))
}

#[aiki::workflow(name = "greet", version = "2.0.0")]
async fn greet_v2(_run: &Run, input: String) -> Result<String, WorkflowError> {
    Ok(format!("hi {input}"))
}

async fn versions_run_side_by_side_and_are_never_coerced(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.client
        .set_config(aiki::ConfigKey::StallMaxAge, HOUR.as_millis() as i64)
        .await
        .unwrap();
    h.deploy(|w| w.register(GreetV1)).await;
    let v1 = h.client.start::<GreetV1>("ann".into()).await.unwrap();
    let v2 = h.client.start::<GreetV2>("bob".into()).await.unwrap();
    assert_eq!(v1.result().await.unwrap(), "hello ann");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        v2.status().await.unwrap(),
        RunStatus::Queued,
        "no worker serves 2.0.0"
    );
    h.advance(HOUR + MINUTE);
    h.reach(&v2, RunStatus::Stalled).await;
    v2.requeue().await.unwrap();
    h.deploy(|w| w.register(GreetV1).register(GreetV2)).await;
    assert_eq!(v2.result().await.unwrap(), "hi bob");
}

async fn starts_are_idempotent_by_reference_id(backend: Backend) {
    let h = Harness::new(backend).await;
    let first = h
        .client
        .start::<GreetV1>("ann".into())
        .reference_id("r1")
        .await
        .unwrap();
    let again = h
        .client
        .start::<GreetV1>("ann".into())
        .reference_id("r1")
        .await
        .unwrap();
    assert_eq!(first.id(), again.id());
    let error = h
        .client
        .start::<GreetV1>("bob".into())
        .reference_id("r1")
        .await
        .unwrap_err();
    assert!(
        matches!(error, ClientError::ReferenceConflict { existing, .. } if existing == first.id())
    );
    let existing = h
        .client
        .start::<GreetV1>("bob".into())
        .reference_id("r1")
        .conflict_policy(ConflictPolicy::ReturnExisting)
        .await
        .unwrap();
    assert_eq!(existing.id(), first.id());
}

async fn scheduled_starts_wait_for_their_time(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(GreetV1)).await;
    let at = h.clock.now() + HOUR.as_millis() as i64;
    let run = h
        .client
        .start::<GreetV1>("ann".into())
        .start_at(at)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(run.status().await.unwrap(), RunStatus::Scheduled);
    h.advance(HOUR);
    assert_eq!(run.result().await.unwrap(), "hello ann");
}

async fn worker_configuration_is_checked(backend: Backend) {
    let h = Harness::new(backend).await;
    let twice = h
        .worker_builder()
        .register(GreetV1)
        .register(GreetV1)
        .build();
    assert!(matches!(twice, Err(ClientError::Config(message)) if message.contains("greet@1.0.0")));
    // The refresh interval must be below half of the store's claim idle timeout (90 s by
    // default): checked as the worker starts, naming both.
    let slow = Worker::builder(h.store.clone())
        .claim_refresh_interval(Duration::from_secs(45))
        .build()
        .unwrap();
    match slow.verify().await {
        Err(ClientError::Config(message)) => {
            assert!(message.contains("45s"), "{message}");
            assert!(
                message.contains("claimIdleTimeoutMs` = 90000 ms"),
                "{message}"
            );
        }
        other => panic!("a 45 s refresh under a 90 s timeout is refused: {other:?}"),
    }
    let fits = Worker::builder(h.store.clone())
        .claim_refresh_interval(Duration::from_secs(44))
        .build()
        .unwrap();
    assert_eq!(
        fits.verify().await.unwrap().claim_idle_timeout_ms,
        90_000,
        "44 s fits"
    );
    let zero = Worker::builder(h.store.clone())
        .claim_refresh_interval(Duration::ZERO)
        .build();
    assert!(matches!(zero, Err(ClientError::Config(_))));
    let same_name = h
        .worker_builder()
        .task(Gated)
        .task(Gated)
        .task(GatedOnce)
        .state(Arc::new(Gate::default()))
        .build();
    assert!(same_name.is_ok(), "one type declared twice is fine");
    let clash = h.worker_builder().task(Flaky).task(FlakyImpostor).build();
    assert!(matches!(clash, Err(ClientError::Config(message)) if message.contains("`flaky`")));
}

async fn a_registry_is_checked_whole_wherever_it_is_given(backend: Backend) {
    let h = Harness::new(backend).await;
    // A task that reads state, without the state: refused by the registry itself.
    let stateless = Registry::builder().task(Gated).build();
    assert!(
        matches!(&stateless, Err(ClientError::Config(message)) if message.contains("needs state")),
        "{stateless:?}"
    );
    let registry = Registry::builder()
        .register(GreetV1)
        .task(Flaky)
        .state(h.executions.clone())
        .build()
        .unwrap();
    assert_eq!(
        registry
            .namespaces()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["greet@1.0.0"]
    );
    assert_eq!(registry.tasks().len(), 1);
    assert_eq!(registry.catalog().len(), 1);
    // A worker serving it, with more registered on the worker's builder: checked as one.
    let twice = h
        .worker_builder()
        .registry(registry.clone())
        .register(GreetV1)
        .build();
    assert!(matches!(twice, Err(ClientError::Config(message)) if message.contains("twice")));
    let clash = h
        .worker_builder()
        .registry(registry.clone())
        .task(FlakyImpostor)
        .build();
    assert!(matches!(clash, Err(ClientError::Config(message)) if message.contains("`flaky`")));
    let worker = h
        .worker_builder()
        .registry(registry)
        .register(GreetV2)
        .build()
        .unwrap();
    let mut served: Vec<String> = worker
        .registry()
        .namespaces()
        .map(ToString::to_string)
        .collect();
    served.sort();
    assert_eq!(served, ["greet@1.0.0", "greet@2.0.0"]);
    // A registry's state comes with it: its tasks' needs are met on the worker too.
    let gated = Registry::builder()
        .task(Gated)
        .state(Arc::new(Gate::default()))
        .state(h.executions.clone())
        .build()
        .unwrap();
    assert!(h.worker_builder().registry(gated).build().is_ok());
}

/// Another task type that claims the name `flaky`.
#[aiki::task(name = "flaky")]
async fn flaky_impostor(input: u64) -> Result<u64, TaskError> {
    Ok(input)
}

// Crashes, retries, zombies.

#[derive(Default)]
struct Gate {
    open: Notify,
    entered: Notify,
    first: AtomicU32,
}

/// Blocks its first execution until the gate opens; later executions pass at once. Returns the
/// attempt that produced the result.
#[aiki::task(name = "gated", retry = fixed(max_attempts = 3, delay_ms = 1))]
async fn gated(
    input: String,
    State(executions): State<Executions>,
    State(gate): State<Arc<Gate>>,
    ctx: TaskContext,
) -> Result<String, TaskError> {
    executions.record("gated");
    if gate.first.fetch_add(1, Ordering::SeqCst) == 0 {
        gate.entered.notify_one();
        gate.open.notified().await;
    }
    Ok(format!("{input} by attempt {}", ctx.attempt()))
}

/// As `gated`, without retries.
#[aiki::task(name = "gated-once")]
async fn gated_once(
    input: String,
    executions: State<Executions>,
    gate: State<Arc<Gate>>,
    ctx: TaskContext,
) -> Result<String, TaskError> {
    gated(input, executions, gate, ctx).await
}

#[aiki::workflow(name = "crashy", version = "1")]
async fn crashy(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input.clone()).await?;
    let g = Gated.start(run, a).await?;
    Ok(g)
}

#[aiki::workflow(name = "crashy-once", version = "1")]
async fn crashy_once(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input.clone()).await?;
    GatedOnce.start(run, a).await
}

const REFRESH: Duration = Duration::from_secs(3600);
const IDLE: Duration = Duration::from_secs(3 * 3600);

/// A worker serving `workflow` with the gate, whose claims only go stale when the manual
/// clock jumps past `IDLE`.
fn gated_worker<W: aiki::Workflow>(
    worker: aiki::WorkerBuilder,
    workflow: W,
    gate: &Arc<Gate>,
) -> aiki::WorkerBuilder {
    worker
        .register(workflow)
        .state(gate.clone())
        .claim_refresh_interval(REFRESH)
}

async fn crashed_run_resumes_without_rerunning_recorded_tasks(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let gate = Arc::new(Gate::default());
    h.set_idle_timeout(IDLE).await;
    h.deploy(|w| gated_worker(w, Crashy, &gate)).await;
    let run = h.client.start::<Crashy>("x".into()).await.unwrap();
    gate.entered.notified().await;
    h.crash_worker().await;
    h.deploy(|w| gated_worker(w, Crashy, &gate)).await;
    assert_eq!(
        run.status().await.unwrap(),
        RunStatus::Running,
        "the dead owner still holds it"
    );
    h.recover_claim(run.id(), IDLE, REFRESH).await;
    // Recovery released the run; the interrupted attempt counts as failed and is retried.
    assert_eq!(run.result().await.unwrap(), "task-a(x) by attempt 2");
    assert_eq!(
        h.executions.count("task-a"),
        1,
        "the recorded task never ran again"
    );
    assert_eq!(h.executions.count("gated"), 2);
}

async fn interrupted_task_without_retries_fails_as_interrupted(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let gate = Arc::new(Gate::default());
    h.set_idle_timeout(IDLE).await;
    h.deploy(|w| gated_worker(w, CrashyOnce, &gate)).await;
    let run = h.client.start::<CrashyOnce>("x".into()).await.unwrap();
    gate.entered.notified().await;
    h.crash_worker().await;
    h.deploy(|w| gated_worker(w, CrashyOnce, &gate)).await;
    h.recover_claim(run.id(), IDLE, REFRESH).await;
    let record = h.reach(&run, RunStatus::Failed).await;
    assert_eq!(record.error.unwrap().kind, "interrupted");
    assert_eq!(h.executions.count("gated"), 1, "at most once under `never`");
}

async fn zombie_executor_is_fenced_by_the_revision(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let gate = Arc::new(Gate::default());
    h.set_idle_timeout(IDLE).await;
    // The first worker keeps running (a zombie: alive but silent, its time frozen as in a
    // paused process, so it never refreshes its claim); a second takes over.
    // Its one slot stays taken by the stuck execution, so it claims nothing else (a frozen
    // process would not either): without that, it could claim the run again once released.
    let zombie = gated_worker(h.worker_builder(), Crashy, &gate)
        .clock(aiki::ManualClock::new(h.clock.now()))
        .daemons(false)
        .max_concurrent_runs(1)
        .build()
        .unwrap()
        .start();
    let run = h.client.start::<Crashy>("x".into()).await.unwrap();
    gate.entered.notified().await;
    let owned = run.record().await.unwrap();
    h.deploy(|w| gated_worker(w, Crashy, &gate)).await;
    h.recover_claim(run.id(), IDLE, REFRESH).await;
    let done = h.reach(&run, RunStatus::Completed).await;
    assert!(
        done.revision >= owned.revision + 3,
        "released, claimed, completed"
    );
    let before = h.store.load_history(run.id()).await.unwrap();
    // The zombie wakes up and reports its result with its old revision: refused.
    gate.open.notify_one();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = h.store.load_history(run.id()).await.unwrap();
    assert_eq!(
        before, after,
        "nothing the zombie wrote afterwards is in the history"
    );
    assert_eq!(
        after.run.output,
        Some(serde_json::json!("task-a(x) by attempt 2"))
    );
    zombie.shutdown().await;
}

/// Fails until its third attempt.
#[aiki::task(name = "flaky", retry = exponential(max_attempts = 3, base_delay_ms = 60000))]
async fn flaky(
    _input: String,
    State(executions): State<Executions>,
    ctx: TaskContext,
) -> Result<u32, TaskError> {
    executions.record("flaky");
    if ctx.attempt() < 3 {
        return Err(TaskError::new(format!("attempt {} failed", ctx.attempt())));
    }
    Ok(ctx.attempt())
}

#[aiki::workflow(name = "retrying", version = "1")]
async fn retrying(run: &Run, input: String) -> Result<u32, WorkflowError> {
    Flaky.start(run, input).await
}

async fn task_retries_until_success_with_backoff(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Retrying)).await;
    let run = h.client.start::<Retrying>("x".into()).await.unwrap();
    let first = h.reach(&run, RunStatus::AwaitingRetry).await;
    assert_eq!(
        first.due_at.unwrap() - h.clock.now(),
        MINUTE.as_millis() as i64
    );
    h.advance(MINUTE);
    let second = h.reach_next(&run, RunStatus::AwaitingRetry, &first).await;
    assert_eq!(
        second.due_at.unwrap() - h.clock.now(),
        2 * MINUTE.as_millis() as i64,
        "doubled"
    );
    h.advance(2 * MINUTE);
    assert_eq!(run.result().await.unwrap(), 3);
    let entry = &h.store.load_history(run.id()).await.unwrap().entries[0];
    assert_eq!(entry.attempts, 3);
    assert_eq!(h.executions.count("flaky"), 3);
}

/// Always fails, permanently.
#[aiki::task(name = "broken")]
async fn broken(_input: String, State(executions): State<Executions>) -> Result<String, TaskError> {
    executions.record("broken");
    Err(TaskError::new("out of order"))
}

#[aiki::workflow(name = "handles", version = "1")]
async fn handles(run: &Run, input: String) -> Result<String, WorkflowError> {
    match Broken.start(run, input.clone()).await {
        Ok(out) => Ok(out),
        Err(WorkflowError::TaskFailed {
            message, attempts, ..
        }) => {
            TaskB
                .start(run, format!("{message} after {attempts}"))
                .await
        }
        Err(other) => Err(other),
    }
}

#[aiki::workflow(name = "unhandled", version = "1")]
async fn unhandled(run: &Run, input: String) -> Result<String, WorkflowError> {
    Broken.start(run, input).await
}

async fn a_failed_task_can_be_handled_or_fails_the_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Handles).register(Unhandled)).await;
    let handled = h.client.start::<Handles>("x".into()).await.unwrap();
    assert_eq!(
        handled.result().await.unwrap(),
        "task-b(out of order after 1)"
    );
    let unhandled = h.client.start::<Unhandled>("x".into()).await.unwrap();
    let record = h.reach(&unhandled, RunStatus::Failed).await;
    let error = record.error.unwrap();
    assert_eq!(error.kind, "task_failed");
    assert!(error.message.contains("broken"), "{}", error.message);
}

/// Fails on the first workflow attempt, succeeds on the next.
#[aiki::task(name = "first-attempt-fails")]
async fn first_attempt_fails(
    workflow_attempt: u32,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    executions.record("first-attempt-fails");
    if executions.count("first-attempt-fails") == 1 {
        return Err(TaskError::new("not yet"));
    }
    Ok(format!("ok in workflow attempt {workflow_attempt}"))
}

#[aiki::workflow(
    name = "retried-workflow",
    version = "1",
    retry = fixed(max_attempts = 2, delay_ms = 60000)
)]
async fn retried_workflow(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input).await?;
    FirstAttemptFails.start(run, 1).await
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
    events_sent_before_the_wait_are_kept_in_order,
    events_with_a_seen_reference_id_are_dropped,
    invalid_event_payloads_are_refused,
    event_wait_timeout_is_recorded_for_replay,
    joined_waits_mean_and,
    wakeup_ends_a_sleep_early_as_cancelled,
    a_sleep_ends_when_its_time_comes,
    pause_and_resume,
    children_fan_out_and_gather,
    join_children_wakes_once,
    cancel_cancels_child_runs,
    child_starts_dedupe_by_reference_id,
    child_wait_timeout,
    versions_run_side_by_side_and_are_never_coerced,
    starts_are_idempotent_by_reference_id,
    scheduled_starts_wait_for_their_time,
    worker_configuration_is_checked,
    a_registry_is_checked_whole_wherever_it_is_given,
    crashed_run_resumes_without_rerunning_recorded_tasks,
    interrupted_task_without_retries_fails_as_interrupted,
    zombie_executor_is_fenced_by_the_revision,
    task_retries_until_success_with_backoff,
    a_failed_task_can_be_handled_or_fails_the_run,
    workflow_retry_replays_completed_tasks_and_reruns_failed_ones,
);
