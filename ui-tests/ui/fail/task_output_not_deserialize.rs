use serde::Serialize;

#[derive(Serialize, schemars::JsonSchema)]
pub struct Receipt {
    pub id: String,
}

#[aiki::task(name = "charge-card")]
pub async fn charge_card(order_id: String) -> Result<Receipt, aiki::TaskError> {
    Ok(Receipt { id: order_id })
}

fn main() {
    let _ = ChargeCard;
}
