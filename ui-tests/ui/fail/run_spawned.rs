use aiki::{Run, TaskError, WorkflowError};

#[aiki::task(name = "inc")]
async fn inc(n: u64) -> Result<u64, TaskError> {
    Ok(n + 1)
}

// A spawned task call would outlive the execution and write after the run moved on: `Run` is
// only ever borrowed, and not `Clone`.
#[aiki::workflow(name = "escape", version = "1")]
async fn escape(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let spawned = tokio::spawn(async move { Inc.start(run, n).await });
    spawned.await.map_err(WorkflowError::failed)?
}

fn main() {}
