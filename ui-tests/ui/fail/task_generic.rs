#[aiki::task(name = "echo")]
async fn echo<T: serde::Serialize>(input: T) -> Result<T, aiki::TaskError> {
    Ok(input)
}

fn main() {}
