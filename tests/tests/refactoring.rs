//! Every case of the refactoring guide: run version A of a workflow until it suspends, deploy
//! A' under the same name and version, wake the run, and check what replay does.
//!
//! A and A' are two `#[aiki::workflow]` fns with the same `name` and `version`; they declare the
//! same events, so a handle of either accepts what is sent.

use crate::common;

use std::time::Duration;

use aiki::{Clock, Run, RunStatus, State, Task, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, on_every_backend};
use common::{TaskA, TaskB, TaskC};
use serde::{Deserialize, Serialize};

const HOUR: Duration = Duration::from_secs(3600);
const MINUTE: Duration = Duration::from_secs(60);

/// The failure recorded on a failed run, asserting its kind.
fn failure(run: &aiki::RunRecord, kind: &str) -> String {
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.clone().expect("a failed run records its error");
    assert_eq!(error.kind, kind, "{}", error.message);
    error.message
}

fn address<T: Task<Input = String>>(task: T, input: &str) -> String {
    task.address(&input.to_owned()).unwrap().into_string()
}

// Reordering finished tasks: each address returns its own recorded result.
#[aiki::workflow(name = "reorder", version = "1", events(proceed))]
async fn reorder_a(run: &Run, input: String) -> Result<(String, String), WorkflowError> {
    let a = TaskA.start(run, input.clone()).await?;
    let b = TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok((a, b))
}

#[aiki::workflow(name = "reorder", version = "1", events(proceed))]
async fn reorder_a2(run: &Run, input: String) -> Result<(String, String), WorkflowError> {
    let b = TaskB.start(run, input.clone()).await?;
    let a = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok((a, b))
}

async fn reordered_tasks_each_get_their_own_result(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ReorderA)).await;
    let run = h.client.start::<ReorderA>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(ReorderA2)).await;
    run.send::<ReorderAProceed>(()).await.unwrap();
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

// Removing a finished task, with nothing new after it.
#[aiki::workflow(name = "remove", version = "1", events(proceed))]
async fn remove_a(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    let b = TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(b)
}

#[aiki::workflow(name = "remove", version = "1", events(proceed))]
async fn remove_a2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let b = TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(b)
}

async fn removed_task_with_nothing_new_after_it_completes(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(RemoveA)).await;
    let run = h.client.start::<RemoveA>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(RemoveA2)).await;
    run.send::<RemoveAProceed>(()).await.unwrap();
    assert_eq!(
        h.client
            .handle::<RemoveA2>(run.id())
            .result()
            .await
            .unwrap(),
        "task-b(x)"
    );
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );
}

// Removing a task when a not-yet-run task follows.
#[aiki::workflow(name = "remove-then-new", version = "1", events(proceed))]
async fn remove_then_new(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    run.events().proceed().wait().await?;
    TaskB.start(run, input).await
}

#[aiki::workflow(name = "remove-then-new", version = "1", events(proceed))]
async fn remove_then_new2(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.events().proceed().wait().await?;
    TaskB.start(run, input).await
}

async fn removal_followed_by_a_new_task_fails(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(RemoveThenNew)).await;
    let run = h.client.start::<RemoveThenNew>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(RemoveThenNew2)).await;
    run.send::<RemoveThenNewProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(message.contains(&address(TaskB, "x")), "{message}");
    assert!(message.contains(&address(TaskA, "x")), "{message}");
    assert_eq!(h.executions.count("task-b"), 0, "the new task must not run");
}

// Appending after all recorded entries.
#[aiki::workflow(name = "append", version = "1", events(proceed))]
async fn append(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(a)
}

#[aiki::workflow(name = "append", version = "1", events(proceed))]
async fn append2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    TaskB.start(run, a).await
}

async fn appended_task_runs_once(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Append)).await;
    let run = h.client.start::<Append>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Append2)).await;
    run.send::<AppendProceed>(()).await.unwrap();
    assert_eq!(
        h.client.handle::<Append2>(run.id()).result().await.unwrap(),
        "task-b(task-a(x))"
    );
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );
}

// Inserting a task before recorded entries.
#[aiki::workflow(name = "insert", version = "1", events(proceed))]
async fn insert(run: &Run, input: String) -> Result<(), WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(())
}

#[aiki::workflow(name = "insert", version = "1", events(proceed))]
async fn insert2(run: &Run, input: String) -> Result<(), WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    TaskC.start(run, input.clone()).await?;
    TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(())
}

async fn inserted_task_fails_and_never_runs(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Insert)).await;
    let run = h.client.start::<Insert>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Insert2)).await;
    run.send::<InsertProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(
        message.contains(&address(TaskC, "x")),
        "names the new address: {message}"
    );
    assert!(
        message.contains(&address(TaskB, "x")),
        "names the unconsumed one: {message}"
    );
    assert!(
        message.contains("the run has failed") && message.contains("aiki runs retry"),
        "the recorded error says the run failed and how to recover it: {message}"
    );
    assert_eq!(
        h.executions.count("task-c"),
        0,
        "the inserted task never ran"
    );
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );
}

// Changing a task's input.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct OrderInput {
    order_id: String,
    discount: f64,
}

#[aiki::task(name = "process-order")]
async fn process_order(
    input: OrderInput,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    executions.record("process-order");
    Ok(format!("{}@{}", input.order_id, input.discount))
}

/// The same task under a new name.
#[aiki::task(name = "handle-order")]
async fn handle_order(
    input: OrderInput,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    executions.record("handle-order");
    Ok(input.order_id)
}

#[aiki::workflow(name = "change-input", version = "1", events(proceed))]
async fn change_input(run: &Run, input: String) -> Result<String, WorkflowError> {
    let out = ProcessOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.0,
            },
        )
        .await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "change-input", version = "1", events(proceed))]
async fn change_input2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let out = ProcessOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.1,
            },
        )
        .await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

async fn changed_input_fails(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ChangeInput)).await;
    let run = h.client.start::<ChangeInput>("o-1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(ChangeInput2)).await;
    run.send::<ChangeInputProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    failure(&record, "non_determinism");
    assert_eq!(
        h.executions.count("process-order"),
        1,
        "only the original input ran"
    );
}

#[aiki::workflow(name = "rename", version = "1", events(proceed))]
async fn rename(run: &Run, input: String) -> Result<String, WorkflowError> {
    let out = ProcessOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.0,
            },
        )
        .await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "rename", version = "1", events(proceed))]
async fn rename2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let out = HandleOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.0,
            },
        )
        .await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

async fn renamed_task_fails(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Rename)).await;
    let run = h.client.start::<Rename>("o-1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Rename2)).await;
    run.send::<RenameProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(message.contains("handle-order:"), "{message}");
    assert!(message.contains("process-order:"), "{message}");
    assert_eq!(h.executions.count("handle-order"), 0);
}

// Conditional logic changes: only the runs that took the other branch fail.
#[derive(Clone, Serialize, Deserialize, schemars::JsonSchema)]
struct Customer {
    name: String,
    premium: bool,
}

#[aiki::workflow(name = "discount", version = "1", events(proceed))]
async fn discount(run: &Run, input: Customer) -> Result<String, WorkflowError> {
    if input.premium {
        TaskA.start(run, input.name.clone()).await?;
    }
    let out = TaskB.start(run, input.name).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "discount", version = "1", events(proceed))]
async fn discount2(run: &Run, input: Customer) -> Result<String, WorkflowError> {
    TaskA.start(run, input.name.clone()).await?;
    let out = TaskB.start(run, input.name).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

async fn conditional_change_fails_only_runs_of_the_other_branch(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Discount)).await;
    let premium = h
        .client
        .start::<Discount>(Customer {
            name: "ann".into(),
            premium: true,
        })
        .await
        .unwrap();
    let regular = h
        .client
        .start::<Discount>(Customer {
            name: "bob".into(),
            premium: false,
        })
        .await
        .unwrap();
    h.reach(&premium, RunStatus::AwaitingEvent).await;
    h.reach(&regular, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Discount2)).await;
    premium.send::<DiscountProceed>(()).await.unwrap();
    regular.send::<DiscountProceed>(()).await.unwrap();
    h.reach(&premium, RunStatus::Completed).await;
    let record = h.reach(&regular, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(message.contains(&address(TaskA, "bob")), "{message}");
    assert_eq!(
        h.executions.count("task-a"),
        1,
        "only the premium run's discount ever ran"
    );
}

// Event waits: reordered or added by name, they are safe.
#[aiki::workflow(
    name = "waits",
    version = "1",
    events(approved = String, payment_received = u64)
)]
async fn waits(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let approver = run.events().approved().wait().await?;
    let cents = run.events().payment_received().wait().await?;
    Ok(format!("{approver}:{cents}"))
}

#[aiki::workflow(
    name = "waits",
    version = "1",
    events(approved = String, payment_received = u64)
)]
async fn waits2(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let cents = run.events().payment_received().wait().await?;
    let approver = run.events().approved().wait().await?;
    Ok(format!("{approver}:{cents}"))
}

async fn reordered_event_waits_are_safe(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Waits)).await;
    let run = h.client.start::<Waits>("x".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<WaitsApproved>("ann".into()).await.unwrap();
    // Approved is consumed; the run waits for the payment now.
    h.reach_next(&run, RunStatus::AwaitingEvent, &waiting).await;
    h.deploy(|w| w.register(Waits2)).await;
    run.send::<WaitsPaymentReceived>(4200).await.unwrap();
    assert_eq!(
        h.client.handle::<Waits2>(run.id()).result().await.unwrap(),
        "ann:4200"
    );
}

// A declares `approved` too: A' waits for it, and the run started as A is sent it.
#[aiki::workflow(
    name = "add-wait",
    version = "1",
    events(proceed, approved = String)
)]
async fn add_wait(run: &Run, input: String) -> Result<String, WorkflowError> {
    let out = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(
    name = "add-wait",
    version = "1",
    events(proceed, approved = String)
)]
async fn add_wait2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let _approver = run.events().approved().wait().await?;
    let out = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

async fn added_event_wait_is_safe(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(AddWait)).await;
    let run = h.client.start::<AddWait>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(AddWait2)).await;
    run.send::<AddWaitApproved>("ann".into()).await.unwrap();
    run.send::<AddWaitProceed>(()).await.unwrap();
    assert_eq!(
        h.client
            .handle::<AddWait2>(run.id())
            .result()
            .await
            .unwrap(),
        "task-a(x)"
    );
    assert_eq!(h.executions.count("task-a"), 1);
}

#[aiki::workflow(
    name = "add-wait",
    version = "1",
    events(proceed, approved = String)
)]
async fn event_into_input2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let approver = run.events().approved().wait().await?;
    let out = TaskA.start(run, format!("{input}/{approver}")).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

async fn event_data_flowing_into_a_task_input_changes_its_address(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(AddWait)).await;
    let run = h.client.start::<AddWait>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(EventIntoInput2)).await;
    run.send::<AddWaitApproved>("ann".into()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(message.contains(&address(TaskA, "x/ann")), "{message}");
    assert_eq!(h.executions.count("task-a"), 1);
}

// Sleeps with changed durations.
#[aiki::workflow(name = "fulfil", version = "1")]
async fn fulfil(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    run.sleep("wait-for-fulfillment", HOUR).await?;
    TaskB.start(run, input).await
}

#[aiki::workflow(name = "fulfil", version = "1")]
async fn fulfil_longer(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    run.sleep("wait-for-fulfillment", HOUR + 30 * MINUTE)
        .await?;
    TaskB.start(run, input).await
}

#[aiki::workflow(name = "fulfil", version = "1")]
async fn fulfil_shorter(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    run.sleep("wait-for-fulfillment", 30 * MINUTE).await?;
    TaskB.start(run, input).await
}

async fn lengthened_sleep_sleeps_only_the_difference(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Fulfil)).await;
    let run = h.client.start::<Fulfil>("x".into()).await.unwrap();
    let asleep = h.reach(&run, RunStatus::Sleeping).await;
    h.deploy(|w| w.register(FulfilLonger)).await;
    h.advance(HOUR);
    // Woken after the hour, the new code asks for 1 h 30: 30 more minutes, once.
    let again = h.reach_next(&run, RunStatus::Sleeping, &asleep).await;
    assert_eq!(
        again.due_at.unwrap() - h.clock.now(),
        (30 * MINUTE).as_millis() as i64
    );
    h.advance(30 * MINUTE);
    assert_eq!(
        h.client
            .handle::<FulfilLonger>(run.id())
            .result()
            .await
            .unwrap(),
        "task-b(x)"
    );
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );
}

async fn shortened_sleep_continues_at_once(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Fulfil)).await;
    let run = h.client.start::<Fulfil>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    h.deploy(|w| w.register(FulfilShorter)).await;
    h.advance(HOUR);
    assert_eq!(
        h.client
            .handle::<FulfilShorter>(run.id())
            .result()
            .await
            .unwrap(),
        "task-b(x)"
    );
    assert_eq!(
        (h.executions.count("task-a"), h.executions.count("task-b")),
        (1, 1)
    );
}

// Same-named sleeps share a queue: swapping them re-sleeps the remainder.
#[aiki::workflow(name = "delays", version = "1")]
async fn delays(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("delay", 5 * MINUTE).await?;
    run.sleep("delay", HOUR).await?;
    TaskA.start(run, input).await
}

#[aiki::workflow(name = "delays", version = "1")]
async fn delays_swapped(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("delay", HOUR).await?;
    run.sleep("delay", 5 * MINUTE).await?;
    TaskA.start(run, input).await
}

async fn swapped_same_named_sleeps_resleep_the_remainder(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Delays)).await;
    let run = h.client.start::<Delays>("x".into()).await.unwrap();
    let first = h.reach(&run, RunStatus::Sleeping).await;
    h.advance(5 * MINUTE);
    let second = h.reach_next(&run, RunStatus::Sleeping, &first).await;
    h.deploy(|w| w.register(DelaysSwapped)).await;
    h.advance(HOUR);
    let third = h.reach_next(&run, RunStatus::Sleeping, &second).await;
    // The first "delay" now asks for 1 h and reads the recorded 5 min: 55 more minutes.
    assert_eq!(
        third.due_at.unwrap() - h.clock.now(),
        (55 * MINUTE).as_millis() as i64
    );
    assert_eq!(h.executions.count("task-a"), 0);
    h.advance(55 * MINUTE);
    h.reach(&run, RunStatus::Completed).await;
    assert_eq!(h.executions.count("task-a"), 1);
}

#[aiki::workflow(name = "delays", version = "1")]
async fn delays_first_removed(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("delay", HOUR).await?;
    TaskA.start(run, input).await
}

async fn removed_same_named_sleep_resleeps_the_remainder(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Delays)).await;
    let run = h.client.start::<Delays>("x".into()).await.unwrap();
    let first = h.reach(&run, RunStatus::Sleeping).await;
    h.advance(5 * MINUTE);
    let second = h.reach_next(&run, RunStatus::Sleeping, &first).await;
    h.deploy(|w| w.register(DelaysFirstRemoved)).await;
    h.advance(HOUR);
    // The remaining "delay" reads the first record (5 min): 55 more minutes.
    let third = h.reach_next(&run, RunStatus::Sleeping, &second).await;
    assert_eq!(
        third.due_at.unwrap() - h.clock.now(),
        (55 * MINUTE).as_millis() as i64
    );
    h.advance(55 * MINUTE);
    h.reach(&run, RunStatus::Completed).await;
    assert_eq!(h.executions.count("task-a"), 1);
}

// Different-named sleeps have their own queues: reordering them changes nothing.
#[aiki::workflow(name = "named-sleeps", version = "1")]
async fn named_sleeps(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("initial-delay", 5 * MINUTE).await?;
    run.sleep("cooldown-period", HOUR).await?;
    TaskA.start(run, input).await
}

#[aiki::workflow(name = "named-sleeps", version = "1")]
async fn named_sleeps_swapped(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("cooldown-period", HOUR).await?;
    run.sleep("initial-delay", 5 * MINUTE).await?;
    TaskA.start(run, input).await
}

async fn reordered_different_named_sleeps_are_safe(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(NamedSleeps)).await;
    let run = h.client.start::<NamedSleeps>("x".into()).await.unwrap();
    let first = h.reach(&run, RunStatus::Sleeping).await;
    h.advance(5 * MINUTE);
    h.reach_next(&run, RunStatus::Sleeping, &first).await;
    h.deploy(|w| w.register(NamedSleepsSwapped)).await;
    // After the hour (1 h 5 min in all), both queues are satisfied: no extra sleep.
    h.advance(HOUR);
    assert_eq!(
        h.client
            .handle::<NamedSleepsSwapped>(run.id())
            .result()
            .await
            .unwrap(),
        "task-a(x)"
    );
}

// A changed output shape: the recorded `{email}` does not match `{email_address}`.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct User {
    email: String,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct UserRenamed {
    email_address: String,
}

#[aiki::task(name = "fetch-user")]
async fn fetch_user(id: String) -> Result<User, TaskError> {
    Ok(User {
        email: format!("{id}@example.com"),
    })
}

/// The same task, its output's field renamed.
#[aiki::task(name = "fetch-user")]
async fn fetch_user_renamed(id: String) -> Result<UserRenamed, TaskError> {
    Ok(UserRenamed {
        email_address: format!("{id}@example.com"),
    })
}

#[aiki::workflow(name = "shape", version = "1", events(proceed))]
async fn shape(run: &Run, input: String) -> Result<String, WorkflowError> {
    let user = FetchUser.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(user.email)
}

#[aiki::workflow(name = "shape", version = "1", events(proceed))]
async fn shape2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let user = FetchUserRenamed.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(user.email_address)
}

async fn changed_output_shape_fails_with_a_schema_error(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Shape)).await;
    let run = h.client.start::<Shape>("u1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Shape2)).await;
    run.send::<ShapeProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "output_schema_mismatch");
    assert!(message.contains("task `fetch-user`"), "{message}");
    assert!(
        message.contains(&FetchUser.address(&"u1".to_owned()).unwrap().into_string()),
        "{message}"
    );
    assert!(
        message.contains("email_address"),
        "says what did not match: {message}"
    );
}

// A versioned output enum keeps working across the change.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "version")]
enum ContactV1 {
    #[serde(rename = "1")]
    V1 { email: String },
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "version")]
enum ContactV2 {
    #[serde(rename = "1")]
    V1 { email: String },
    #[serde(rename = "2")]
    V2 { email_address: String },
}

#[aiki::task(name = "fetch-contact")]
async fn fetch_contact(id: String) -> Result<ContactV1, TaskError> {
    Ok(ContactV1::V1 {
        email: format!("{id}@example.com"),
    })
}

/// The same task, its output enum grown a version.
#[aiki::task(name = "fetch-contact")]
async fn fetch_contact2(id: String) -> Result<ContactV2, TaskError> {
    Ok(ContactV2::V2 {
        email_address: format!("{id}@example.com"),
    })
}

#[aiki::workflow(name = "contact", version = "1", events(proceed))]
async fn contact(run: &Run, input: String) -> Result<String, WorkflowError> {
    let ContactV1::V1 { email } = FetchContact.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(email)
}

#[aiki::workflow(name = "contact", version = "1", events(proceed))]
async fn contact2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let email = match FetchContact2.start(run, input).await? {
        ContactV2::V1 { email } => email,
        ContactV2::V2 { email_address } => email_address,
    };
    run.events().proceed().wait().await?;
    Ok(email)
}

async fn versioned_output_enum_keeps_working(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Contact)).await;
    let run = h.client.start::<Contact>("u1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Contact2)).await;
    run.send::<ContactProceed>(()).await.unwrap();
    assert_eq!(
        h.client
            .handle::<Contact2>(run.id())
            .result()
            .await
            .unwrap(),
        "u1@example.com"
    );
}

// The same task with the same input twice: two entries, replayed in order.

/// Returns how many times it has run so far (1, 2, …).
#[aiki::task(name = "next-number")]
async fn next_number(
    _input: String,
    State(executions): State<Executions>,
) -> Result<usize, TaskError> {
    executions.record("next-number");
    Ok(executions.count("next-number"))
}

#[aiki::workflow(name = "twice", version = "1", events(proceed))]
async fn twice(run: &Run, input: String) -> Result<(usize, usize), WorkflowError> {
    let first = NextNumber.start(run, input.clone()).await?;
    let second = NextNumber.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok((first, second))
}

async fn same_task_same_input_twice_replays_in_order(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Twice)).await;
    let run = h.client.start::<Twice>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<TwiceProceed>(()).await.unwrap();
    assert_eq!(run.result().await.unwrap(), (1, 2));
    assert_eq!(
        h.executions.count("next-number"),
        2,
        "replay ran neither call again"
    );
    let history = h.store.load_history(run.id()).await.unwrap();
    let indices: Vec<u32> = history.entries.iter().map(|e| e.index).collect();
    assert_eq!(indices, [0, 1]);
}

// A workflow that swallows a non-determinism error still fails.
#[aiki::workflow(name = "insert", version = "1", events(proceed))]
async fn swallow2(run: &Run, input: String) -> Result<(), WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    let _ignored: Result<String, WorkflowError> = TaskC.start(run, input.clone()).await;
    TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(())
}

async fn swallowed_non_determinism_still_fails_the_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Insert)).await;
    let run = h.client.start::<Insert>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Swallow2)).await;
    run.send::<InsertProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    failure(&record, "non_determinism");
    assert_eq!(h.executions.count("task-c"), 0);
}

on_every_backend!(
    reordered_tasks_each_get_their_own_result,
    removed_task_with_nothing_new_after_it_completes,
    removal_followed_by_a_new_task_fails,
    appended_task_runs_once,
    inserted_task_fails_and_never_runs,
    changed_input_fails,
    renamed_task_fails,
    conditional_change_fails_only_runs_of_the_other_branch,
    reordered_event_waits_are_safe,
    added_event_wait_is_safe,
    event_data_flowing_into_a_task_input_changes_its_address,
    lengthened_sleep_sleeps_only_the_difference,
    shortened_sleep_continues_at_once,
    swapped_same_named_sleeps_resleep_the_remainder,
    removed_same_named_sleep_resleeps_the_remainder,
    reordered_different_named_sleeps_are_safe,
    changed_output_shape_fails_with_a_schema_error,
    versioned_output_enum_keeps_working,
    same_task_same_input_twice_replays_in_order,
    swallowed_non_determinism_still_fails_the_run,
);
