//! `type_name = ...` names the generated type when the function's name in CamelCase is taken
//! (here by the input types): the same key on both macros; a workflow's event types take it as
//! their prefix.
use aiki::{Run, TaskError, WorkflowError};

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Charge {
    cents: u64,
}

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Order {
    id: String,
}

#[aiki::task(name = "charge", type_name = ChargeTask)]
pub async fn charge(c: Charge) -> Result<u64, TaskError> {
    Ok(c.cents)
}

#[aiki::workflow(name = "order", version = "1", type_name = OrderFlow, events(paid = u64))]
pub async fn order(run: &Run, order: Order) -> Result<u64, WorkflowError> {
    let cents = run.events().paid().wait().await?;
    let charged = ChargeTask.start(run, Charge { cents }).await?;
    Ok(charged + order.id.len() as u64)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    use aiki::{Event, Task, Workflow};
    assert_eq!(ChargeTask::NAME, "charge");
    assert_eq!(OrderFlow::v().to_string(), "order@1");
    assert_eq!(OrderFlowPaid::NAME, "paid");
    assert_eq!(OrderFlow::events().len(), 1);
    let store = aiki::connect("memory:").await.unwrap();
    let worker = aiki::Worker::builder(store)
        .register(OrderFlow)
        .task(ChargeTask)
        .build()
        .unwrap();
    drop(worker);
    let _ = Charge { cents: 1 };
}
