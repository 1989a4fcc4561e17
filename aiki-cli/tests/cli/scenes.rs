//! Runs the newer tests look at: waits that timed out, a run failed by its child, task inputs
//! large and small, a run held by a worker that is gone, two builds of one version.

use std::time::Duration;

use aiki::{Client, NoInput, Run, RunId, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::Backend;

use crate::support::{CliFails, CliUnserved};

/// How long a test waits for a run to get somewhere.
pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

#[aiki::task(name = "cli-echo")]
async fn cli_echo(text: String) -> Result<usize, TaskError> {
    Ok(text.len())
}

#[aiki::task(name = "cli-hang")]
async fn cli_hang() -> Result<(), TaskError> {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    Ok(())
}

/// A wait for `nudge` that times out, then one that has not yet.
#[aiki::workflow(name = "cli-timeouts", version = "1", events(nudge = u32))]
async fn cli_timeouts(run: &Run) -> Result<u32, WorkflowError> {
    let first = run
        .events()
        .nudge()
        .wait_timeout(Duration::from_millis(200))
        .await?;
    let second = run
        .events()
        .nudge()
        .wait_timeout(Duration::from_secs(3 * 3600))
        .await?;
    Ok(first.unwrap_or(0) + second.unwrap_or(0))
}

/// Gives up waiting on a child no worker serves.
#[aiki::workflow(name = "cli-impatient", version = "1")]
async fn cli_impatient(run: &Run) -> Result<bool, WorkflowError> {
    let child = run.child::<CliUnserved>(NoInput).start().await?;
    Ok(child
        .wait_timeout(Duration::from_millis(200))
        .await?
        .is_none())
}

/// Failed by its child's failure.
#[aiki::workflow(name = "cli-orphaned", version = "1")]
async fn cli_orphaned(run: &Run) -> Result<u32, WorkflowError> {
    run.child::<CliFails>(NoInput).start().await?.wait().await
}

/// Calls a task with a small input, then with one too large to record.
#[aiki::workflow(name = "cli-big", version = "1")]
async fn cli_big(run: &Run, size: u32) -> Result<usize, WorkflowError> {
    let small = CliEcho.start(run, "hi".to_owned()).await?;
    let large = CliEcho.start(run, "x".repeat(size as usize)).await?;
    Ok(small + large)
}

/// Runs a task that never ends.
#[aiki::workflow(name = "cli-stuck", version = "1")]
pub(crate) async fn cli_stuck(run: &Run) -> Result<(), WorkflowError> {
    CliHang.start(run).await
}

/// One build of `cli-mixed@1`...
#[aiki::workflow(name = "cli-mixed", version = "1")]
pub(crate) async fn mixed_old(_run: &Run, n: u32) -> Result<u32, WorkflowError> {
    Ok(n)
}

/// ...and another, which takes another input: a rolling deploy half done.
#[aiki::workflow(name = "cli-mixed", version = "1")]
pub(crate) async fn mixed_new(_run: &Run, n: u64) -> Result<u64, WorkflowError> {
    Ok(n)
}

/// The runs of [`scene`].
pub(crate) struct Scene {
    pub(crate) url: String,
    /// Awaits `nudge` a second time, its first wait timed out.
    pub(crate) timeouts: RunId,
    /// Completed after its wait on a child timed out.
    pub(crate) impatient: RunId,
    /// Failed by its child.
    pub(crate) orphaned: RunId,
    /// Completed: two task calls, one input too large to record.
    pub(crate) big: RunId,
    /// Failed by a task whose error holds terminal escapes.
    pub(crate) broken: RunId,
}

pub(crate) async fn scene(backend: Backend) -> Scene {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let worker = Worker::builder(store.clone())
        .register(CliTimeouts)
        .register(CliImpatient)
        .register(CliOrphaned)
        .register(CliFails)
        .register(CliBig)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(5));
    let timeouts = client.start::<CliTimeouts>(NoInput).await.unwrap();
    let impatient = client.start::<CliImpatient>(NoInput).await.unwrap();
    let orphaned = client.start::<CliOrphaned>(NoInput).await.unwrap();
    let big = client.start::<CliBig>(70_000).await.unwrap();
    let broken = client.start::<CliFails>(NoInput).await.unwrap();
    for (run, status) in [
        (impatient.id(), RunStatus::Completed),
        (orphaned.id(), RunStatus::Failed),
        (big.id(), RunStatus::Completed),
        (broken.id(), RunStatus::Failed),
    ] {
        client
            .any_run(run)
            .wait_until_ended()
            .await
            .unwrap_or_else(|e| panic!("{run}: {e}"));
        assert_eq!(client.any_run(run).record().await.unwrap().status, status);
    }
    // The first wait timed out, the second waits.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let history = store.load_history(timeouts.id()).await.unwrap();
        if history.run.status == RunStatus::AwaitingEvent
            && history.events.iter().any(|event| event.timed_out)
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{:?}", history.run);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker.shutdown().await;
    Scene {
        url,
        timeouts: timeouts.id(),
        impatient: impatient.id(),
        orphaned: orphaned.id(),
        big: big.id(),
        broken: broken.id(),
    }
}
