//! Reliability of the runtime at its edges: inputs checked at start, children in their
//! parent's pool, errors in the user's words, idempotency keys, and histories that cannot be
//! read (corrupt, or written by a newer release).

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aiki::{ClientError, Run, RunStatus, State, TaskContext, TaskError, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};
use serde::{Deserialize, Serialize};

// Inputs are checked against their schema at start, and when a child run is created.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct Items {
    #[schemars(range(min = 1))]
    quantity: u32,
}

#[aiki::workflow(name = "order", version = "1")]
async fn order(_run: &Run, items: Items) -> Result<u32, WorkflowError> {
    Ok(items.quantity)
}

#[aiki::workflow(name = "order-parent", version = "1")]
async fn order_parent(run: &Run, quantity: u32) -> Result<u32, WorkflowError> {
    let child = run.child::<Order>(Items { quantity }).await?;
    child.wait().await
}

async fn an_input_that_breaks_its_schema_is_refused_at_start(backend: Backend) {
    let h = Harness::new(backend).await;
    let error = h
        .client
        .start::<Order>(Items { quantity: 0 })
        .await
        .unwrap_err();
    assert!(matches!(error, ClientError::InvalidInput { .. }), "{error}");
    assert!(
        error.to_string().contains("quantity"),
        "names the field: {error}"
    );
    let fine = h.client.start::<Order>(Items { quantity: 2 }).await;
    assert!(fine.is_ok(), "a valid input starts: {fine:?}");
}

async fn a_child_input_that_breaks_its_schema_fails_the_parent(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(OrderParent).register(Order)).await;
    let bad = h.client.start::<OrderParent>(0).await.unwrap();
    let failed = h.reach(&bad, RunStatus::Failed).await;
    let error = failed.error.expect("an error");
    assert_eq!(error.kind, "invalid_input", "{error}");
    assert!(error.message.contains("quantity"), "{error}");
    let history = h.store.load_history(bad.id()).await.unwrap();
    assert!(history.children.is_empty(), "no child run was created");
    let good = h.client.start::<OrderParent>(3).await.unwrap();
    assert_eq!(good.result().await.unwrap(), 3);
}

// Children inherit their parent's pool unless told otherwise.
#[aiki::workflow(name = "pool-parent", version = "1")]
async fn pool_parent(run: &Run, quantity: u32) -> Result<(u32, u32), WorkflowError> {
    let inherited = run.child::<Order>(Items { quantity }).await?;
    let elsewhere = run
        .child::<Order>(Items {
            quantity: quantity + 1,
        })
        .pool("cpu")
        .await?;
    Ok((inherited.wait().await?, elsewhere.wait().await?))
}

async fn a_child_runs_in_its_parents_pool(backend: Backend) {
    let mut h = Harness::new(backend).await;
    // The only worker serves pool `gpu`; another serves pool `cpu`.
    h.deploy(|w| w.pool("gpu").register(PoolParent).register(Order))
        .await;
    let cpu = h
        .worker_builder()
        .pool("cpu")
        .register(Order)
        .build()
        .unwrap()
        .start();
    let run = h.client.start::<PoolParent>(5).pool("gpu").await.unwrap();
    assert_eq!(run.result().await.unwrap(), (5, 6));
    let children = h.store.load_history(run.id()).await.unwrap().children;
    let mut pools: Vec<&str> = children.iter().map(|child| child.pool.as_str()).collect();
    pools.sort();
    assert_eq!(pools, ["cpu", "gpu"]);
    cpu.shutdown().await;
}

// Errors in the user's words.
#[aiki::workflow(name = "short", version = "1", events(note = String))]
async fn short(_run: &Run, input: u32) -> Result<u32, WorkflowError> {
    Ok(input)
}

async fn an_event_for_an_ended_run_says_the_run_ended(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Short)).await;
    let run = h.client.start::<Short>(1).await.unwrap();
    assert_eq!(run.result().await.unwrap(), 1);
    let error = run.send::<ShortNote>("late".into()).await.unwrap_err();
    assert!(
        matches!(
            error,
            ClientError::RunEnded {
                status: RunStatus::Completed,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("has ended"), "{error}");
    assert!(
        h.store
            .load_history(run.id())
            .await
            .unwrap()
            .events
            .is_empty()
    );
}

async fn cancelling_an_ended_run_changes_nothing(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Short)).await;
    let run = h.client.start::<Short>(1).await.unwrap();
    let done = h.reach(&run, RunStatus::Completed).await;
    let again = run.cancel().await.unwrap();
    assert_eq!(again, done, "the run comes back unchanged");
    assert_eq!(run.record().await.unwrap(), done);
}

// Idempotency keys: per run, address and call index; stable across attempts and replays.
#[derive(Debug, Default, Clone)]
struct Keys(Arc<Mutex<Vec<(String, u32, String)>>>);

#[aiki::task(name = "charge", retry = fixed(max_attempts = 2, delay_ms = 1))]
async fn charge(cents: u32, State(keys): State<Keys>, ctx: TaskContext) -> Result<u32, TaskError> {
    keys.0.lock().unwrap().push((
        ctx.run_id().to_string(),
        ctx.attempt(),
        ctx.idempotency_key(),
    ));
    if ctx.attempt() == 1 {
        return Err(TaskError::new("the provider timed out"));
    }
    Ok(cents)
}

#[aiki::workflow(name = "charge-twice", version = "1")]
async fn charge_twice(run: &Run, cents: u32) -> Result<u32, WorkflowError> {
    let first = Charge.start(run, cents).await?;
    run.sleep("between", Duration::from_secs(60)).await?;
    let second = Charge.start(run, cents).await?;
    Ok(first + second)
}

async fn idempotency_keys_are_per_run_and_call_and_stable_across_attempts(backend: Backend) {
    let mut h = Harness::new(backend).await;
    let keys = Keys::default();
    let state = keys.clone();
    h.deploy(move |w| w.register(ChargeTwice).task(Charge).state(state))
        .await;
    let a = h.client.start::<ChargeTwice>(5).await.unwrap();
    let b = h.client.start::<ChargeTwice>(5).await.unwrap();
    // The 1 ms retry delays run on the manual clock: move it on a millisecond at a time until
    // both runs sleep, then past the sleep, then until both complete.
    let until = |wanted: RunStatus| {
        let (a, b, h) = (&a, &b, &h);
        async move {
            for _ in 0..2_000 {
                let done =
                    a.status().await.unwrap() == wanted && b.status().await.unwrap() == wanted;
                if done {
                    return;
                }
                h.advance(Duration::from_millis(1));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            panic!("the runs did not reach `{wanted}`");
        }
    };
    until(RunStatus::Sleeping).await;
    h.advance(Duration::from_secs(61));
    until(RunStatus::Completed).await;
    assert_eq!(a.result().await.unwrap(), 10);
    assert_eq!(b.result().await.unwrap(), 10);
    let seen = keys.0.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        8,
        "two runs × two calls × two attempts: {seen:?}"
    );
    let of = |run: &aiki::RunHandle<ChargeTwice>| -> Vec<(u32, String)> {
        seen.iter()
            .filter(|(id, _, _)| *id == run.id().to_string())
            .map(|(_, attempt, key)| (*attempt, key.clone()))
            .collect()
    };
    let (a_keys, b_keys) = (of(&a), of(&b));
    // Each call's two attempts share one key; the two calls (same input) differ.
    assert_eq!(a_keys[0].1, a_keys[1].1, "{a_keys:?}");
    assert_eq!(a_keys[2].1, a_keys[3].1, "{a_keys:?}");
    assert_ne!(a_keys[0].1, a_keys[2].1, "the second call has its own key");
    // The same input in another run gets other keys.
    assert_ne!(a_keys[0].1, b_keys[0].1, "another run, another key");
    assert_eq!(a_keys[0].1.len(), 64);
}

async fn a_task_needing_state_the_worker_lacks_fails_at_build(backend: Backend) {
    let h = Harness::new(backend).await;
    // `charge` reads `State<Keys>`; this worker is given no `Keys`.
    let error = aiki::Worker::builder(h.store.clone())
        .register(ChargeTwice)
        .task(Charge)
        .build()
        .unwrap_err();
    assert!(matches!(error, ClientError::Config(_)), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("`charge`") && message.contains("Keys"),
        "{message}"
    );
    assert!(
        aiki::Worker::builder(h.store.clone())
            .register(ChargeTwice)
            .task(Charge)
            .state(Keys::default())
            .build()
            .is_ok()
    );
}

// Tasks returning `anyhow::Result` (feature `anyhow`) keep their error chain.
#[aiki::task(name = "lookup")]
async fn lookup(key: String) -> anyhow::Result<u32> {
    use anyhow::Context;
    let parsed: Result<u32, _> = key.parse();
    parsed.context(format!("looking up `{key}`"))
}

#[aiki::task(name = "lookup-explicit")]
async fn lookup_explicit(key: String) -> Result<u32, anyhow::Error> {
    if key.is_empty() {
        anyhow::bail!("an empty key");
    }
    Ok(key.len() as u32)
}

#[aiki::workflow(name = "lookups", version = "1")]
async fn lookups(run: &Run, key: String) -> Result<u32, WorkflowError> {
    let length = LookupExplicit.start(run, key.clone()).await?;
    let value = Lookup.start(run, key).await?;
    Ok(length + value)
}

async fn anyhow_task_errors_keep_their_chain(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Lookups)).await;
    let good = h.client.start::<Lookups>("42".into()).await.unwrap();
    assert_eq!(good.result().await.unwrap(), 44);
    let bad = h.client.start::<Lookups>("forty-two".into()).await.unwrap();
    let failed = h.reach(&bad, RunStatus::Failed).await;
    let error = failed.error.expect("an error");
    assert_eq!(error.kind, "task_failed", "{error}");
    assert!(
        error
            .message
            .contains("looking up `forty-two`: invalid digit"),
        "the context and its cause: {error}"
    );
    let empty = h.client.start::<Lookups>(String::new()).await.unwrap();
    let failed = h.reach(&empty, RunStatus::Failed).await;
    assert!(failed.error.unwrap().message.contains("an empty key"));
}

/// Every warning logged in this test binary, as `target: message fields`.
fn warnings() -> &'static Mutex<Vec<String>> {
    static WARNINGS: std::sync::OnceLock<Mutex<Vec<String>>> = std::sync::OnceLock::new();
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        tracing::subscriber::set_global_default(WarningLog).expect("one global subscriber");
    });
    WARNINGS.get_or_init(Default::default)
}

/// A subscriber that keeps the text of `warn` events (no spans needed).
struct WarningLog;

impl tracing::Subscriber for WarningLog {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        let mut text = Text(event.metadata().target().to_owned());
        event.record(&mut text);
        warnings().lock().unwrap().push(text.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[aiki::workflow(name = "elsewhere-parent", version = "1")]
async fn elsewhere_parent(run: &Run, quantity: u32) -> Result<u32, WorkflowError> {
    let child = run.child::<Order>(Items { quantity }).await?;
    child.wait().await
}

async fn a_child_this_worker_does_not_serve_is_warned_once(backend: Backend) {
    let log = warnings();
    let mut h = Harness::new(backend).await;
    // This worker serves the parent only; `order@1` is another service's.
    h.deploy(|w| w.register(ElsewhereParent)).await;
    let first = h.client.start::<ElsewhereParent>(1).await.unwrap();
    let second = h.client.start::<ElsewhereParent>(2).await.unwrap();
    for run in [&first, &second] {
        h.reach(run, RunStatus::AwaitingChildWorkflow).await;
    }
    let child = h
        .store
        .load_history(first.id())
        .await
        .unwrap()
        .children
        .remove(0);
    assert_eq!(child.status, RunStatus::Queued, "nothing here serves it");
    let seen: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains("does not register") && line.contains("order@1"))
        .cloned()
        .collect();
    assert!(!seen.is_empty(), "warned: {seen:?}");
    assert!(seen.len() <= 1, "once per process, not per start: {seen:?}");
}

on_every_backend!(
    a_child_this_worker_does_not_serve_is_warned_once,
    anyhow_task_errors_keep_their_chain,
    a_task_needing_state_the_worker_lacks_fails_at_build,
    an_input_that_breaks_its_schema_is_refused_at_start,
    a_child_input_that_breaks_its_schema_fails_the_parent,
    a_child_runs_in_its_parents_pool,
    an_event_for_an_ended_run_says_the_run_ended,
    cancelling_an_ended_run_changes_nothing,
    idempotency_keys_are_per_run_and_call_and_stable_across_attempts,
);

// Histories that cannot be read: a corrupt record fails the run; a record of a newer release
// releases it for a newer worker. SQL stores only (the records are edited in the database).
#[aiki::workflow(name = "two-steps", version = "1")]
async fn two_steps(run: &Run, input: String) -> Result<String, WorkflowError> {
    let first = common::TaskA.start(run, input).await?;
    run.sleep("between", Duration::from_secs(60)).await?;
    common::TaskB.start(run, first).await
}

/// Runs one SQL statement against the database a store URL names.
async fn edit(url: &str, sql: &str) {
    use sqlx::Connection;
    if url.starts_with("sqlite:") {
        let mut connection = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query(sql).execute(&mut connection).await.unwrap();
    } else {
        let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query(sql).execute(&mut connection).await.unwrap();
    }
}

/// A run of `two-steps` asleep after its first task, on a fresh store of `backend`.
async fn asleep_after_one_task(backend: Backend) -> (String, Harness, aiki::RunHandle<TwoSteps>) {
    let url = backend.fresh_url().await;
    let mut h = Harness::on_url(&url).await;
    h.deploy(|w| w.register(TwoSteps).task(common::TaskA).task(common::TaskB))
        .await;
    let run = h.client.start::<TwoSteps>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    (url, h, run)
}

async fn a_corrupt_record_fails_the_run_with_a_typed_error(backend: Backend) {
    let (url, h, run) = asleep_after_one_task(backend).await;
    edit(
        &url,
        "UPDATE aiki_entries SET output = 'not json {' WHERE address LIKE 'task-a:%'",
    )
    .await;
    h.advance(Duration::from_secs(61));
    let failed = h.reach(&run, RunStatus::Failed).await;
    let error = failed.error.expect("an error");
    assert_eq!(error.kind, "corrupt_history", "{error}");
    assert!(
        error.message.contains(&run.id().to_string()),
        "names the run: {error}"
    );
    assert!(
        error.message.contains("task-a:"),
        "names the record: {error}"
    );
    let result = run.result().await.unwrap_err();
    assert!(
        result.to_string().contains("corrupt_history")
            || result.to_string().contains("cannot be read"),
        "{result}"
    );
    assert_eq!(h.executions.count("task-b"), 0);
}

async fn a_record_of_a_newer_release_is_left_for_a_newer_worker(backend: Backend) {
    let (url, mut h, run) = asleep_after_one_task(backend).await;
    edit(
        &url,
        "UPDATE aiki_entries SET status = 'superseded' WHERE address LIKE 'task-a:%'",
    )
    .await;
    // The run is queued twice: woken (revision + 1), then claimed (+ 2) and released (+ 3).
    // The second one is the release (seen in CI: the first was taken for it).
    let mut claimed = run.record().await.unwrap();
    claimed.revision += 2;
    h.advance(Duration::from_secs(61));
    let released = h.reach_next(&run, RunStatus::Queued, &claimed).await;
    assert!(released.error.is_none(), "not failed: {released:?}");
    // The worker backs off: it stops claiming the run (each claim and release would move the
    // revision on). A claim pass whose request was built before the back-off was recorded may
    // still take the run once more after the release (seen in CI: released + 2), so at most
    // one more cycle, and then the revision stands still.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = run.record().await.unwrap();
    assert_eq!(later.status, RunStatus::Queued, "{later:?}");
    assert!(
        later.revision <= released.revision + 2,
        "claimed again and again: {} after a release at {}",
        later.revision,
        released.revision
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = run.record().await.unwrap();
    assert_eq!(
        (still.status, still.revision),
        (RunStatus::Queued, later.revision),
        "the worker kept claiming the run"
    );
    // A worker that can read the record (here: the record repaired) takes the run.
    edit(
        &url,
        "UPDATE aiki_entries SET status = 'completed' WHERE address LIKE 'task-a:%'",
    )
    .await;
    h.deploy(|w| w.register(TwoSteps).task(common::TaskA).task(common::TaskB))
        .await;
    assert_eq!(run.result().await.unwrap(), "task-b(task-a(x))");
    assert_eq!(
        h.executions.count("task-a"),
        1,
        "the recorded task did not run again"
    );
}

aiki_tests::on_sql_backends!(
    a_corrupt_record_fails_the_run_with_a_typed_error,
    a_record_of_a_newer_release_is_left_for_a_newer_worker,
);
