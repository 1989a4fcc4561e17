//! Schedules fired by the worker's daemons on the env's clock: `TestEnv` skips from one
//! occurrence to the next, each starts a run that completes, and the log says what fired;
//! schedules declared in code are reconciled at each worker start, forward only; bad
//! definitions are refused with what is wrong.

use std::time::Duration;

use aiki::store::{
    ListRuns, OverlapPolicy, RunFilter, ScheduleAction, ScheduleCreated, ScheduleLogKind,
    ScheduleSpec, ScheduleStatus,
};
use aiki::testing::TestEnv;
use aiki::{Run, RunStatus, Scheduled, WorkflowError};

const HOUR: Duration = Duration::from_secs(3600);

#[aiki::workflow(name = "hourly-report", version = "1")]
async fn hourly_report(_run: &Run, team: String) -> Result<String, WorkflowError> {
    Ok(format!("report for {team}"))
}

fn env() -> TestEnv {
    TestEnv::builder()
        .workflows(|w| w.register(HourlyReport))
        .start()
        .expect("the env starts")
}

async fn completed(env: &TestEnv) -> usize {
    let filter = RunFilter::default()
        .workflow("hourly-report")
        .status(RunStatus::Completed);
    env.store()
        .list_runs(ListRuns::new(filter, 100))
        .await
        .unwrap()
        .runs
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_fire_each_occurrence_and_test_env_skips_to_it() {
    let env = env();
    let created = env
        .client()
        .schedule::<HourlyReport>("reports", ScheduleSpec::every(HOUR), "ops".to_owned())
        .overlap(OverlapPolicy::Skip)
        .await
        .unwrap();
    let ScheduleCreated::Created(record) = created else {
        panic!("a new schedule")
    };
    assert_eq!(record.next_at, Some(env.now() + 3_600_000));
    // Creating it again changes nothing.
    let again = env
        .client()
        .schedule::<HourlyReport>("reports", ScheduleSpec::every(HOUR), "ops".to_owned())
        .await
        .unwrap();
    assert!(matches!(again, ScheduleCreated::Existing(_)));
    for hour in 1..=3 {
        let at = env
            .skip_to_next_occurrence()
            .await
            .unwrap()
            .expect("active");
        assert_eq!(at, record.created_at + hour * 3_600_000);
        assert_eq!(completed(&env).await, hour as usize);
    }
    let log = env.store().schedule_log("reports", 100).await.unwrap();
    let fired: Vec<_> = log
        .iter()
        .filter(|row| row.kind == ScheduleLogKind::Fired)
        .map(|row| row.nominal_at)
        .collect();
    assert_eq!(fired.len(), 3);
    env.client()
        .act_on_schedule("reports", ScheduleAction::Pause { reason: None })
        .await
        .unwrap();
    assert_eq!(env.skip_to_next_occurrence().await.unwrap(), None);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_cron_expression_or_time_zone_is_refused_and_nothing_is_stored() {
    let env = env();
    for (spec, says) in [
        (ScheduleSpec::cron("0 9 * *"), "has 4 fields; write 5"),
        (ScheduleSpec::cron("0 9 * * FUNDAY"), "is not valid"),
        (
            ScheduleSpec::cron_in("0 9 * * *", "Europe/Atlantis"),
            "`Europe/Atlantis` is not an IANA time zone",
        ),
        (
            ScheduleSpec::every(Duration::ZERO),
            "interval of 0 ms is too short",
        ),
    ] {
        let error = env
            .client()
            .schedule::<HourlyReport>("bad", spec.clone(), "ops".to_owned())
            .await
            .expect_err("refused")
            .to_string();
        assert!(error.contains(says), "{spec}: {error}");
    }
    assert!(env.store().schedules().await.unwrap().is_empty());
    env.shutdown().await;
}

#[aiki::workflow(name = "hourly-report", version = "2")]
async fn hourly_report_v2(_run: &Run, team: String) -> Result<String, WorkflowError> {
    Ok(format!("report v2 for {team}"))
}

/// Waits (bounded) until the worker's start has reconciled schedule `name` to `generation`
/// and `status`.
async fn reconciled(env: &TestEnv, name: &str, generation: i64, status: ScheduleStatus) {
    for _ in 0..2_000 {
        if let Ok(found) = env.store().schedule(name).await
            && found.generation == generation
            && found.status == status
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("schedule {name} never reached generation {generation}, {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_in_code_are_reconciled_at_worker_start_forward_only() {
    let declared = |generation| {
        Scheduled::new::<HourlyReport>("in-code", ScheduleSpec::every(HOUR), "ops".to_owned())
            .generation(generation)
    };
    let mut env = TestEnv::builder()
        .workflows(move |w| w.register(HourlyReport).schedule(declared(1)))
        .start()
        .expect("the env starts");
    reconciled(&env, "in-code", 1, ScheduleStatus::Active).await;
    env.skip_to_next_occurrence()
        .await
        .unwrap()
        .expect("active");
    assert_eq!(completed(&env).await, 1);
    // A deploy moving it to version 2 at generation 2.
    env.deploy(|w| {
        w.register(HourlyReport).register(HourlyReportV2).schedule(
            Scheduled::new::<HourlyReportV2>(
                "in-code",
                ScheduleSpec::every(HOUR),
                "ops".to_owned(),
            )
            .generation(2),
        )
    })
    .await
    .unwrap();
    reconciled(&env, "in-code", 2, ScheduleStatus::Active).await;
    let stored = env.store().schedule("in-code").await.unwrap();
    assert_eq!(stored.definition.namespace.version, "2");
    // An older binary starting again (generation 1) leaves generation 2 in place.
    env.deploy(move |w| {
        w.register(HourlyReport)
            .register(HourlyReportV2)
            .schedule(declared(1))
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    reconciled(&env, "in-code", 2, ScheduleStatus::Active).await;
    // A deploy without it: inactive, still listed, never fired.
    env.deploy(|w| w.register(HourlyReport).register(HourlyReportV2))
        .await
        .unwrap();
    reconciled(&env, "in-code", 2, ScheduleStatus::Inactive).await;
    assert_eq!(env.skip_to_next_occurrence().await.unwrap(), None);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_schedule_in_code_fails_the_build() {
    let store = aiki::connect("memory:").await.unwrap();
    let error = aiki::Worker::builder(store)
        .register(HourlyReport)
        .schedule(Scheduled::new::<HourlyReport>(
            "broken",
            ScheduleSpec::cron_in("0 9 * * *", "Mars/Olympus"),
            "ops".to_owned(),
        ))
        .build()
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("`Mars/Olympus` is not an IANA time zone"),
        "{error}"
    );
}
