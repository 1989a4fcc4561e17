//! `#[aiki::task] async fn charge` generates `Charge`, which the signature already uses for
//! the input: one error, at that use, naming `type_name`.
use aiki::TaskError;

#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Charge {
    cents: u64,
}

#[aiki::task(name = "charge")]
pub async fn charge(c: Charge) -> Result<u64, TaskError> {
    Ok(c.cents)
}

fn main() {}
