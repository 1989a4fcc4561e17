use serde::Deserialize;

#[derive(Deserialize, schemars::JsonSchema)]
pub struct Charge {
    pub cents: u64,
}

#[aiki::task(name = "charge-card")]
pub async fn charge_card(input: Charge) -> Result<u64, aiki::TaskError> {
    Ok(input.cents)
}

fn main() {
    let _ = ChargeCard;
}
