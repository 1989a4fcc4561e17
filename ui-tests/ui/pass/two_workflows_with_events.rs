//! Two workflows with events in one module: their `run.events()` do not collide, and events
//! of the same name are distinct marker types.
use std::time::Duration;

use aiki::{Run, WorkflowError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Payment {
    pub cents: u64,
}

#[aiki::workflow(name = "orders", version = "1.0.0", events(approved, paid = Payment))]
pub async fn orders(run: &Run) -> Result<u64, WorkflowError> {
    run.events().approved().wait().await?;
    Ok(run.events().paid().wait().await?.cents)
}

#[aiki::workflow(
    name = "refunds",
    version = "1.0.0",
    events(approved(name = "refund.approved", payload = String), cancelled)
)]
pub async fn refunds(run: &Run) -> Result<Option<String>, WorkflowError> {
    if run
        .events()
        .cancelled()
        .wait_timeout(Duration::from_secs(5))
        .await?
        .is_some()
    {
        return Ok(None);
    }
    run.events().approved().wait().await.map(Some)
}

fn main() {
    use aiki::{Event, Workflow};
    assert_eq!(OrdersApproved::NAME, "approved");
    assert_eq!(RefundsApproved::NAME, "refund.approved");
    let names: Vec<_> = Refunds::events().iter().map(|spec| spec.name).collect();
    assert_eq!(names, ["refund.approved", "cancelled"]);
    let _: <OrdersPaid as Event>::Payload = Payment { cents: 1 };
    let _ = (Orders, RefundsCancelled);
}
