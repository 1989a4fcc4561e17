#[aiki::workflow(name = "greet", version = "1")]
async fn greet(name: String) -> Result<String, aiki::WorkflowError> {
    Ok(format!("hello {name}"))
}

fn main() {}
