//! The workflows of `aiki_check_app`, a service's own binary offering the `aiki` commands with
//! its code compiled in: the build deployed now (`deployed`) and the one about to be (`next`).

use aiki::{Registry, Run, TaskError, WorkerBuilder, WorkflowError};

/// Returns `"step-a(<input>)"`.
#[aiki::task(name = "step-a")]
pub async fn step_a(input: String) -> Result<String, TaskError> {
    Ok(format!("step-a({input})"))
}

/// Returns `"step-b(<input>)"`.
#[aiki::task(name = "step-b")]
pub async fn step_b(input: String) -> Result<String, TaskError> {
    Ok(format!("step-b({input})"))
}

/// Returns `"step-c(<input>)"`.
#[aiki::task(name = "step-c")]
pub async fn step_c(input: String) -> Result<String, TaskError> {
    Ok(format!("step-c({input})"))
}

/// Deployed: a step, then a wait for `proceed`.
#[aiki::workflow(name = "shop", version = "1", events(proceed))]
pub async fn shop(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = StepA.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(a)
}

/// Next: a step appended after the wait (safe: new work).
#[aiki::workflow(name = "shop", version = "1", events(proceed))]
pub async fn shop_next(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = StepA.start(run, input).await?;
    run.events().proceed().wait().await?;
    StepB.start(run, a).await
}

/// Deployed: two steps, then a wait.
#[aiki::workflow(name = "ledger", version = "1", events(proceed))]
pub async fn ledger(run: &Run, input: String) -> Result<String, WorkflowError> {
    StepA.start(run, input.clone()).await?;
    StepB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(String::new())
}

/// Next: a step inserted between them (diverges).
#[aiki::workflow(name = "ledger", version = "1", events(proceed))]
pub async fn ledger_next(run: &Run, input: String) -> Result<String, WorkflowError> {
    StepA.start(run, input.clone()).await?;
    StepC.start(run, input.clone()).await?;
    StepB.start(run, input).await?;
    run.events().proceed().wait().await?;
    Ok(String::new())
}

/// Deployed and next: one step; its ended runs are forked onto versions 2 and 3.
#[aiki::workflow(name = "mail", version = "1")]
pub async fn mail(run: &Run, input: String) -> Result<String, WorkflowError> {
    StepA.start(run, input).await
}

/// Next: version 2 keeps the step and appends one (a fork of a version-1 run replays).
#[aiki::workflow(name = "mail", version = "2")]
pub async fn mail_v2(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = StepA.start(run, input).await?;
    StepB.start(run, a).await
}

/// Next: version 3 calls another step first (a fork of a version-1 run diverges).
#[aiki::workflow(name = "mail", version = "3")]
pub async fn mail_v3(run: &Run, input: String) -> Result<String, WorkflowError> {
    StepC.start(run, input.clone()).await?;
    StepA.start(run, input).await
}

/// The build deployed now.
pub fn deployed(worker: WorkerBuilder) -> WorkerBuilder {
    worker.register(Shop).register(Ledger).register(Mail)
}

/// The build about to be deployed.
pub fn next() -> Registry {
    Registry::builder()
        .register(ShopNext)
        .register(LedgerNext)
        .register(Mail)
        .register(MailV2)
        .register(MailV3)
        .task(StepA)
        .task(StepB)
        .task(StepC)
        .build()
        .expect("the next build's registry")
}
