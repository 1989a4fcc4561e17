#[aiki::task(name = "double")]
async fn double(&self, input: u64) -> Result<u64, aiki::TaskError> {
    Ok(input * 2)
}

fn main() {}
