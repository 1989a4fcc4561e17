use aiki::{Run, WorkflowError};

#[aiki::workflow(name = "greet", version = "1")]
async fn greet(_run: &Run, first: String, last: String) -> Result<String, WorkflowError> {
    Ok(format!("hello {first} {last}"))
}

fn main() {}
