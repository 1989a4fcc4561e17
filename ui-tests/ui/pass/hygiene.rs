//! Local items named like the prelude and the crates generated code could refer to must not
//! change what the generated code means.
#![allow(dead_code, non_camel_case_types, unused_macros)]

struct Result;
struct Option;
struct Vec;
struct Box;
struct String;
struct Send;
struct Future;
mod serde {}
mod std {}
mod core {}
mod aiki_macros {}
struct Ok;
struct Err;
struct Some;
struct None;
macro_rules! vec {
    () => {};
}

#[derive(::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema)]
pub struct Order {
    id: u64,
}

#[aiki::task(name = "double", retry = fixed(max_attempts = 2, delay_ms = 5))]
pub async fn double(input: u64) -> ::core::result::Result<u64, aiki::TaskError> {
    ::core::result::Result::Ok(input * 2)
}

#[aiki::workflow(name = "hygiene", version = "1.0.0", events(go = u64))]
pub async fn hygiene_v1(
    run: &aiki::Run,
    order: Order,
) -> ::core::result::Result<u64, aiki::WorkflowError> {
    use aiki::Task;
    let extra = run.events().go().wait().await?;
    Double.start(run, order.id + extra).await
}

fn main() {
    use aiki::Workflow;
    assert_eq!(HygieneV1::events().len(), 1);
    let _ = (Double, HygieneV1Go);
}
