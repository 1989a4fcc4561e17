#[aiki::task(name = "double")]
async fn double(input: u64) -> Option<u64> {
    Some(input * 2)
}

fn main() {}
