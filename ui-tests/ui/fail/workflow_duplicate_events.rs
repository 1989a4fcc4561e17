use aiki::{Run, WorkflowError};

#[aiki::workflow(
    name = "orders",
    version = "1.0.0",
    events(approved, approved_again(name = "approved"))
)]
async fn orders(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

fn main() {}
