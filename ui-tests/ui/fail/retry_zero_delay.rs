#[aiki::task(name = "double", retry = fixed(max_attempts = 3, delay_ms = 0))]
async fn double(input: u64) -> Result<u64, aiki::TaskError> {
    Ok(input * 2)
}

fn main() {}
