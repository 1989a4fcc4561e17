//! The workflows the crash tests run in real worker processes (`aiki_test_worker`), shared
//! with the tests so that they can start runs and read results with typed handles.

use std::io::Write;
use std::time::Duration;

use aiki::{Run, State, TaskContext, TaskError, WorkflowError};

/// Where task executions are recorded, and who this worker is.
#[derive(Debug)]
pub struct Env {
    /// The file each task execution appends a line to.
    pub side_effects: std::path::PathBuf,
    /// This worker's id.
    pub worker: String,
    /// How long the long steps take.
    pub long_task: Duration,
}

impl Env {
    fn record(&self, line: &str) -> Result<(), TaskError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.side_effects)?;
        // One write per line: appends of a few bytes are atomic, so processes never interleave.
        file.write_all(format!("{line}\n").as_bytes())?;
        Ok(())
    }
}

/// A quick step: records `step <input>`.
#[aiki::task(name = "step", retry = fixed(max_attempts = 5, delay_ms = 100))]
pub async fn step(input: String, env: State<Env>) -> Result<String, TaskError> {
    env.record(&format!("step {input}"))?;
    Ok(input)
}

/// A long step (retried): records its start, takes `AIKI_LONG_TASK_MS`, records its end.
#[aiki::task(name = "long-step", retry = fixed(max_attempts = 3, delay_ms = 1))]
pub async fn long_step(
    input: String,
    env: State<Env>,
    ctx: TaskContext,
) -> Result<String, TaskError> {
    env.record(&format!("long-start {input} attempt {}", ctx.attempt()))?;
    tokio::time::sleep(env.long_task).await;
    env.record(&format!("long-end {input} by {}", env.worker))?;
    Ok(format!(
        "{input} by {} in attempt {}",
        env.worker,
        ctx.attempt()
    ))
}

/// The long step, never retried.
#[aiki::task(name = "long-step-once")]
pub async fn long_step_once(input: String, env: State<Env>) -> Result<String, TaskError> {
    env.record(&format!("long-start {input} attempt 1"))?;
    tokio::time::sleep(env.long_task).await;
    env.record(&format!("long-end {input} by {}", env.worker))?;
    Ok(input)
}

/// Five quick steps in a row.
#[aiki::workflow(name = "five-steps", version = "1")]
pub async fn five_steps(run: &Run, key: String) -> Result<usize, WorkflowError> {
    for i in 0..5 {
        Step.start(run, format!("{key}/{i}")).await?;
    }
    Ok(5)
}

/// A quick step, a long one, a quick one.
#[aiki::workflow(name = "long", version = "1")]
pub async fn long(run: &Run, key: String) -> Result<String, WorkflowError> {
    Step.start(run, format!("{key}/before")).await?;
    let out = LongStep.start(run, key.clone()).await?;
    Step.start(run, format!("{key}/after")).await?;
    Ok(out)
}

/// As `long`, with a long step that is never retried.
#[aiki::workflow(name = "long-once", version = "1")]
pub async fn long_once(run: &Run, key: String) -> Result<String, WorkflowError> {
    Step.start(run, format!("{key}/before")).await?;
    let out = LongStepOnce.start(run, key.clone()).await?;
    Step.start(run, format!("{key}/after")).await?;
    Ok(out)
}

/// The input of `many-long`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ManyLongInput {
    /// Names its steps (`<key>/<i>`).
    pub key: String,
    /// How many long steps it runs.
    pub steps: u32,
}

/// `steps` long steps in a row, never retried: more work than one push endpoint's execution
/// budget holds.
#[aiki::workflow(name = "many-long", version = "1")]
pub async fn many_long(run: &Run, input: ManyLongInput) -> Result<u32, WorkflowError> {
    for i in 0..input.steps {
        LongStepOnce
            .start(run, format!("{}/{i}", input.key))
            .await?;
    }
    Ok(input.steps)
}

/// Two quick steps: the children of `with-children`.
#[aiki::workflow(name = "two-steps", version = "1")]
pub async fn two_steps(run: &Run, key: String) -> Result<usize, WorkflowError> {
    for i in 0..2 {
        Step.start(run, format!("{key}/{i}")).await?;
    }
    Ok(2)
}

/// A step, two children of two steps each started one after the other and awaited, a last
/// step: every kind of write a parent makes (entries, child starts, a suspension, a wake-up by
/// its children's ends, a completion).
#[aiki::workflow(name = "with-children", version = "1")]
pub async fn with_children(run: &Run, key: String) -> Result<usize, WorkflowError> {
    Step.start(run, format!("{key}/own")).await?;
    let first = run.child::<TwoSteps>(format!("{key}/a")).start().await?;
    let second = run.child::<TwoSteps>(format!("{key}/b")).start().await?;
    let steps = first.wait().await? + second.wait().await?;
    Step.start(run, format!("{key}/last")).await?;
    Ok(steps + 2)
}
