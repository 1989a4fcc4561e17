#[aiki::task(name = "double")]
fn double(input: u64) -> Result<u64, aiki::TaskError> {
    Ok(input * 2)
}

fn main() {}
