//! The workflows of the upgrade fixtures: databases written by an earlier release, holding runs
//! suspended in every waiting status and a queued one, which the current release must finish.
//!
//! The fixtures are made once per release by `aiki_make_upgrade_fixture` and committed under
//! `tests/fixtures/<release>/`; `tests/upgrade.rs` upgrades each to the current schema and
//! completes every run. These definitions must keep their names, versions and behaviour for as
//! long as a fixture uses them.

use std::time::Duration;

use aiki::{Run, State, TaskContext, TaskError, WorkflowError};

use crate::Executions;

/// The manual clock's time when the fixtures were written (2026-01-01T00:00:00Z).
pub const WRITTEN_AT: i64 = 1_767_225_600_000;

/// How far the test moves the clock to fire every timer the fixtures hold.
pub const TIMERS: Duration = Duration::from_secs(2 * 3600);

/// The runs each fixture holds: `(input, status the run waits in when the fixture is written)`.
pub const RUNS: [(&str, &str); 5] = [
    ("sleep", "sleeping"),
    ("event", "awaiting_event"),
    ("child", "awaiting_child_workflow"),
    ("retry", "awaiting_retry"),
    ("queued", "queued"),
];

/// Records its input, returns it marked.
#[aiki::task(name = "fixture-step")]
pub async fn fixture_step(
    input: String,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    executions.record("fixture-step");
    Ok(format!("step({input})"))
}

/// Fails its first attempt; the second succeeds an hour later.
#[aiki::task(name = "fixture-flaky", retry = fixed(max_attempts = 3, delay_ms = 3_600_000))]
pub async fn fixture_flaky(
    input: String,
    State(executions): State<Executions>,
    ctx: TaskContext,
) -> Result<String, TaskError> {
    executions.record("fixture-flaky");
    if ctx.attempt() == 1 {
        return Err(TaskError::new("the first attempt fails"));
    }
    Ok(format!("flaky({input})"))
}

/// A child that sleeps for an hour.
#[aiki::workflow(name = "fixture-child", version = "1")]
pub async fn fixture_child(run: &Run, input: String) -> Result<String, WorkflowError> {
    run.sleep("nap", Duration::from_secs(3600)).await?;
    Ok(format!("child({input})"))
}

/// One step, then a wait chosen by the input, then another step.
#[aiki::workflow(name = "fixture", version = "1", events(go = String))]
pub async fn fixture(run: &Run, input: String) -> Result<String, WorkflowError> {
    let first = FixtureStep.start(run, input.clone()).await?;
    let waited = match input.as_str() {
        "sleep" => {
            run.sleep("hour", Duration::from_secs(3600)).await?;
            "slept".to_owned()
        }
        "event" => run.events().go().wait().await?,
        "child" => {
            run.child::<FixtureChild>(input.clone())
                .await?
                .wait()
                .await?
        }
        "retry" => FixtureFlaky.start(run, input.clone()).await?,
        _ => "nothing".to_owned(),
    };
    FixtureStep.start(run, format!("{first}+{waited}")).await
}

/// What each run ends with once it has been upgraded and woken.
pub fn expected_output(input: &str) -> String {
    let waited = match input {
        "sleep" => "slept".to_owned(),
        "event" => "sent".to_owned(),
        "child" => "child(child)".to_owned(),
        "retry" => "flaky(retry)".to_owned(),
        _ => "nothing".to_owned(),
    };
    format!("step(step({input})+{waited})")
}
