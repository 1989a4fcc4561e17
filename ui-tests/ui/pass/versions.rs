//! Several versions of one workflow, each its own type and namespace, all registrable.
use aiki::{Run, WorkflowError};

#[aiki::workflow(name = "greet", version = "1")]
pub async fn greet_v1(_run: &Run, name: String) -> Result<String, WorkflowError> {
    Ok(format!("hello {name}"))
}

#[aiki::workflow(name = "greet", version = "1.1")]
pub async fn greet_v1_1(_run: &Run, name: String) -> Result<String, WorkflowError> {
    Ok(format!("hello, {name}"))
}

#[aiki::workflow(name = "greet", version = "2.0.0-beta.1", retry = never)]
pub async fn greet_v2(_run: &Run, name: String) -> Result<String, WorkflowError> {
    Ok(format!("hello, {name}!"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(GreetV1::v().to_string(), "greet@1");
    assert_eq!(GreetV1_1::v().to_string(), "greet@1.1");
    assert_eq!(GreetV2::v().to_string(), "greet@2.0.0-beta.1");
    let store = aiki::connect("memory:").await.unwrap();
    let worker = aiki::Worker::builder(store)
        .register(GreetV1)
        .register(GreetV1_1)
        .register(GreetV2)
        .build()
        .unwrap();
    drop(worker);
}
