use aiki::{Run, WorkflowError};

#[aiki::workflow(name = "orders", version = "v1.0")]
async fn orders(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

fn main() {}
