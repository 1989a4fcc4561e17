//! A `#[workflow]` too broken for its types to be generated (here it does not return a
//! `Result`) reports its own error and nothing else: the event waits in its body still
//! type-check, with no "no method named `events`" and no advice to call `event` instead.
use aiki::Run;

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Payment {
    cents: u64,
}

#[aiki::workflow(name = "order", version = "1", events(paid = Payment, approved))]
pub async fn order_v1(run: &Run, order_id: String) -> u64 {
    let payment = run.events().paid().wait().await.unwrap();
    run.events().approved().wait().await.unwrap();
    payment.cents + order_id.len() as u64
}

fn main() {}
