//! Every case of the refactoring guide, run for real: start a run on the original code, let it
//! suspend (on an event or a sleep), stop the worker, deploy changed code under the same name
//! and version, wake the run, and see what replay does. Prints one row per case and checks it
//! against the guide (exits with an error if a case does not behave as documented).
//!
//! A shared `ManualClock` drives the worker and the client, so hour-long sleeps take
//! milliseconds.
//!
//! Run it with `cargo run -p aiki-examples --example refactoring`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aiki::{
    Client, Clock, Connection, ManualClock, Run, RunHandle, RunRecord, RunStatus, State, TaskError,
    Worker, WorkerBuilder, WorkerHandle, Workflow, WorkflowError,
};
use anyhow::{Context, ensure};
use serde::{Deserialize, Serialize};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

// ---------------------------------------------------------------------------------------------
// Tasks. Each records that it ran, so the example can show what replay did *not* run again.

/// How often each task ran, shared with the tasks as worker state.
#[derive(Clone, Debug, Default)]
struct Executions(Arc<Mutex<BTreeMap<&'static str, usize>>>);

impl Executions {
    fn record(&self, task: &'static str) {
        *self.0.lock().unwrap().entry(task).or_default() += 1;
    }
    fn count(&self, task: &str) -> usize {
        self.0.lock().unwrap().get(task).copied().unwrap_or(0)
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
    fn summary(&self) -> String {
        let counts = self.0.lock().unwrap();
        let ran: Vec<String> = counts.iter().map(|(t, n)| format!("{t} {n}x")).collect();
        format!(
            "ran: {}",
            if ran.is_empty() {
                "nothing".to_owned()
            } else {
                ran.join(", ")
            }
        )
    }
}

#[aiki::task(name = "task-a")]
async fn task_a(input: String, State(log): State<Executions>) -> Result<String, TaskError> {
    log.record("task-a");
    Ok(format!("a({input})"))
}

#[aiki::task(name = "task-b")]
async fn task_b(input: String, State(log): State<Executions>) -> Result<String, TaskError> {
    log.record("task-b");
    Ok(format!("b({input})"))
}

#[aiki::task(name = "task-c")]
async fn task_c(input: String, State(log): State<Executions>) -> Result<String, TaskError> {
    log.record("task-c");
    Ok(format!("c({input})"))
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct OrderInput {
    order_id: String,
    discount: f64,
}

#[aiki::task(name = "process-order")]
async fn process_order(
    order: OrderInput,
    State(log): State<Executions>,
) -> Result<String, TaskError> {
    log.record("process-order");
    Ok(format!("{}@{}", order.order_id, order.discount))
}

/// `process-order` renamed.
#[aiki::task(name = "handle-order")]
async fn handle_order(
    order: OrderInput,
    State(log): State<Executions>,
) -> Result<String, TaskError> {
    log.record("handle-order");
    Ok(format!("{}@{}", order.order_id, order.discount))
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct User {
    email: String,
}

/// `User` with a renamed field: an incompatible output change.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct UserRenamed {
    email_address: String,
}

#[aiki::task(name = "fetch-user")]
async fn fetch_user(id: String, State(log): State<Executions>) -> Result<User, TaskError> {
    log.record("fetch-user");
    Ok(User {
        email: format!("{id}@example.com"),
    })
}

/// `User` with its field renamed *and made optional*: replaying `{email}` into it would read
/// `None`, were it not for the rename check.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct UserOptionalRenamed {
    email_address: Option<String>,
}

#[aiki::task(name = "fetch-user")]
async fn fetch_user_optional_renamed(
    id: String,
    State(log): State<Executions>,
) -> Result<UserOptionalRenamed, TaskError> {
    log.record("fetch-user");
    Ok(UserOptionalRenamed {
        email_address: Some(format!("{id}@example.com")),
    })
}

#[aiki::task(name = "fetch-user")]
async fn fetch_user_renamed(
    id: String,
    State(log): State<Executions>,
) -> Result<UserRenamed, TaskError> {
    log.record("fetch-user");
    Ok(UserRenamed {
        email_address: format!("{id}@example.com"),
    })
}

/// An output with a version discriminator...
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "version")]
enum ContactV1 {
    #[serde(rename = "1")]
    V1 { email: String },
}

/// ...that later gains a variant while keeping the old one.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "version")]
enum ContactV2 {
    #[serde(rename = "1")]
    V1 { email: String },
    #[serde(rename = "2")]
    V2 { email_address: String },
}

#[aiki::task(name = "fetch-contact")]
async fn fetch_contact(id: String, State(log): State<Executions>) -> Result<ContactV1, TaskError> {
    log.record("fetch-contact");
    Ok(ContactV1::V1 {
        email: format!("{id}@example.com"),
    })
}

#[aiki::task(name = "fetch-contact")]
async fn fetch_contact_v2(
    id: String,
    State(log): State<Executions>,
) -> Result<ContactV2, TaskError> {
    log.record("fetch-contact");
    Ok(ContactV2::V2 {
        email_address: format!("{id}@example.com"),
    })
}

// ---------------------------------------------------------------------------------------------
// Workflows: each case is a `before` and an `after` with the same name and version.

#[aiki::workflow(name = "reorder", version = "1", events(proceed))]
async fn reorder_before(run: &Run, input: String) -> Result<(String, String), WorkflowError> {
    let a = TaskA.start(run, input.clone()).await?;
    let b = TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok((a, b))
}

#[aiki::workflow(name = "reorder", version = "1", events(proceed))]
async fn reorder_after(run: &Run, input: String) -> Result<(String, String), WorkflowError> {
    let b = TaskB.start(run, input.clone()).await?;
    let a = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok((a, b))
}

#[aiki::workflow(name = "remove", version = "1", events(proceed))]
async fn remove_before(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    let b = TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(b)
}

#[aiki::workflow(name = "remove", version = "1", events(proceed))]
async fn remove_after(run: &Run, input: String) -> Result<String, WorkflowError> {
    let b = TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(b)
}

#[aiki::workflow(name = "remove-then-new", version = "1", events(proceed))]
async fn remove_then_new_before(run: &Run, input: String) -> Result<String, WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    run.events().proceed().wait().await?;
    TaskB.start(run, input).await
}

#[aiki::workflow(name = "remove-then-new", version = "1", events(proceed))]
async fn remove_then_new_after(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.events().proceed().wait().await?;
    TaskB.start(run, input).await
}

#[aiki::workflow(name = "append", version = "1", events(proceed))]
async fn append_before(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(a)
}

#[aiki::workflow(name = "append", version = "1", events(proceed))]
async fn append_after(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    TaskB.start(run, a).await
}

#[aiki::workflow(name = "insert", version = "1", events(proceed))]
async fn insert_before(run: &Run, input: String) -> Result<(), WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(())
}

#[aiki::workflow(name = "insert", version = "1", events(proceed))]
async fn insert_after(run: &Run, input: String) -> Result<(), WorkflowError> {
    TaskA.start(run, input.clone()).await?;
    TaskC.start(run, input.clone()).await?;
    TaskB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(())
}

#[aiki::workflow(name = "change-input", version = "1", events(proceed))]
async fn change_input_before(run: &Run, order_id: String) -> Result<String, WorkflowError> {
    let order = OrderInput {
        order_id,
        discount: 0.0,
    };
    let out = ProcessOrder.start(run, order).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "change-input", version = "1", events(proceed))]
async fn change_input_after(run: &Run, order_id: String) -> Result<String, WorkflowError> {
    let order = OrderInput {
        order_id,
        discount: 0.1,
    };
    let out = ProcessOrder.start(run, order).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "rename", version = "1", events(proceed))]
async fn rename_before(run: &Run, order_id: String) -> Result<String, WorkflowError> {
    let order = OrderInput {
        order_id,
        discount: 0.0,
    };
    let out = ProcessOrder.start(run, order).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "rename", version = "1", events(proceed))]
async fn rename_after(run: &Run, order_id: String) -> Result<String, WorkflowError> {
    let order = OrderInput {
        order_id,
        discount: 0.0,
    };
    let out = HandleOrder.start(run, order).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
struct Customer {
    name: String,
    premium: bool,
}

/// Task A is the discount, task B the order.
#[aiki::workflow(name = "discount", version = "1", events(proceed))]
async fn discount_before(run: &Run, customer: Customer) -> Result<String, WorkflowError> {
    if customer.premium {
        TaskA.start(run, customer.name.clone()).await?;
    }
    let out = TaskB.start(run, customer.name).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "discount", version = "1", events(proceed))]
async fn discount_after(run: &Run, customer: Customer) -> Result<String, WorkflowError> {
    TaskA.start(run, customer.name.clone()).await?;
    let out = TaskB.start(run, customer.name).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

#[aiki::workflow(name = "waits", version = "1", events(approved = String, paid = u64))]
async fn waits_before(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let approver = run.events().approved().wait().await?;
    let cents = run.events().paid().wait().await?;
    Ok(format!("{approver}:{cents}"))
}

#[aiki::workflow(name = "waits", version = "1", events(approved = String, paid = u64))]
async fn waits_after(run: &Run, _input: String) -> Result<String, WorkflowError> {
    let cents = run.events().paid().wait().await?;
    let approver = run.events().approved().wait().await?;
    Ok(format!("{approver}:{cents}"))
}

#[aiki::workflow(name = "add-wait", version = "1", events(approved = String, proceed))]
async fn add_wait_before(run: &Run, input: String) -> Result<String, WorkflowError> {
    let out = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

/// A new wait whose data does not reach any task input.
#[aiki::workflow(name = "add-wait", version = "1", events(approved = String, proceed))]
async fn add_wait_after(run: &Run, input: String) -> Result<String, WorkflowError> {
    let _approver = run.events().approved().wait().await?;
    let out = TaskA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

/// A new wait whose data flows into task A's input, changing its address.
#[aiki::workflow(name = "add-wait", version = "1", events(approved = String, proceed))]
async fn event_into_input(run: &Run, input: String) -> Result<String, WorkflowError> {
    let approver = run.events().approved().wait().await?;
    let out = TaskA.start(run, format!("{input}/{approver}")).await?;
    run.events().proceed().wait().await?;
    Ok(out)
}

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

#[aiki::workflow(name = "named-sleeps", version = "1")]
async fn named_sleeps(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("initial-delay", 5 * MINUTE).await?;
    run.sleep("cooldown", HOUR).await?;
    TaskA.start(run, input).await
}

#[aiki::workflow(name = "named-sleeps", version = "1")]
async fn named_sleeps_swapped(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("cooldown", HOUR).await?;
    run.sleep("initial-delay", 5 * MINUTE).await?;
    TaskA.start(run, input).await
}

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

#[aiki::workflow(name = "delays", version = "1")]
async fn delays_first_removed(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("delay", HOUR).await?;
    TaskA.start(run, input).await
}

#[aiki::workflow(name = "shape", version = "1", events(proceed))]
async fn shape_before(run: &Run, id: String) -> Result<String, WorkflowError> {
    let user = FetchUser.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(user.email)
}

#[aiki::workflow(name = "shape", version = "1", events(proceed))]
async fn shape_after(run: &Run, id: String) -> Result<String, WorkflowError> {
    let user = FetchUserRenamed.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(user.email_address)
}

#[aiki::workflow(name = "shape", version = "1", events(proceed))]
async fn shape_optional_after(run: &Run, id: String) -> Result<String, WorkflowError> {
    let user = FetchUserOptionalRenamed.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(user.email_address.unwrap_or_default())
}

#[aiki::workflow(name = "contact", version = "1", events(proceed))]
async fn contact_before(run: &Run, id: String) -> Result<String, WorkflowError> {
    let ContactV1::V1 { email } = FetchContact.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(email)
}

#[aiki::workflow(name = "contact", version = "1", events(proceed))]
async fn contact_after(run: &Run, id: String) -> Result<String, WorkflowError> {
    let email = match FetchContactV2.start(run, id).await? {
        ContactV2::V1 { email } => email,
        ContactV2::V2 { email_address } => email_address,
    };
    run.events().proceed().wait().await?;
    Ok(email)
}

// ---------------------------------------------------------------------------------------------
// The lab: one store, one manual clock, and a worker that is replaced to deploy new code.

#[derive(Debug)]
struct Lab {
    store: Connection,
    clock: ManualClock,
    client: Client,
    executions: Executions,
    worker: Option<WorkerHandle>,
}

impl Lab {
    /// Stops the running worker (if any) and starts one serving the given code.
    async fn deploy(
        &mut self,
        serve: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
    ) -> anyhow::Result<()> {
        if let Some(worker) = self.worker.take() {
            worker.shutdown().await;
        }
        let builder = Worker::builder(self.store.clone())
            .clock(self.clock.clone())
            .state(self.executions.clone())
            .poll_interval(Duration::from_millis(5));
        self.worker = Some(serve(builder).build()?.start());
        Ok(())
    }

    /// Deploys `workflow`, starts a run of it and waits until it reaches `status`.
    async fn start<W: Workflow>(
        &mut self,
        workflow: W,
        input: W::Input,
        status: RunStatus,
    ) -> anyhow::Result<(RunHandle<W>, RunRecord)> {
        self.executions.clear();
        self.deploy(|worker| worker.register(workflow)).await?;
        let run = self.client.start::<W>(input).await?;
        let record = self.reach(&run, status, None).await?;
        Ok((run, record))
    }

    /// Waits (at most 10 s of real time) until the run is in `status`; with `after`, the next
    /// time it gets there after that record's revision (read from its timeline, so a status
    /// reached and left between two looks is not missed).
    async fn reach<W: Workflow>(
        &self,
        run: &RunHandle<W>,
        status: RunStatus,
        after: Option<&RunRecord>,
    ) -> anyhow::Result<RunRecord> {
        let reached = async {
            match after {
                None => run.wait_for_status(status).await.map(drop),
                Some(after) => run
                    .wait_for_status_after(status, after.revision)
                    .await
                    .map(drop),
            }
        };
        tokio::time::timeout(Duration::from_secs(10), reached)
            .await
            .with_context(|| format!("the run did not reach `{status}` in 10 s"))??;
        Ok(run.record().await?)
    }

    /// Waits until the run ends, completed or failed.
    async fn end<W: Workflow>(&self, run: &RunHandle<W>) -> anyhow::Result<RunRecord> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let record = run.record().await?;
            if record.status.is_terminal() {
                return Ok(record);
            }
            ensure!(
                Instant::now() < deadline,
                "the run is still `{}`",
                record.status
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Minutes until the sleeping run wakes.
    fn minutes_left(&self, record: &RunRecord) -> i64 {
        let due = record.due_at.unwrap_or_default();
        (due - self.clock.now()) / 60_000
    }
}

/// What one case did.
#[derive(Debug)]
struct Outcome {
    status: String,
    detail: String,
    error: Option<String>,
}

impl Outcome {
    /// A completed run, with its output.
    fn completed(lab: &Lab, record: &RunRecord) -> anyhow::Result<Outcome> {
        ensure!(
            record.status == RunStatus::Completed,
            "expected completed, got {:?}",
            record.error
        );
        let output = record.output.clone().unwrap_or_default();
        Ok(Outcome {
            status: "completed".to_owned(),
            detail: format!("output {output}; {}", lab.executions.summary()),
            error: None,
        })
    }

    /// A failed run, with the error of the expected kind.
    fn failed(lab: &Lab, record: &RunRecord, kind: &str) -> anyhow::Result<Outcome> {
        let error = record
            .error
            .clone()
            .context("a failed run records its error")?;
        ensure!(
            record.status == RunStatus::Failed && error.kind == kind,
            "expected {kind}, got `{}`: {error:?}",
            record.status
        );
        Ok(Outcome {
            status: format!("failed: {kind}"),
            detail: lab.executions.summary(),
            error: Some(error.message),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The cases, in the guide's order.

async fn reorder(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(ReorderBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(ReorderAfter)).await?;
    let run = lab.client.handle::<ReorderAfter>(run.id());
    run.send::<ReorderAfterProceed>(()).await?;
    ensure!(run.result().await? == ("a(x)".to_owned(), "b(x)".to_owned()));
    ensure!(lab.executions.count("task-a") == 1 && lab.executions.count("task-b") == 1);
    Outcome::completed(lab, &lab.end(&run).await?)
}

async fn remove(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(RemoveBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(RemoveAfter)).await?;
    let run = lab.client.handle::<RemoveAfter>(run.id());
    run.send::<RemoveAfterProceed>(()).await?;
    ensure!(run.result().await? == "b(x)");
    Outcome::completed(lab, &lab.end(&run).await?)
}

async fn remove_then_new(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(RemoveThenNewBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(RemoveThenNewAfter)).await?;
    let run = lab.client.handle::<RemoveThenNewAfter>(run.id());
    run.send::<RemoveThenNewAfterProceed>(()).await?;
    let outcome = Outcome::failed(lab, &lab.end(&run).await?, "non_determinism")?;
    ensure!(
        lab.executions.count("task-b") == 0,
        "the new task must not run"
    );
    Ok(outcome)
}

async fn append(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(AppendBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(AppendAfter)).await?;
    let run = lab.client.handle::<AppendAfter>(run.id());
    run.send::<AppendAfterProceed>(()).await?;
    ensure!(run.result().await? == "b(a(x))");
    ensure!(lab.executions.count("task-a") == 1 && lab.executions.count("task-b") == 1);
    Outcome::completed(lab, &lab.end(&run).await?)
}

async fn insert(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(InsertBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(InsertAfter)).await?;
    let run = lab.client.handle::<InsertAfter>(run.id());
    run.send::<InsertAfterProceed>(()).await?;
    let outcome = Outcome::failed(lab, &lab.end(&run).await?, "non_determinism")?;
    ensure!(
        lab.executions.count("task-c") == 0,
        "the inserted task must never run"
    );
    Ok(outcome)
}

async fn change_input(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(ChangeInputBefore, "o-1".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(ChangeInputAfter)).await?;
    let run = lab.client.handle::<ChangeInputAfter>(run.id());
    run.send::<ChangeInputAfterProceed>(()).await?;
    let outcome = Outcome::failed(lab, &lab.end(&run).await?, "non_determinism")?;
    ensure!(
        lab.executions.count("process-order") == 1,
        "only the original input ran"
    );
    Ok(outcome)
}

async fn rename(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(RenameBefore, "o-1".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(RenameAfter)).await?;
    let run = lab.client.handle::<RenameAfter>(run.id());
    run.send::<RenameAfterProceed>(()).await?;
    let outcome = Outcome::failed(lab, &lab.end(&run).await?, "non_determinism")?;
    ensure!(
        lab.executions.count("handle-order") == 0,
        "the renamed task must not run"
    );
    Ok(outcome)
}

async fn conditional(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let ann = Customer {
        name: "ann".into(),
        premium: true,
    };
    let (premium, _) = lab
        .start(DiscountBefore, ann, RunStatus::AwaitingEvent)
        .await?;
    let bob = Customer {
        name: "bob".into(),
        premium: false,
    };
    let regular = lab.client.start::<DiscountBefore>(bob).await?;
    lab.reach(&regular, RunStatus::AwaitingEvent, None).await?;
    lab.deploy(|w| w.register(DiscountAfter)).await?;
    let premium = lab.client.handle::<DiscountAfter>(premium.id());
    let regular = lab.client.handle::<DiscountAfter>(regular.id());
    premium.send::<DiscountAfterProceed>(()).await?;
    regular.send::<DiscountAfterProceed>(()).await?;
    Outcome::completed(lab, &lab.end(&premium).await?).context("the premium run")?;
    let outcome = Outcome::failed(lab, &lab.end(&regular).await?, "non_determinism")?;
    ensure!(
        lab.executions.count("task-a") == 1,
        "only the premium discount ever ran"
    );
    Ok(Outcome {
        detail: format!(
            "premium run completed, regular run failed; {}",
            outcome.detail
        ),
        ..outcome
    })
}

async fn reorder_waits(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, waiting) = lab
        .start(WaitsBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    run.send::<WaitsBeforeApproved>("ann".into()).await?;
    lab.reach(&run, RunStatus::AwaitingEvent, Some(&waiting))
        .await?;
    lab.deploy(|w| w.register(WaitsAfter)).await?;
    let run = lab.client.handle::<WaitsAfter>(run.id());
    run.send::<WaitsAfterPaid>(4200).await?;
    ensure!(run.result().await? == "ann:4200");
    Outcome::completed(lab, &lab.end(&run).await?)
}

async fn add_wait(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(AddWaitBefore, "x".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(AddWaitAfter)).await?;
    let run = lab.client.handle::<AddWaitAfter>(run.id());
    run.send::<AddWaitAfterApproved>("ann".into()).await?;
    run.send::<AddWaitAfterProceed>(()).await?;
    ensure!(run.result().await? == "a(x)");
    ensure!(lab.executions.count("task-a") == 1);
    Outcome::completed(lab, &lab.end(&run).await?)
}

async fn event_data_into_input(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(AddWaitBefore, "y".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(EventIntoInput)).await?;
    let run = lab.client.handle::<EventIntoInput>(run.id());
    run.send::<EventIntoInputApproved>("ann".into()).await?;
    let outcome = Outcome::failed(lab, &lab.end(&run).await?, "non_determinism")?;
    ensure!(
        lab.executions.count("task-a") == 1,
        "task-a must not run with the new input"
    );
    Ok(outcome)
}

async fn reorder_named_sleeps(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, first) = lab
        .start(NamedSleeps, "x".into(), RunStatus::Sleeping)
        .await?;
    lab.clock.advance(5 * MINUTE);
    lab.reach(&run, RunStatus::Sleeping, Some(&first)).await?;
    lab.deploy(|w| w.register(NamedSleepsSwapped)).await?;
    lab.clock.advance(HOUR);
    let run = lab.client.handle::<NamedSleepsSwapped>(run.id());
    let mut outcome = Outcome::completed(lab, &lab.end(&run).await?)?;
    outcome.detail = format!("no extra sleep, {}", outcome.detail);
    Ok(outcome)
}

async fn longer_sleep(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, asleep) = lab.start(Fulfil, "x".into(), RunStatus::Sleeping).await?;
    lab.deploy(|w| w.register(FulfilLonger)).await?;
    lab.clock.advance(HOUR);
    let again = lab.reach(&run, RunStatus::Sleeping, Some(&asleep)).await?;
    let more = lab.minutes_left(&again);
    ensure!(more == 30, "expected 30 more minutes, got {more}");
    lab.clock.advance(30 * MINUTE);
    let run = lab.client.handle::<FulfilLonger>(run.id());
    let mut outcome = Outcome::completed(lab, &lab.end(&run).await?)?;
    outcome.detail = format!("woke after 1 h, slept {more} min more; {}", outcome.detail);
    Ok(outcome)
}

async fn shorter_sleep(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab.start(Fulfil, "x".into(), RunStatus::Sleeping).await?;
    lab.deploy(|w| w.register(FulfilShorter)).await?;
    lab.clock.advance(HOUR);
    let run = lab.client.handle::<FulfilShorter>(run.id());
    let mut outcome = Outcome::completed(lab, &lab.end(&run).await?)?;
    outcome.detail = format!("woke after 1 h, continued at once; {}", outcome.detail);
    Ok(outcome)
}

/// Runs `delays` into its second sleep, deploys `after`, wakes it after the hour, and checks
/// that it goes back to sleep for 55 minutes.
async fn same_named_sleeps<W: Workflow<Input = String>>(
    lab: &mut Lab,
    after: W,
) -> anyhow::Result<Outcome> {
    let (run, first) = lab.start(Delays, "x".into(), RunStatus::Sleeping).await?;
    lab.clock.advance(5 * MINUTE);
    let second = lab.reach(&run, RunStatus::Sleeping, Some(&first)).await?;
    lab.deploy(|w| w.register(after)).await?;
    lab.clock.advance(HOUR);
    let run = lab.client.handle::<W>(run.id());
    let third = lab.reach(&run, RunStatus::Sleeping, Some(&second)).await?;
    let more = lab.minutes_left(&third);
    ensure!(more == 55, "expected 55 more minutes, got {more}");
    ensure!(lab.executions.count("task-a") == 0);
    lab.clock.advance(55 * MINUTE);
    let mut outcome = Outcome::completed(lab, &lab.end(&run).await?)?;
    outcome.detail = format!(
        "woke after 1 h, went back to sleep for {more} min; {}",
        outcome.detail
    );
    Ok(outcome)
}

async fn swap_same_named_sleeps(lab: &mut Lab) -> anyhow::Result<Outcome> {
    same_named_sleeps(lab, DelaysSwapped).await
}

async fn remove_same_named_sleep(lab: &mut Lab) -> anyhow::Result<Outcome> {
    same_named_sleeps(lab, DelaysFirstRemoved).await
}

/// Runs `ShapeBefore` until it waits, deploys `after` (the same workflow with the output of
/// `fetch-user` changed), and expects the replay to fail with an error naming the new field.
async fn changed_output_shape_to<W: Workflow>(
    lab: &mut Lab,
    after: W,
    expected: &str,
) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(ShapeBefore, "u1".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(after)).await?;
    let run = lab.client.handle::<W>(run.id());
    run.send::<ShapeBeforeProceed>(()).await?;
    let outcome = Outcome::failed(lab, &lab.end(&run).await?, "output_schema_mismatch")?;
    let message = outcome.error.as_deref().unwrap_or_default();
    ensure!(
        message.contains(expected),
        "the error says what did not match: {message}"
    );
    Ok(outcome)
}

async fn changed_output_shape(lab: &mut Lab) -> anyhow::Result<Outcome> {
    changed_output_shape_to(lab, ShapeAfter, "email_address").await
}

async fn renamed_optional_output_field(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let expected = "a renamed field would read as None";
    changed_output_shape_to(lab, ShapeOptionalAfter, expected).await
}

async fn versioned_output(lab: &mut Lab) -> anyhow::Result<Outcome> {
    let (run, _) = lab
        .start(ContactBefore, "u1".into(), RunStatus::AwaitingEvent)
        .await?;
    lab.deploy(|w| w.register(ContactAfter)).await?;
    let run = lab.client.handle::<ContactAfter>(run.id());
    run.send::<ContactAfterProceed>(()).await?;
    ensure!(run.result().await? == "u1@example.com");
    Outcome::completed(lab, &lab.end(&run).await?)
}

// ---------------------------------------------------------------------------------------------

/// Prints one row, and the run's error wrapped below it.
fn print_row(n: usize, case: &str, guide: &str, outcome: &Outcome) {
    println!(
        "{n:>2}  {case:<33} {guide:<18} {:<31} {}",
        outcome.status, outcome.detail
    );
    if let Some(error) = &outcome.error {
        let mut line = String::from("     |");
        for word in error.split(' ') {
            if line.len() + word.len() > 104 {
                println!("{line}");
                line = String::from("     |");
            }
            line.push(' ');
            line.push_str(word);
        }
        println!("{line}");
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A fresh SQLite database in a folder of its own, removed at the end.
    let dir = std::env::temp_dir().join(format!("aiki-refactoring-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = aiki::connect(&format!("sqlite://{}", dir.join("aiki.db").display())).await?;
    let clock = ManualClock::starting_now();
    let client = Client::new(store.clone())
        .with_clock(clock.clone())
        .with_poll_interval(Duration::from_millis(5));
    let mut lab = Lab {
        store,
        clock,
        client,
        executions: Executions::default(),
        worker: None,
    };

    let started = Instant::now();
    println!(
        "{:>2}  {:<33} {:<18} {:<31} detail",
        "#", "change to running code", "guide says", "got"
    );
    let mut n = 0;
    macro_rules! case {
        ($case:ident, $change:literal, $guide:literal) => {{
            n += 1;
            let outcome = $case(&mut lab)
                .await
                .with_context(|| format!("case {n}: {}", $change))?;
            print_row(n, $change, $guide, &outcome);
        }};
    }
    case!(reorder, "reorder finished tasks", "safe");
    case!(remove, "remove a task, nothing new after", "safe");
    case!(
        remove_then_new,
        "remove a task, then a new task",
        "non-determinism"
    );
    case!(append, "append a task", "safe");
    case!(insert, "insert a task", "non-determinism");
    case!(change_input, "change a task's input", "non-determinism");
    case!(rename, "rename a task", "non-determinism");
    case!(
        conditional,
        "conditional: discount for all",
        "fails non-premium"
    );
    case!(reorder_waits, "reorder event waits", "safe");
    case!(add_wait, "add an event wait", "safe");
    case!(
        event_data_into_input,
        "feed event data into task input",
        "non-determinism"
    );
    case!(
        reorder_named_sleeps,
        "reorder different-named sleeps",
        "safe"
    );
    case!(
        longer_sleep,
        "lengthen a sleep 1 h -> 1 h 30",
        "sleeps the delta"
    );
    case!(shorter_sleep, "shorten a sleep 1 h -> 30 min", "continues");
    case!(
        swap_same_named_sleeps,
        "swap same-named sleeps",
        "re-sleeps 55 min"
    );
    case!(
        remove_same_named_sleep,
        "remove first same-named sleep",
        "re-sleeps 55 min"
    );
    case!(
        changed_output_shape,
        "rename an output field",
        "schema error"
    );
    case!(
        renamed_optional_output_field,
        "rename an optional output field",
        "schema error"
    );
    case!(versioned_output, "versioned output enum", "keeps working");

    if let Some(worker) = lab.worker.take() {
        worker.shutdown().await;
    }
    println!(
        "all {n} cases behaved as the guide says ({:?})",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
