//! `aiki::testing::TestEnv`: time skips only while the test waits on a run, never past an
//! event the test is about to send; mocks replace handlers; `wait_for_status_after` sees a
//! status reached and left between two polls.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use aiki::testing::TestEnv;
use aiki::{ClientError, Clock, Run, RunStatus, TaskError, WorkflowError};

const DAY: Duration = Duration::from_secs(86_400);
const HOUR: Duration = Duration::from_secs(3600);

static FLAKY_CALLS: AtomicU32 = AtomicU32::new(0);

/// Fails its first two attempts; retried an hour later each time (too long to retry in process:
/// the run suspends as `awaiting_retry`).
#[aiki::task(name = "flaky-charge", retry = fixed(max_attempts = 3, delay_ms = 3600000))]
async fn flaky_charge(cents: u64) -> Result<u64, TaskError> {
    if FLAKY_CALLS.fetch_add(1, Ordering::SeqCst) < 2 {
        return Err(TaskError::new("the provider is down"));
    }
    Ok(cents)
}

#[aiki::task(name = "send-letter")]
async fn send_letter(to: String) -> Result<String, TaskError> {
    panic!("the real handler must not run in a test that mocks it ({to})")
}

#[aiki::workflow(name = "thirty-days", version = "1", events(confirmed = String))]
async fn thirty_days(run: &Run, cents: u64) -> Result<String, WorkflowError> {
    let charged = FlakyCharge.start(run, cents).await?;
    run.sleep("cooling-off", 14 * DAY).await?;
    let confirmed = run.events().confirmed().wait_timeout(7 * DAY).await?;
    run.sleep("grace", 9 * DAY).await?;
    let letter = SendLetter.start(run, format!("{charged}")).await?;
    Ok(format!("{letter}; confirmed: {confirmed:?}"))
}

#[aiki::workflow(name = "waits-a-week", version = "1", events(approved = String))]
async fn waits_a_week(run: &Run, _input: ()) -> Result<String, WorkflowError> {
    match run.events().approved().wait_timeout(7 * DAY).await? {
        Some(by) => Ok(format!("approved by {by}")),
        None => Ok("timed out".to_owned()),
    }
}

#[aiki::workflow(name = "naps", version = "1", events(again))]
async fn naps(run: &Run, _input: ()) -> Result<(), WorkflowError> {
    run.sleep("first", HOUR).await?;
    run.events().again().wait().await?;
    run.sleep("second", HOUR).await?;
    Ok(())
}

fn env() -> TestEnv {
    TestEnv::builder()
        .workflows(|w| w.register(ThirtyDays).register(WaitsAWeek).register(Naps))
        .mock(SendLetter, |to: String| async move {
            Ok(format!("letter to {to}"))
        })
        .start()
        .expect("the env starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thirty_day_workflow_with_retries_and_timeouts_runs_at_once() {
    let env = env();
    let began = env.now();
    let real = Instant::now();
    let run = env.start::<ThirtyDays>(700).await.unwrap();
    let output = env.result(&run).await.unwrap();
    assert_eq!(output, "letter to 700; confirmed: None");
    let skipped = Duration::from_millis((env.now() - began) as u64);
    // Two retry delays (2 h), 14 days, the 7-day timeout, 9 days.
    assert_eq!(skipped, 30 * DAY + 2 * HOUR);
    assert_eq!(FLAKY_CALLS.load(Ordering::SeqCst), 3);
    let history = env.history(&run).await.unwrap();
    assert_eq!(history.entries.len(), 2, "the charge and the letter");
    let statuses: Vec<RunStatus> = env
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .map(|change| change.to)
        .collect();
    assert!(statuses.contains(&RunStatus::AwaitingRetry), "{statuses:?}");
    assert!(statuses.contains(&RunStatus::AwaitingEvent), "{statuses:?}");
    println!(
        "30 days and 2 hours of workflow time in {:?} of real time",
        real.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_never_fires_before_the_next_line_sends_the_event() {
    let env = env();
    let began = env.now();
    let run = env.start::<WaitsAWeek>(()).await.unwrap();
    env.run_until_idle().await.unwrap();
    assert_eq!(env.now(), began, "running until idle never moves time");
    assert_eq!(run.record().await.unwrap().status, RunStatus::AwaitingEvent);
    env.send::<WaitsAWeekApproved, _>(&run, "ann".into())
        .await
        .unwrap();
    assert_eq!(env.result(&run).await.unwrap(), "approved by ann");
    assert_eq!(env.now(), began, "nothing was due: no time skipped");

    // Not sent: the week passes when the test waits for the result.
    let run = env.start::<WaitsAWeek>(()).await.unwrap();
    assert_eq!(env.result(&run).await.unwrap(), "timed out");
    assert_eq!(env.now() - began, 7 * 86_400_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_on_outside_input_is_blocked_not_hung() {
    let env = env();
    let run = env.start::<Naps>(()).await.unwrap();
    match env.result(&run).await {
        Err(ClientError::Blocked { status, waits, .. }) => {
            assert_eq!(status, RunStatus::AwaitingEvent);
            assert!(waits.contains("again"), "{waits}");
        }
        other => panic!("expected Blocked, got {other:?}"),
    }
    let error = env.result(&run).await.unwrap_err().to_string();
    assert!(error.contains("send it what it waits for"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_time_a_status_is_reached_is_read_from_the_timeline() {
    let env = env();
    let run = env.start::<Naps>(()).await.unwrap();
    let first = env
        .wait_for_status(&run, RunStatus::Sleeping)
        .await
        .unwrap();
    // Already sleeping at that revision: the *next* sleep is what it waits for.
    env.advance(HOUR).await.unwrap();
    env.send::<NapsAgain, _>(&run, ()).await.unwrap();
    // The run sleeps again and wakes up before anyone polls: the env skips the second hour.
    env.advance(HOUR).await.unwrap();
    assert_eq!(run.record().await.unwrap().status, RunStatus::Completed);
    // The handle's own method finds the second sleep in the timeline, though it was left.
    let again = run
        .wait_for_status_after(RunStatus::Sleeping, first.revision)
        .await
        .unwrap();
    assert!(again.revision > first.revision);
    assert_eq!(again.to, RunStatus::Sleeping);
    let woken = env
        .wait_for_status_after(&run, RunStatus::Queued, again.revision)
        .await
        .unwrap();
    assert!(woken.revision > again.revision);
    // Past its end nothing comes: a terminal run is refused, not waited on forever.
    let last = run.record().await.unwrap().revision;
    assert!(matches!(
        run.wait_for_status_after(RunStatus::Sleeping, last).await,
        Err(ClientError::EndedInOtherStatus { .. })
    ));
    assert!(env.clock().now() > 0);
}

#[aiki::task(name = "greet")]
async fn greet(name: String) -> Result<String, TaskError> {
    Ok(format!("hello {name}"))
}

#[aiki::workflow(name = "greeter", version = "1", events(proceed))]
async fn greeter(run: &Run, name: String) -> Result<String, WorkflowError> {
    let hello = Greet.start(run, name).await?;
    run.events().proceed().wait().await?;
    Ok(hello)
}

/// The same version, a letter appended after the wait.
#[aiki::workflow(name = "greeter", version = "1", events(proceed))]
async fn greeter_next(run: &Run, name: String) -> Result<String, WorkflowError> {
    let hello = Greet.start(run, name).await?;
    run.events().proceed().wait().await?;
    SendLetter.start(run, hello).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_replaces_the_code_under_runs_in_flight() {
    // The service's registry, as its worker serves it; the env adds its mocks.
    let registry = aiki::Registry::builder().register(Greeter).build().unwrap();
    let mut env = TestEnv::builder()
        .registry(registry)
        .mock(SendLetter, |to: String| async move {
            Ok(format!("letter: {to}"))
        })
        .start()
        .unwrap();
    let run = env.start::<Greeter>("ann".into()).await.unwrap();
    env.wait_for_status(&run, RunStatus::AwaitingEvent)
        .await
        .unwrap();
    env.deploy(|w| w.register(GreeterNext)).await.unwrap();
    env.send::<GreeterProceed, _>(&run, ()).await.unwrap();
    let next = env.client().handle::<GreeterNext>(run.id());
    assert_eq!(env.result(&next).await.unwrap(), "letter: hello ann");
    let entries = env.history(&run).await.unwrap().entries;
    assert_eq!(entries.len(), 2, "greet replayed, the letter appended");
}

static QUICK_CALLS: AtomicU32 = AtomicU32::new(0);

/// Fails once; retried 2 ms later, in process (the run stays `running` meanwhile).
#[aiki::task(name = "quick-retry", retry = fixed(max_attempts = 2, delay_ms = 2))]
async fn quick_retry(n: u64) -> Result<u64, TaskError> {
    if QUICK_CALLS.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(TaskError::new("once"));
    }
    Ok(n)
}

#[aiki::workflow(name = "quick", version = "1")]
async fn quick(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    QuickRetry.start(run, n).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_in_process_finishes_on_the_manual_clock() {
    let env = TestEnv::builder()
        .workflows(|w| w.register(Quick))
        .start()
        .unwrap();
    let run = env.start::<Quick>(4).await.unwrap();
    assert_eq!(env.result(&run).await.unwrap(), 4);
    assert_eq!(QUICK_CALLS.load(Ordering::SeqCst), 2);
}

#[aiki::workflow(name = "elsewhere", version = "1")]
async fn elsewhere(run: &Run, _input: ()) -> Result<(), WorkflowError> {
    run.child::<Naps>(()).pool("gpu").await?.wait().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_routed_to_another_pool_is_blocked_not_a_timeout() {
    let env = TestEnv::builder()
        .workflows(|w| w.register(Elsewhere).register(Naps))
        .start()
        .unwrap();
    let run = env.start::<Elsewhere>(()).await.unwrap();
    match env.result(&run).await {
        Err(ClientError::Blocked { status, .. }) => {
            assert_eq!(status, RunStatus::AwaitingChildWorkflow)
        }
        other => panic!("expected Blocked, got {other:?}"),
    }
}

/// A mock that spies on the real function: called from a task attempt, not workflow code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mock_may_call_the_real_task_fn() {
    let env = TestEnv::builder()
        .workflows(|w| w.register(Greeter))
        .mock(Greet, |name: String| async move {
            Ok(format!("{} (spied)", greet(name).await?))
        })
        .start()
        .unwrap();
    let run = env.start::<Greeter>("bo".into()).await.unwrap();
    env.wait_for_status(&run, RunStatus::AwaitingEvent)
        .await
        .unwrap();
    env.send::<GreeterProceed, _>(&run, ()).await.unwrap();
    assert_eq!(env.result(&run).await.unwrap(), "hello bo (spied)");
}
