//! Two versions of one workflow served side by side by one worker. `welcome@1` sends a plain
//! welcome email; `welcome@2` also issues a coupon. Each run is pinned to the version it was
//! started with: runs of v1 still in flight when v2 ships finish as v1, new runs use v2, and
//! each version has its own cache namespace (`name@version`).
//!
//! Run it with `cargo run -p aiki-examples --example versioning`.

use aiki::{Client, ClientError, Run, TaskError, Worker, WorkflowError};

#[aiki::task(name = "send-email")]
async fn send_email(text: String) -> Result<String, TaskError> {
    println!("  send-email: {text}");
    Ok(text)
}

#[aiki::task(name = "issue-coupon")]
async fn issue_coupon(user: String) -> Result<String, TaskError> {
    Ok(format!("WELCOME-{}", user.to_uppercase()))
}

/// Version 1: wait until the user confirms their address, then send a welcome.
#[aiki::workflow(name = "welcome", version = "1", events(confirmed))]
async fn welcome_v1(run: &Run, user: String) -> Result<String, WorkflowError> {
    run.events().confirmed().wait().await?;
    SendEmail.start(run, format!("Welcome, {user}!")).await
}

/// Version 2: the same, with a coupon. A new type beside v1, not an edit of it.
#[aiki::workflow(name = "welcome", version = "2", events(confirmed))]
async fn welcome_v2(run: &Run, user: String) -> Result<String, WorkflowError> {
    run.events().confirmed().wait().await?;
    let coupon = IssueCoupon.start(run, user.clone()).await?;
    SendEmail
        .start(run, format!("Welcome, {user}! Your coupon: {coupon}"))
        .await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A fresh SQLite database in a folder of its own, removed at the end.
    let dir = std::env::temp_dir().join(format!("aiki-versioning-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = aiki::connect(&format!("sqlite://{}", dir.join("aiki.db").display())).await?;

    // One worker serves both versions.
    let worker = Worker::builder(store.clone())
        .register(WelcomeV1)
        .register(WelcomeV2)
        .build()?
        .start();
    let client = Client::new(store);
    println!("serving {} and {}", WelcomeV1::v(), WelcomeV2::v());

    // Ann signed up before v2 shipped, Bob after. Both wait for their confirmation.
    let ann = client.start::<WelcomeV1>("ann".to_owned()).await?;
    let bob = client.start::<WelcomeV2>("bob".to_owned()).await?;
    for (user, record) in [("ann", ann.record().await?), ("bob", bob.record().await?)] {
        println!("{user}: run {} pinned to {}", record.id, record.namespace);
    }

    ann.send::<WelcomeV1Confirmed>(()).await?;
    bob.send::<WelcomeV2Confirmed>(()).await?;
    let (ann_mail, bob_mail) = (ann.result().await?, bob.result().await?);
    println!("{} produced for ann: {ann_mail:?}", WelcomeV1::v());
    println!("{} produced for bob: {bob_mail:?}", WelcomeV2::v());
    anyhow::ensure!(!ann_mail.contains("coupon") && bob_mail.contains("WELCOME-BOB"));

    // A run never moves between versions: a v2 handle on Ann's v1 run is refused.
    match client.handle::<WelcomeV2>(ann.id()).record().await {
        Err(error @ ClientError::WrongWorkflow { .. }) => {
            println!("v2 handle on ann's run: {error}")
        }
        other => anyhow::bail!("expected WrongWorkflow, got {other:?}"),
    }

    worker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
