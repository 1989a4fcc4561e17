//! The server owns time: a writer whose clock is an hour off gets the durations it meant, timed
//! by the server's clock (a sleep counted from now, a task's or a workflow's retry), and the times
//! a suspension takes from its records stay as recorded. A writer of an earlier release, which
//! sends no `from`, has its sleep stored as sent and gets the `null` it expects.

use crate::support;

use aiki_server::ServerConfig;
use aiki_store::http::HttpStore;
use aiki_store::{
    ClaimRequest, ClientStore, EntryKind, EntryRecord, EntryStatus, ExecutorStore, Failure, Millis,
    Namespace, NewRun, ReadStore, RunId, RunRecord, RunStatus, SleepRecord, Transition, WaitSpec,
};
use serde_json::{Value, json};
use support::remote::Remote;

const HOUR: Millis = 3_600_000;
const NAP: Millis = 5_000;

fn system_now() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as Millis
}

/// A server in front of a fresh SQLite file, and a run it has claimed for `owner`.
async fn claimed_run(owner: &str) -> (Remote, HttpStore, RunRecord) {
    let path = std::env::temp_dir().join(format!("aiki-store-time-{}.db", RunId::new()));
    let backing = aiki_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let remote = Remote::start(backing, ServerConfig::default().insecure_no_auth()).await;
    let http = HttpStore::new(&remote.url()).unwrap();
    let namespace = Namespace::new(format!("store-time-{}", RunId::new()), "1");
    let skewed = system_now() + HOUR;
    http.create_run(NewRun::new(
        namespace.clone(),
        json!({}),
        support::routes::hash(&json!({})),
        skewed,
    ))
    .await
    .unwrap();
    let request = ClaimRequest::new(owner, vec![namespace], "default", 1, skewed);
    let run = http
        .claim(request)
        .await
        .unwrap()
        .runs
        .pop()
        .expect("claimed");
    (remote, http, run)
}

/// Asserts that `at` is `NAP` after some time between `before` and now, by the system clock
/// (the server's).
fn nap_from_server_time(at: Millis, before: Millis, what: &str) {
    let after = system_now();
    assert!(
        (before + NAP..=after + NAP).contains(&at),
        "{what}: {at} is not {NAP} ms after the server's time ({before}..={after}): off by {} ms",
        at - (before + NAP)
    );
}

#[tokio::test]
async fn a_writer_an_hour_off_sleeps_for_what_it_meant() {
    for skew in [HOUR, -HOUR] {
        let (_remote, http, run) = claimed_run("skewed").await;
        let skewed = system_now() + skew;
        let before = system_now();
        let nap = SleepRecord::new(run.id, "nap", 0, NAP, skewed + NAP);
        let stored = http
            .put_sleep(run.revision, nap, Some(skewed))
            .await
            .unwrap();
        nap_from_server_time(stored.wake_at, before, "the stored sleep's end");
        let history = http.load_history(run.id).await.unwrap();
        assert_eq!(history.sleeps.len(), 1);
        assert_eq!(history.sleeps[0], stored, "the answer is what is stored");

        // A suspension's times are its records': they stay as the writer took them there.
        let wait = WaitSpec::default().sleep("nap", stored.wake_at);
        let sleeping = http
            .transition(
                run.id,
                run.revision,
                Transition::to(RunStatus::Sleeping, skewed)
                    .due_at(stored.wake_at)
                    .wait(wait),
            )
            .await
            .unwrap();
        assert_eq!(sleeping.due_at, Some(stored.wake_at));
    }
}

#[tokio::test]
async fn a_writer_an_hour_ahead_retries_a_workflow_after_the_delay_it_meant() {
    let (_remote, http, run) = claimed_run("ahead-retry").await;
    let skewed = system_now() + HOUR;
    let before = system_now();
    let retry = Transition::to(RunStatus::Scheduled, skewed).due_at(skewed + NAP);
    let scheduled = http.transition(run.id, run.revision, retry).await.unwrap();
    nap_from_server_time(scheduled.due_at.unwrap(), before, "the retry's due time");
}

#[tokio::test]
async fn a_writer_an_hour_ahead_retries_a_task_after_the_delay_it_meant() {
    let (_remote, http, run) = claimed_run("ahead-task").await;
    let skewed = system_now() + HOUR;
    let before = system_now();
    let failed = EntryRecord::new(
        run.id,
        "charge:aa",
        0,
        EntryKind::Task,
        EntryStatus::AwaitingRetry,
        skewed,
    )
    .attempts(1)
    .error(Failure::new("task_failed", "card declined"))
    .retry_at(skewed + NAP);
    http.put_entry(run.revision, failed).await.unwrap();
    let history = http.load_history(run.id).await.unwrap();
    let stored = history.entries[0].retry_at.unwrap();
    nap_from_server_time(stored, before, "the stored retry time");
    let waiting = http
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::AwaitingRetry, skewed)
                .due_at(skewed + NAP)
                .wait(WaitSpec::default().retry("charge:aa", 2, skewed + NAP)),
        )
        .await
        .unwrap();
    assert_eq!(
        waiting.due_at,
        Some(stored),
        "due when the stored entry says"
    );
}

#[tokio::test]
async fn a_sleep_counted_from_a_recorded_end_is_stored_as_given() {
    let (_remote, http, run) = claimed_run("extends").await;
    let recorded_end = system_now() + 10 * HOUR;
    let mut longer = SleepRecord::new(run.id, "nap", 0, NAP, recorded_end);
    longer.duration_ms = 2 * NAP;
    let stored = http
        .put_sleep(run.revision, longer.clone(), None)
        .await
        .unwrap();
    assert_eq!(stored, longer);
}

#[tokio::test]
async fn a_writer_of_an_earlier_release_gets_null_and_its_sleep_as_sent() {
    let (remote, http, run) = claimed_run("earlier").await;
    let skewed = system_now() + HOUR;
    let nap = SleepRecord::new(run.id, "nap", 0, NAP, skewed + NAP);
    let url = format!("{}/api/v1/runs/{}/sleeps", remote.url(), run.id);
    let response = reqwest::Client::new()
        .post(url)
        .json(&json!({"expected": run.revision, "sleep": nap}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap(), Value::Null);
    let history = http.load_history(run.id).await.unwrap();
    assert_eq!(history.sleeps, [nap]);
}

#[tokio::test]
async fn a_from_that_is_not_a_time_is_refused_and_writes_nothing() {
    let (remote, http, run) = claimed_run("bad-from").await;
    let nap = SleepRecord::new(run.id, "nap", 0, NAP, system_now() + NAP);
    let url = format!("{}/api/v1/runs/{}/sleeps", remote.url(), run.id);
    for from in [json!("soon"), json!(1.5), json!({"at": 1})] {
        let response = reqwest::Client::new()
            .post(&url)
            .json(&json!({"expected": run.revision, "sleep": nap, "from": from}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.json::<aiki_store::ErrorBody>().await.unwrap();
        assert_eq!(
            (status, body.code.as_str()),
            (422, "invalid_request"),
            "{from}: {body:?}"
        );
        assert!(body.message.contains("from"), "names the field: {body:?}");
    }
    let history = http.load_history(run.id).await.unwrap();
    assert!(history.sleeps.is_empty(), "nothing was written");
}
