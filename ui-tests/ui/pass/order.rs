use std::time::Duration;

use aiki::{Run, State, TaskContext, TaskError, WorkflowError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Charge {
    order_id: String,
    cents: u64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Receipt {
    transaction_id: String,
}

#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Payment {
    cents: u64,
}

pub struct Db;

/// Charges a card.
#[aiki::task(name = "charge-card", retry = exponential(max_attempts = 3, base_delay_ms = 1000))]
pub async fn charge_card(
    input: Charge,
    State(_db): State<Db>,
    ctx: TaskContext,
) -> Result<Receipt, TaskError> {
    Ok(Receipt {
        transaction_id: format!("{}-{}-{}", input.order_id, input.cents, ctx.attempt()),
    })
}

#[aiki::workflow(
    name = "order-processing",
    version = "1.0.0",
    events(payment_received = Payment, approved),
    retry = jittered(max_attempts = 2, base_delay_ms = 10, factor = 3, max_delay_ms = 100, jitter = 0.2)
)]
pub async fn order_v1(run: &Run, order_id: String) -> Result<Receipt, WorkflowError> {
    use aiki::Task;
    let payment = run.events().payment_received().wait().await?;
    let _approved: Option<()> = run
        .events()
        .approved()
        .wait_timeout(Duration::from_secs(60))
        .await?;
    ChargeCard
        .start(
            run,
            Charge {
                order_id,
                cents: payment.cents,
            },
        )
        .await
}

fn main() {
    use aiki::{Event, Task, Workflow};
    assert_eq!(ChargeCard::NAME, "charge-card");
    assert_eq!(OrderV1::NAME, "order-processing");
    assert_eq!(OrderV1::VERSION, "1.0.0");
    assert_eq!(OrderV1::v().to_string(), "order-processing@1.0.0");
    assert_eq!(OrderV1PaymentReceived::NAME, "payment_received");
    assert_eq!(OrderV1Approved::NAME, "approved");
    assert_eq!(OrderV1::events().len(), 2);
    assert_eq!(ChargeCard.retry().max_attempts(), 3);
    assert_eq!(OrderV1.retry().max_attempts(), 2);
}
