use aiki::{Run, WorkflowError};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct Payment {
    pub cents: u64,
}

#[aiki::workflow(name = "orders", version = "1.0.0", events(payment_received = Payment))]
pub async fn orders(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

fn main() {
    let _ = (Orders, OrdersPaymentReceived);
}
