use aiki::{Run, WorkflowError};

#[aiki::workflow(name = "orders", verison = "1.0.0")]
async fn orders(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

fn main() {}
