//! A broken `#[task]` (here not `async`) reports its one error; the places that use the
//! generated type (a workflow's call, the worker's registration, the trait's constants) still
//! type-check, so they add none.
use aiki::{Run, TaskError, WorkflowError};

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Charge {
    cents: u64,
}

#[aiki::task(name = "charge-card")]
pub fn charge_card(charge: Charge) -> Result<u64, TaskError> {
    Ok(charge.cents)
}

#[aiki::workflow(name = "order", version = "1")]
pub async fn order_v1(run: &Run, cents: u64) -> Result<u64, WorkflowError> {
    let charged: u64 = ChargeCard.start(run, Charge { cents }).await?;
    Ok(charged)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    use aiki::Task;
    let _: &str = ChargeCard::NAME;
    let store = aiki::connect("memory:").await.unwrap();
    let _ = aiki::Worker::builder(store)
        .register(OrderV1)
        .task(ChargeCard)
        .build();
}
