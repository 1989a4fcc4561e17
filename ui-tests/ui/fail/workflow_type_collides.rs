//! A `type_name` that collides with a type the workflow's signature uses is reported there.
use aiki::{Run, WorkflowError};

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Order {
    id: String,
}

#[aiki::workflow(name = "order", version = "1", type_name = Order)]
pub async fn order_v1(_run: &Run, order: Order) -> Result<String, WorkflowError> {
    Ok(order.id)
}

fn main() {}
