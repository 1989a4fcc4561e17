use aiki::{Run, WorkflowError};

#[aiki::workflow(name = "orders")]
async fn orders(_run: &Run) -> Result<(), WorkflowError> {
    Ok(())
}

fn main() {}
