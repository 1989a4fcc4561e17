//! The echo tasks shared by the scenario tests.

#![allow(dead_code, unreachable_pub)]

use aiki::{State, TaskError};
use aiki_tests::Executions;

/// Records one execution of `name` and returns `"name(<input>)"`.
fn echo(executions: &Executions, name: &str, input: String) -> String {
    executions.record(name);
    format!("{name}({input})")
}

/// Returns `"task-a(<input>)"`.
#[aiki::task(name = "task-a")]
pub async fn task_a(
    input: String,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    Ok(echo(&executions, "task-a", input))
}

/// Returns `"task-b(<input>)"`.
#[aiki::task(name = "task-b")]
pub async fn task_b(
    input: String,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    Ok(echo(&executions, "task-b", input))
}

/// Returns `"task-c(<input>)"`.
#[aiki::task(name = "task-c")]
pub async fn task_c(
    input: String,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    Ok(echo(&executions, "task-c", input))
}
