use aiki::{Run, WorkflowError};

#[aiki::workflow(name = "orders@eu", version = "1.0.0")]
async fn orders(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

fn main() {}
