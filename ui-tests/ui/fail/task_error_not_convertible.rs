pub struct NotAnError;

#[aiki::task(name = "double")]
pub async fn double(input: u64) -> Result<u64, NotAnError> {
    if input > 100 {
        return Err(NotAnError);
    }
    Ok(input * 2)
}

fn main() {
    let _ = Double;
}
