//! A broken `#[workflow]` (here a misspelt key and a retry of zero attempts) reports its own
//! errors and nothing else: its body's event waits and the places that use the generated types
//! (its namespace, a start, an event sent, the worker's registration) still type-check.
use aiki::{Run, WorkflowError};

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Payment {
    cents: u64,
}

#[aiki::workflow(
    name = "order",
    verison = "1",
    events(paid = Payment, approved),
    retry = fixed(max_attempts = 0, delay_ms = 5)
)]
pub async fn order_v1(run: &Run, order_id: String) -> Result<u64, WorkflowError> {
    let payment = run.events().paid().wait().await?;
    run.events().approved().wait().await?;
    Ok(payment.cents + order_id.len() as u64)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _: aiki::Namespace = OrderV1::v();
    let store = aiki::connect("memory:").await.unwrap();
    let _ = aiki::Worker::builder(store.clone()).register(OrderV1).build();
    let client = aiki::Client::new(store);
    let run = client.start::<OrderV1>("o-1".to_owned()).await.unwrap();
    run.send::<OrderV1Paid>(Payment { cents: 5 }).await.unwrap();
    run.send::<OrderV1Approved>(()).await.unwrap();
    let _: u64 = run.result().await.unwrap();
}
