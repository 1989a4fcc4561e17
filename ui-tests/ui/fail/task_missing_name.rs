#[aiki::task(retry = fixed(max_attempts = 3, delay_ms = 100))]
async fn double(input: u64) -> Result<u64, aiki::TaskError> {
    Ok(input * 2)
}

fn main() {}
