use aiki::{Run, WorkflowError};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub struct Order {
    pub id: String,
}

#[aiki::workflow(name = "orders", version = "1.0.0")]
pub async fn orders(_run: &Run, order: Order) -> Result<String, WorkflowError> {
    Ok(order.id)
}

fn main() {
    let _ = Orders;
}
