#[aiki::task(
    name = "double",
    retry = jittered(max_attempts = 3, base_delay_ms = 100, jitter = 1.5)
)]
async fn double(input: u64) -> Result<u64, aiki::TaskError> {
    Ok(input * 2)
}

fn main() {}
