//! Continue-as-new, end to end on every backend: a run that loops for ever continues as a new
//! run with a fresh history; the chain keeps the reference id, carries the events a run did not
//! consume, and whoever waits on its first run (a handle's `result()`, a parent, a schedule's
//! overlap policy) follows it to its last run. A history that grows past the executor's hard
//! limit fails the run with a typed error; one that continues as new never gets there.

use std::time::Duration;

use aiki::store::{OverlapPolicy, ScheduleLogKind, ScheduleSpec};
use aiki::{ClientError, HistoryLimits, Run, RunStatus, State, TaskError, WorkflowError};
use aiki_tests::{Backend, Executions, Harness, PATIENCE, on_every_backend};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Months {
    month: u32,
    last: u32,
}

#[aiki::task(name = "renewal-bill")]
async fn renewal_bill(
    month: u32,
    State(executions): State<Executions>,
) -> Result<String, TaskError> {
    executions.record("renewal-bill");
    Ok(format!("billed month {month}"))
}

/// Bills a month, waits for the next month's tick, and continues as new with it, until the
/// last month.
#[aiki::workflow(name = "renewal", version = "1", events(tick = u32))]
async fn renewal(run: &Run, months: Months) -> Result<String, WorkflowError> {
    let billed = RenewalBill.start(run, months.month).await?;
    if months.month >= months.last {
        return Ok(billed);
    }
    let month = run.events().tick().wait().await?;
    Err(run.continue_as_new::<Renewal>(Months {
        month,
        last: months.last,
    }))
}

/// A chain of runs keeps its reference id and the events its runs did not consume, and its
/// first run's `result()` is its last run's output.
async fn a_chain_keeps_its_reference_id_and_unconsumed_events(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Renewal).task(RenewalBill)).await;
    let reference = format!("renewal-{}", uuid::Uuid::new_v4());
    let first = h
        .client
        .start::<Renewal>(Months { month: 1, last: 3 })
        .reference_id(reference.clone())
        .await
        .unwrap();
    // Both ticks before the first run waits: the second is carried to the second run.
    first.send::<RenewalTick>(2).await.unwrap();
    first.send::<RenewalTick>(3).await.unwrap();
    assert_eq!(first.result().await.unwrap(), "billed month 3");

    let mut chain = vec![h.store.get_run(first.id()).await.unwrap()];
    while let Some(next) = chain.last().unwrap().continued_as {
        chain.push(h.store.get_run(next).await.unwrap());
    }
    assert_eq!(chain.len(), 3, "{chain:#?}");
    for (run, next) in chain.iter().zip(&chain[1..]) {
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(
            run.output, None,
            "a run that continued has no output of its own"
        );
        assert_eq!(run.reference_id, None);
        assert_eq!(next.continued_from, Some(run.id));
    }
    let last = chain.last().unwrap();
    assert_eq!(last.reference_id.as_deref(), Some(reference.as_str()));
    assert_eq!(last.output, Some(serde_json::json!("billed month 3")));
    for run in &chain {
        let history = h.store.load_history(run.id).await.unwrap();
        assert_eq!(
            history.entries.len(),
            1,
            "each run's history is its own month's"
        );
    }
    assert_eq!(h.executions.count("renewal-bill"), 3);
    let view = aiki::ops::RunView::read(&h.client, first.id())
        .await
        .unwrap();
    let says = format!("continued as new: run {} carries on", chain[1].id);
    assert!(view.doing.starts_with(&says), "{}", view.doing);
    // The carried tick is the second run's first event.
    let second = h.store.load_history(chain[1].id).await.unwrap();
    assert_eq!(second.events.len(), 1, "{:?}", second.events);
    assert_eq!(second.events[0].data, Some(serde_json::json!(3)));
}

/// Counts down, one task per run, continuing as new until zero.
#[aiki::workflow(name = "countdown", version = "1")]
async fn countdown(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    RenewalBill.start(run, n).await?;
    if n == 0 {
        return Ok(42);
    }
    Err(run.continue_as_new::<Countdown>(n - 1))
}

#[aiki::workflow(name = "countdown-parent", version = "1")]
async fn countdown_parent(run: &Run, n: u32) -> Result<String, WorkflowError> {
    let child = run.child::<Countdown>(n).await?;
    Ok(format!("the child ended with {}", child.wait().await?))
}

/// A parent waiting on a child that continues as new gets the last run's output.
async fn a_parent_gets_the_last_runs_output(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| {
        w.register(CountdownParent)
            .register(Countdown)
            .task(RenewalBill)
    })
    .await;
    let parent = h.client.start::<CountdownParent>(3).await.unwrap();
    assert_eq!(parent.result().await.unwrap(), "the child ended with 42");
    assert_eq!(h.executions.count("renewal-bill"), 4);
    // The parent's record of the child's start names the first run of the chain.
    let history = h.store.load_history(parent.id()).await.unwrap();
    let child = history.children[0].clone();
    assert_eq!(child.continued_from, None);
    assert!(child.continued_as.is_some());
}

/// Continues as the next version of its own workflow (`0`), or (wrongly) as another
/// workflow (anything else).
#[aiki::workflow(name = "mover", version = "1")]
async fn mover(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    if n == 0 {
        return Err(run.continue_as_new::<MoverV2>(7));
    }
    Err(run.continue_as_new::<Countdown>(0))
}

/// The next version: its input type differs.
#[aiki::workflow(name = "mover", version = "2")]
async fn mover_v2(run: &Run, n: u64) -> Result<u32, WorkflowError> {
    RenewalBill
        .start(run, u32::try_from(n).unwrap_or(u32::MAX))
        .await?;
    Ok(2)
}

/// A chain moves onto a newer version of its workflow with its reference id; a run may not
/// continue as another workflow (the run fails, saying so).
async fn a_chain_moves_to_a_newer_version_but_not_to_another_workflow(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| {
        w.register(Countdown)
            .register(Mover)
            .register(MoverV2)
            .task(RenewalBill)
    })
    .await;
    let reference = format!("mover-{}", uuid::Uuid::new_v4());
    let moved_on = h
        .client
        .start::<Mover>(0)
        .reference_id(reference.clone())
        .await
        .unwrap();
    assert_eq!(moved_on.result().await.unwrap(), 2);
    let first = moved_on.record().await.unwrap();
    let successor = h.store.get_run(first.continued_as.unwrap()).await.unwrap();
    assert_eq!(successor.namespace.version, "2");
    assert_eq!(successor.input, serde_json::json!(7));
    assert_eq!(successor.reference_id.as_deref(), Some(reference.as_str()));

    let wrong = h.client.start::<Mover>(1).await.unwrap();
    let failed = h.reach(&wrong, RunStatus::Failed).await;
    let message = failed.error.unwrap().message;
    assert!(
        message.contains("continues as a version of its own workflow"),
        "{message}"
    );
    match wrong.result().await {
        Err(ClientError::EndedInOtherStatus { status, .. }) => {
            assert_eq!(status, RunStatus::Failed);
        }
        other => panic!("expected a failed run, got {other:?}"),
    }
}

/// Bills `count` months from `from`, one task each, continuing as new every `per_run` months
/// when `per_run` is above zero.
#[aiki::workflow(name = "biller", version = "1")]
async fn biller(run: &Run, plan: (u32, u32, u32)) -> Result<u32, WorkflowError> {
    let (from, count, per_run) = plan;
    for month in from..count {
        if per_run > 0 && month >= from + per_run {
            return Err(run.continue_as_new::<Biller>((month, count, per_run)));
        }
        RenewalBill.start(run, month).await?;
    }
    Ok(count)
}

/// Past the hard limit no new task starts and the run fails with `history_too_large`, never
/// retried; continuing as new keeps every run's history below it.
async fn a_history_past_its_limit_fails_the_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| {
        w.register(Biller)
            .task(RenewalBill)
            .history_limits(HistoryLimits::new(2, 4))
    })
    .await;
    let unbounded = h.client.start::<Biller>((0, 10, 0)).await.unwrap();
    let failed = h.reach(&unbounded, RunStatus::Failed).await;
    let error = failed.error.unwrap();
    assert_eq!(error.kind, "history_too_large");
    assert!(
        error.message.contains("continue as new"),
        "{}",
        error.message
    );
    assert_eq!(
        h.executions.count("renewal-bill"),
        4,
        "no task past the limit"
    );

    let bounded = h.client.start::<Biller>((0, 10, 3)).await.unwrap();
    assert_eq!(bounded.result().await.unwrap(), 10);
    assert_eq!(h.executions.count("renewal-bill"), 14);
}

on_every_backend!(
    a_chain_keeps_its_reference_id_and_unconsumed_events,
    a_parent_gets_the_last_runs_output,
    a_chain_moves_to_a_newer_version_but_not_to_another_workflow,
    a_history_past_its_limit_fails_the_run,
    a_schedule_follows_the_chain_of_its_last_run,
);

/// Continues as new once, then waits for `done`.
#[aiki::workflow(name = "nightly-chain", version = "1", events(done = ()))]
async fn nightly_chain(run: &Run, continued: bool) -> Result<(), WorkflowError> {
    if !continued {
        return Err(run.continue_as_new::<NightlyChain>(true));
    }
    run.events().done().wait().await
}

/// The schedule's log rows of `kind`, once `count` of them are there (real time, bounded).
async fn rows(
    h: &Harness,
    kind: ScheduleLogKind,
    count: usize,
) -> Vec<aiki::store::ScheduleLogEntry> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let log = h.store.schedule_log("nightly", 100).await.unwrap();
        let of_kind: Vec<_> = log.iter().filter(|row| row.kind == kind).cloned().collect();
        if of_kind.len() >= count {
            return of_kind;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} `{}` rows never came: {log:#?}",
            kind.as_str()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A schedule's overlap policy sees the chain's last run: while it is open an occurrence is
/// skipped, once it ends the next one fires.
async fn a_schedule_follows_the_chain_of_its_last_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(NightlyChain)).await;
    let every = Duration::from_secs(3600);
    h.client
        .schedule::<NightlyChain>("nightly", ScheduleSpec::every(every), false)
        .overlap(OverlapPolicy::Skip)
        .await
        .unwrap();
    h.advance(every);
    let fired = rows(&h, ScheduleLogKind::Fired, 1).await;
    let first = h
        .client
        .handle::<NightlyChain>(fired[0].run_id.expect("the fired run"));
    let continued = h.reach(&first, RunStatus::Completed).await;
    let last = h
        .client
        .handle::<NightlyChain>(continued.continued_as.expect("it continued"));
    h.reach(&last, RunStatus::AwaitingEvent).await;
    h.advance(every);
    rows(&h, ScheduleLogKind::Skipped, 1).await;

    first.send::<NightlyChainDone>(()).await.unwrap();
    first.result().await.unwrap();
    h.advance(every);
    rows(&h, ScheduleLogKind::Fired, 2).await;
    let skipped = rows(&h, ScheduleLogKind::Skipped, 1).await;
    assert_eq!(
        skipped.len(),
        1,
        "the occurrence after the chain ended fired: {skipped:#?}"
    );
}

/// History limits that make no sense are refused when the worker is built, saying why.
#[tokio::test]
async fn history_limits_that_make_no_sense_are_refused() {
    let store = aiki::store::connect("memory:").await.unwrap();
    for (warn, limit) in [(0, 10), (10, 0), (10, 10), (20, 10)] {
        let built = aiki::Worker::builder(store.clone())
            .register(Biller)
            .task(RenewalBill)
            .state(Executions::default())
            .history_limits(HistoryLimits::new(warn, limit))
            .build();
        match built {
            Err(ClientError::Config(message)) => {
                assert!(
                    message.contains("warning below the limit")
                        && message.contains(&format!("warn {warn} and limit {limit}")),
                    "{message}"
                );
            }
            other => panic!("warn {warn}, limit {limit}: expected a config error, got {other:?}"),
        }
    }
}
