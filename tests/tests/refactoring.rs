//! Every case of the refactoring guide: run version A of a workflow until it suspends, deploy
//! A' under the same name and version, wake the run, and check what replay does.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod common;

use std::time::Duration;

use aiki::{Clock, Run, RunStatus, Task, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};
use common::{Approved, NextNumber, PaymentReceived, Proceed, TaskA, TaskB, TaskC};
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
workflow!(ReorderA, "reorder", "1", |run,
                                     input: String|
 -> (String, String) {
    let a = TaskA.start(run, input.clone()).await?;
    let b = TaskB.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok((a, b))
});
workflow!(ReorderA2, "reorder", "1", |run,
                                      input: String|
 -> (String, String) {
    let b = TaskB.start(run, input.clone()).await?;
    let a = TaskA.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok((a, b))
});

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

// Removing a finished task, with nothing new after it.
workflow!(RemoveA, "remove", "1", |run, input: String| -> String {
    TaskA.start(run, input.clone()).await?;
    let b = TaskB.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(b)
});
workflow!(RemoveA2, "remove", "1", |run, input: String| -> String {
    let b = TaskB.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(b)
});

async fn removed_task_with_nothing_new_after_it_completes(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(RemoveA)).await;
    let run = h.client.start::<RemoveA>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(RemoveA2)).await;
    run.send::<Proceed>(()).await.unwrap();
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
workflow!(RemoveThenNew, "remove-then-new", "1", |run,
                                                  input: String|
 -> String {
    TaskA.start(run, input.clone()).await?;
    run.event::<Proceed>().wait().await?;
    TaskB.start(run, input).await
});
workflow!(RemoveThenNew2, "remove-then-new", "1", |run,
                                                   input: String|
 -> String {
    run.event::<Proceed>().wait().await?;
    TaskB.start(run, input).await
});

async fn removal_followed_by_a_new_task_fails(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(RemoveThenNew)).await;
    let run = h.client.start::<RemoveThenNew>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(RemoveThenNew2)).await;
    run.send::<Proceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(message.contains(&address(TaskB, "x")), "{message}");
    assert!(message.contains(&address(TaskA, "x")), "{message}");
    assert_eq!(h.executions.count("task-b"), 0, "the new task must not run");
}

// Appending after all recorded entries.
workflow!(Append, "append", "1", |run, input: String| -> String {
    let a = TaskA.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(a)
});
workflow!(Append2, "append", "1", |run, input: String| -> String {
    let a = TaskA.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    TaskB.start(run, a).await
});

async fn appended_task_runs_once(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Append)).await;
    let run = h.client.start::<Append>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Append2)).await;
    run.send::<Proceed>(()).await.unwrap();
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
workflow!(Insert, "insert", "1", |run, input: String| -> () {
    TaskA.start(run, input.clone()).await?;
    TaskB.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(())
});
workflow!(Insert2, "insert", "1", |run, input: String| -> () {
    TaskA.start(run, input.clone()).await?;
    TaskC.start(run, input.clone()).await?;
    TaskB.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(())
});

async fn inserted_task_fails_and_never_runs(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Insert)).await;
    let run = h.client.start::<Insert>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Insert2)).await;
    run.send::<Proceed>(()).await.unwrap();
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

struct ProcessOrder;

impl Task for ProcessOrder {
    type Input = OrderInput;
    type Output = String;
    const NAME: &'static str = "process-order";

    async fn execute(
        &self,
        input: OrderInput,
        ctx: aiki::TaskContext,
    ) -> Result<String, aiki::TaskError> {
        ctx.state::<aiki_tests::Executions>()?
            .record("process-order");
        Ok(format!("{}@{}", input.order_id, input.discount))
    }
}

/// The same task under a new name.
struct HandleOrder;

impl Task for HandleOrder {
    type Input = OrderInput;
    type Output = String;
    const NAME: &'static str = "handle-order";

    async fn execute(
        &self,
        input: OrderInput,
        ctx: aiki::TaskContext,
    ) -> Result<String, aiki::TaskError> {
        ctx.state::<aiki_tests::Executions>()?
            .record("handle-order");
        Ok(input.order_id)
    }
}

workflow!(ChangeInput, "change-input", "1", |run,
                                             input: String|
 -> String {
    let out = ProcessOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.0,
            },
        )
        .await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});
workflow!(ChangeInput2, "change-input", "1", |run,
                                              input: String|
 -> String {
    let out = ProcessOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.1,
            },
        )
        .await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});

async fn changed_input_fails(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ChangeInput)).await;
    let run = h.client.start::<ChangeInput>("o-1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(ChangeInput2)).await;
    run.send::<Proceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    failure(&record, "non_determinism");
    assert_eq!(
        h.executions.count("process-order"),
        1,
        "only the original input ran"
    );
}

workflow!(Rename, "rename", "1", |run, input: String| -> String {
    let out = ProcessOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.0,
            },
        )
        .await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});
workflow!(Rename2, "rename", "1", |run, input: String| -> String {
    let out = HandleOrder
        .start(
            run,
            OrderInput {
                order_id: input,
                discount: 0.0,
            },
        )
        .await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});

async fn renamed_task_fails(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Rename)).await;
    let run = h.client.start::<Rename>("o-1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Rename2)).await;
    run.send::<Proceed>(()).await.unwrap();
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

workflow!(Discount, "discount", "1", |run,
                                      input: Customer|
 -> String {
    if input.premium {
        TaskA.start(run, input.name.clone()).await?;
    }
    let out = TaskB.start(run, input.name).await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});
workflow!(Discount2, "discount", "1", |run,
                                       input: Customer|
 -> String {
    TaskA.start(run, input.name.clone()).await?;
    let out = TaskB.start(run, input.name).await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});

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
    premium.send::<Proceed>(()).await.unwrap();
    regular.send::<Proceed>(()).await.unwrap();
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
workflow!(Waits, "waits", "1", |run, input: String| -> String {
    let approver = run.event::<Approved>().wait().await?;
    let cents = run.event::<PaymentReceived>().wait().await?;
    Ok(format!("{approver}:{cents}"))
});
workflow!(Waits2, "waits", "1", |run, input: String| -> String {
    let cents = run.event::<PaymentReceived>().wait().await?;
    let approver = run.event::<Approved>().wait().await?;
    Ok(format!("{approver}:{cents}"))
});

async fn reordered_event_waits_are_safe(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Waits)).await;
    let run = h.client.start::<Waits>("x".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<Approved>("ann".into()).await.unwrap();
    // Approved is consumed; the run waits for the payment now.
    h.reach_next(&run, RunStatus::AwaitingEvent, &waiting).await;
    h.deploy(|w| w.register(Waits2)).await;
    run.send::<PaymentReceived>(4200).await.unwrap();
    assert_eq!(
        h.client.handle::<Waits2>(run.id()).result().await.unwrap(),
        "ann:4200"
    );
}

workflow!(AddWait, "add-wait", "1", |run, input: String| -> String {
    let out = TaskA.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});
workflow!(AddWait2, "add-wait", "1", |run, input: String| -> String {
    let _approver = run.event::<Approved>().wait().await?;
    let out = TaskA.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});

async fn added_event_wait_is_safe(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(AddWait)).await;
    let run = h.client.start::<AddWait>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(AddWait2)).await;
    run.send::<Approved>("ann".into()).await.unwrap();
    run.send::<Proceed>(()).await.unwrap();
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

workflow!(EventIntoInput2, "add-wait", "1", |run,
                                             input: String|
 -> String {
    let approver = run.event::<Approved>().wait().await?;
    let out = TaskA.start(run, format!("{input}/{approver}")).await?;
    run.event::<Proceed>().wait().await?;
    Ok(out)
});

async fn event_data_flowing_into_a_task_input_changes_its_address(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(AddWait)).await;
    let run = h.client.start::<AddWait>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(EventIntoInput2)).await;
    run.send::<Approved>("ann".into()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "non_determinism");
    assert!(message.contains(&address(TaskA, "x/ann")), "{message}");
    assert_eq!(h.executions.count("task-a"), 1);
}

// Sleeps with changed durations.
workflow!(Fulfil, "fulfil", "1", |run, input: String| -> String {
    TaskA.start(run, input.clone()).await?;
    run.sleep("wait-for-fulfillment", HOUR).await?;
    TaskB.start(run, input).await
});
workflow!(FulfilLonger, "fulfil", "1", |run,
                                        input: String|
 -> String {
    TaskA.start(run, input.clone()).await?;
    run.sleep("wait-for-fulfillment", HOUR + 30 * MINUTE)
        .await?;
    TaskB.start(run, input).await
});
workflow!(FulfilShorter, "fulfil", "1", |run,
                                         input: String|
 -> String {
    TaskA.start(run, input.clone()).await?;
    run.sleep("wait-for-fulfillment", 30 * MINUTE).await?;
    TaskB.start(run, input).await
});

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
workflow!(Delays, "delays", "1", |run, input: String| -> String {
    run.sleep("delay", 5 * MINUTE).await?;
    run.sleep("delay", HOUR).await?;
    TaskA.start(run, input).await
});
workflow!(DelaysSwapped, "delays", "1", |run,
                                         input: String|
 -> String {
    run.sleep("delay", HOUR).await?;
    run.sleep("delay", 5 * MINUTE).await?;
    TaskA.start(run, input).await
});

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

// A changed output shape: the recorded `{email}` does not match `{email_address}`.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct User {
    email: String,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct UserRenamed {
    email_address: String,
}

struct FetchUser;

impl Task for FetchUser {
    type Input = String;
    type Output = User;
    const NAME: &'static str = "fetch-user";

    async fn execute(&self, id: String, _ctx: aiki::TaskContext) -> Result<User, aiki::TaskError> {
        Ok(User {
            email: format!("{id}@example.com"),
        })
    }
}

struct FetchUserRenamed;

impl Task for FetchUserRenamed {
    type Input = String;
    type Output = UserRenamed;
    const NAME: &'static str = "fetch-user";

    async fn execute(
        &self,
        id: String,
        _ctx: aiki::TaskContext,
    ) -> Result<UserRenamed, aiki::TaskError> {
        Ok(UserRenamed {
            email_address: format!("{id}@example.com"),
        })
    }
}

workflow!(Shape, "shape", "1", |run, input: String| -> String {
    let user = FetchUser.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(user.email)
});
workflow!(Shape2, "shape", "1", |run, input: String| -> String {
    let user = FetchUserRenamed.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(user.email_address)
});

async fn changed_output_shape_fails_with_a_schema_error(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Shape)).await;
    let run = h.client.start::<Shape>("u1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Shape2)).await;
    run.send::<Proceed>(()).await.unwrap();
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

struct FetchContact;

impl Task for FetchContact {
    type Input = String;
    type Output = ContactV1;
    const NAME: &'static str = "fetch-contact";

    async fn execute(
        &self,
        id: String,
        _ctx: aiki::TaskContext,
    ) -> Result<ContactV1, aiki::TaskError> {
        Ok(ContactV1::V1 {
            email: format!("{id}@example.com"),
        })
    }
}

struct FetchContact2;

impl Task for FetchContact2 {
    type Input = String;
    type Output = ContactV2;
    const NAME: &'static str = "fetch-contact";

    async fn execute(
        &self,
        id: String,
        _ctx: aiki::TaskContext,
    ) -> Result<ContactV2, aiki::TaskError> {
        Ok(ContactV2::V2 {
            email_address: format!("{id}@example.com"),
        })
    }
}

workflow!(Contact, "contact", "1", |run, input: String| -> String {
    let ContactV1::V1 { email } = FetchContact.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(email)
});
workflow!(Contact2, "contact", "1", |run, input: String| -> String {
    let email = match FetchContact2.start(run, input).await? {
        ContactV2::V1 { email } => email,
        ContactV2::V2 { email_address } => email_address,
    };
    run.event::<Proceed>().wait().await?;
    Ok(email)
});

async fn versioned_output_enum_keeps_working(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Contact)).await;
    let run = h.client.start::<Contact>("u1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Contact2)).await;
    run.send::<Proceed>(()).await.unwrap();
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
workflow!(Twice, "twice", "1", |run,
                                input: String|
 -> (usize, usize) {
    let first = NextNumber.start(run, input.clone()).await?;
    let second = NextNumber.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok((first, second))
});

async fn same_task_same_input_twice_replays_in_order(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Twice)).await;
    let run = h.client.start::<Twice>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    run.send::<Proceed>(()).await.unwrap();
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
workflow!(Swallow2, "insert", "1", |run, input: String| -> () {
    TaskA.start(run, input.clone()).await?;
    let _ignored: Result<String, WorkflowError> = TaskC.start(run, input.clone()).await;
    TaskB.start(run, input).await?;
    run.event::<Proceed>().wait().await?;
    Ok(())
});

async fn swallowed_non_determinism_still_fails_the_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Insert)).await;
    let run = h.client.start::<Insert>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| w.register(Swallow2)).await;
    run.send::<Proceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    failure(&record, "non_determinism");
    assert_eq!(h.executions.count("task-c"), 0);
}

/// `Run` is only used through the workflow macro above.
#[allow(dead_code)]
fn uses(_: &Run) {}

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
    changed_output_shape_fails_with_a_schema_error,
    versioned_output_enum_keeps_working,
    same_task_same_input_twice_replays_in_order,
    swallowed_non_determinism_still_fails_the_run,
);
