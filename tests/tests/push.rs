//! Signed HTTP push with real parts: an aiki server process whose dispatcher posts queued runs
//! to push endpoint processes (`aiki_test_endpoint`), which claim and execute them. Every
//! kind of bad signature is refused with nothing executed; a killed endpoint's run is
//! recovered and pushed again; a run longer than the execution budget completes over several
//! deliveries, no task run twice; a rotated secret is accepted during the overlap only; a
//! frozen endpoint is fenced when it wakes, its run finished by another delivery.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::time::{Duration, Instant};

use aiki::RunStatus;
use aiki::store::push::{SIGNATURE_HEADER, sign};
use aiki::store::{EndpointRecord, EndpointSecret, Millis, Namespace};
use aiki_tests::Backend;
use aiki_tests::crash::{FiveSteps, Long, ManyLong, ManyLongInput};
use aiki_tests::processes::wait_for;

// The world of the process tests; this test uses part of it.
#[allow(dead_code)]
#[path = "processes/world.rs"]
mod world;

use world::{EndpointProcess, Serving, World, free_address, server_process};

// An execution past its budget, in process.
#[path = "push/budget.rs"]
mod budget;

#[allow(dead_code)]
const PATIENCE: Duration = Duration::from_secs(120);

fn now() -> Millis {
    aiki::Clock::now(&aiki::SystemClock)
}

/// A world on SQLite whose server process runs the push dispatcher.
async fn world_with_a_server() -> World {
    let mut world = World::new(Backend::Sqlite).await;
    let (child, url) = server_process(&world.url, "127.0.0.1:0");
    world.server = Some(world::Server {
        url,
        key: String::new(),
        runs: Serving::Process(child),
    });
    world
}

/// Sets the push endpoint of `workflow` version 1 to `url` with `budget_ms`; its secret.
async fn set_endpoint(world: &World, workflow: &str, url: &str, budget_ms: Millis) -> String {
    let store = aiki::store::connect(&world.url).await.unwrap();
    let secret = EndpointSecret::generate(now());
    let endpoint = EndpointRecord::new(
        Namespace::new(workflow, "1"),
        url,
        budget_ms,
        secret.clone(),
        now(),
    );
    store.put_endpoint(endpoint, None).await.unwrap();
    secret.secret
}

/// Points the endpoint of `workflow` version 1 at `url`, secrets kept.
async fn move_endpoint(world: &World, workflow: &str, url: &str) {
    let store = aiki::store::connect(&world.url).await.unwrap();
    let mut endpoint = store
        .endpoints()
        .await
        .unwrap()
        .into_iter()
        .find(|endpoint| endpoint.namespace.workflow == workflow)
        .expect("an endpoint");
    let expected = endpoint.revision;
    endpoint.url = url.to_owned();
    store.put_endpoint(endpoint, Some(expected)).await.unwrap();
}

/// The dispatcher reads the endpoints again within 5 s.
const ENDPOINTS_READ: Duration = Duration::from_millis(5_500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_signatures_are_refused_with_nothing_executed() {
    let world = World::new(Backend::Sqlite).await;
    let secret = "whsec_the-endpoints-own";
    let endpoint = EndpointProcess::start(&world, "endpoint-sig", &[secret], "127.0.0.1:0", &[]);
    // Queued, and nobody else claims it: no worker, no dispatcher.
    let run = world
        .client
        .start::<FiveSteps>("signed".to_owned())
        .await
        .unwrap();
    let body = format!(
        r#"{{"run_id":"{}","workflow":"five-steps","version":"1"}}"#,
        run.id()
    );
    let other = format!(
        r#"{{"run_id":"{}","workflow":"five-steps","version":"1"}}"#,
        aiki::RunId::new()
    );
    let t = now();
    let v1 = "ab".repeat(32);
    let cases: Vec<(&str, Option<String>, &str, &str)> = vec![
        ("missing", None, &body, "no x-aiki-signature header"),
        ("malformed", Some("garbage".to_owned()), &body, "malformed"),
        (
            "malformed time",
            Some(format!("t=soon,v1={v1}")),
            &body,
            "malformed",
        ),
        ("no v1", Some(format!("t={t}")), &body, "malformed"),
        (
            "forged",
            Some(format!("t={t},v1={v1}")),
            &body,
            "no signature matches",
        ),
        (
            "wrong secret",
            Some(sign(&["whsec_another"], t, body.as_bytes())),
            &body,
            "no signature matches",
        ),
        (
            "stale",
            Some(sign(&[secret], t - 31_000, body.as_bytes())),
            &body,
            "expired",
        ),
        (
            "future",
            Some(sign(&[secret], t + 6_000, body.as_bytes())),
            &body,
            "not yet valid",
        ),
        (
            "tampered body",
            Some(sign(&[secret], t, other.as_bytes())),
            &body,
            "no signature matches",
        ),
    ];
    let http = reqwest::Client::new();
    let mut refused = 0;
    for (case, header, body, says) in &cases {
        let mut request = http.post(&endpoint.url).body(body.to_string());
        if let Some(header) = header {
            request = request.header(SIGNATURE_HEADER, header);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 401, "{case}: {text}");
        assert!(text.contains(says), "{case}: {text}");
        refused += 1;
    }
    // Nothing ran: the run is still queued, never claimed, and no task left an effect.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(run.record().await.unwrap().status, RunStatus::Queued);
    assert_eq!(world.count_prefix("step "), 0);
    println!(
        "push signatures: {} tried, {refused} refused (401), 0 executed",
        cases.len()
    );

    // Signed, but not a delivery: 400; a version or run it does not know: 404.
    let signed = |body: &str| sign(&[secret], now(), body.as_bytes());
    let post = |body: String| {
        let header = signed(&body);
        http.post(&endpoint.url)
            .header(SIGNATURE_HEADER, header)
            .body(body)
            .send()
    };
    assert_eq!(post("{not json".to_owned()).await.unwrap().status(), 400);
    assert_eq!(
        post(r#"{"run_id":"x"}"#.to_owned()).await.unwrap().status(),
        400
    );
    let unknown_version = body.replace("five-steps", "no-such-workflow");
    assert_eq!(post(unknown_version).await.unwrap().status(), 404);
    assert_eq!(post(other.clone()).await.unwrap().status(), 404);
    let oversized = format!("{}{}", body, " ".repeat(20_000));
    assert_eq!(post(oversized).await.unwrap().status(), 400);

    // Signed right: executed, answered once it has ended; delivered again, not claimable.
    let response = post(body.clone()).await.unwrap();
    assert_eq!(response.status(), 200);
    let answer: serde_json::Value = response.json().await.unwrap();
    assert_eq!(answer["outcome"], "completed", "{answer}");
    assert_eq!(answer["tasks_recorded"], 5, "{answer}");
    assert_eq!(run.record().await.unwrap().status, RunStatus::Completed);
    assert_eq!(post(body).await.unwrap().status(), 409);
    assert_eq!(world.count_prefix("step signed/"), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_runs_complete_and_a_killed_endpoints_run_is_pushed_again() {
    let world = world_with_a_server().await;
    let env = [("AIKI_LONG_TASK_MS", "3000")];
    let (listen, url) = free_address();
    let five_steps = set_endpoint(&world, "five-steps", &url, 10_000).await;
    let long = set_endpoint(&world, "long", &url, 10_000).await;
    let secrets = [five_steps.as_str(), long.as_str()];
    let mut endpoint = EndpointProcess::start(&world, "endpoint-a", &secrets, &listen, &env);

    // Measured once the dispatcher follows the endpoints (it reads them every 5 s).
    tokio::time::sleep(ENDPOINTS_READ).await;
    let started = Instant::now();
    let mut runs = Vec::new();
    for i in 0..20 {
        runs.push(
            world
                .client
                .start::<FiveSteps>(format!("push-{i}"))
                .await
                .unwrap(),
        );
    }
    for run in &runs {
        wait_for(run, RunStatus::Completed).await;
    }
    println!(
        "push: 20 runs of five steps completed through an endpoint in {:?}",
        started.elapsed()
    );
    let effects = world.effects();
    let twice: Vec<_> = effects
        .iter()
        .filter(|(line, count)| line.starts_with("step push-") && **count != 1)
        .collect();
    assert!(twice.is_empty(), "{twice:?}");
    assert_eq!(world.count_prefix("step push-"), 100);

    // Killed mid-task: claim recovery releases the run, the dispatcher pushes it again, to
    // the endpoint restarted on the same address.
    let run = world
        .client
        .start::<Long>("killed".to_owned())
        .await
        .unwrap();
    world.wait_for_effect("long-start killed").await;
    endpoint.kill_9();
    let killed = Instant::now();
    let _restarted = EndpointProcess::start(&world, "endpoint-b", &secrets, &listen, &env);
    let output = run.result().await.unwrap();
    println!(
        "push: an endpoint killed mid-task; the run completed {:?} after",
        killed.elapsed()
    );
    assert!(output.contains("by endpoint-b in attempt 2"), "{output}");
    assert_eq!(
        world.count_prefix("step killed/before"),
        1,
        "recorded steps are not run again"
    );
    assert_eq!(world.count_prefix("long-end killed by endpoint-a"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_longer_than_the_budget_completes_over_several_deliveries() {
    let world = world_with_a_server().await;
    let (listen, url) = free_address();
    let secret = set_endpoint(&world, "many-long", &url, 5_000).await;
    let env = [
        ("AIKI_LONG_TASK_MS", "1000"),
        ("AIKI_ENDPOINT_BUDGET_MS", "5000"),
    ];
    let _endpoint = EndpointProcess::start(&world, "endpoint-budget", &[&secret], &listen, &env);
    let started = Instant::now();
    let run = world
        .client
        .start::<ManyLong>(ManyLongInput {
            key: "budget".to_owned(),
            steps: 20,
        })
        .await
        .unwrap();
    assert_eq!(run.result().await.unwrap(), 20);
    let elapsed = started.elapsed();
    let effects = world.effects();
    for i in 0..20 {
        let line = format!("long-start budget/{i} attempt 1");
        assert_eq!(effects.get(&line), Some(&1), "{line}: {effects:?}");
    }
    let store = aiki::store::connect(&world.url).await.unwrap();
    let timeline = store.timeline(run.id()).await.unwrap();
    let handed_back = timeline
        .iter()
        .filter(|change| {
            change.to == RunStatus::Queued
                && change.error_kind.as_deref() == Some("execution_budget")
        })
        .count();
    let claims = timeline
        .iter()
        .filter(|change| change.to == RunStatus::Running)
        .count();
    println!(
        "push budget: 20 one-second tasks, 5 s budget: {claims} deliveries, {handed_back} hand-backs, 0 tasks run twice, {elapsed:?}"
    );
    assert!(handed_back >= 3, "{timeline:?}");
    assert_eq!(claims, handed_back + 1, "{timeline:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_is_accepted_during_the_overlap_only() {
    let world = world_with_a_server().await;
    let (listen, url) = free_address();
    let old = set_endpoint(&world, "five-steps", &url, 10_000).await;
    let mut knows_old = EndpointProcess::start(&world, "endpoint-old", &[&old], &listen, &[]);
    let first = world
        .client
        .start::<FiveSteps>("rotate-1".to_owned())
        .await
        .unwrap();
    wait_for(&first, RunStatus::Completed).await;

    // Rotated with an 8 s overlap: the dispatcher signs with both, so an endpoint that knows
    // only the old secret still accepts.
    let store = aiki::store::connect(&world.url).await.unwrap();
    let mut endpoint = store.endpoints().await.unwrap().remove(0);
    let expected = endpoint.revision;
    let new = EndpointSecret::generate(now());
    let rotated_at = Instant::now();
    endpoint.rotate(new.clone(), 8_000, now()).unwrap();
    store.put_endpoint(endpoint, Some(expected)).await.unwrap();
    tokio::time::sleep(ENDPOINTS_READ).await;
    let second = world
        .client
        .start::<FiveSteps>("rotate-2".to_owned())
        .await
        .unwrap();
    wait_for(&second, RunStatus::Completed).await;
    assert!(
        rotated_at.elapsed() < Duration::from_secs(8),
        "the overlap ended before the test could look"
    );

    // After the overlap only the new secret signs: the old-secret endpoint refuses.
    tokio::time::sleep(
        Duration::from_secs(8).saturating_sub(rotated_at.elapsed()) + Duration::from_millis(500),
    )
    .await;
    let third = world
        .client
        .start::<FiveSteps>("rotate-3".to_owned())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        third.record().await.unwrap().status,
        RunStatus::Queued,
        "refused: not executed"
    );
    assert_eq!(world.count_prefix("step rotate-3/"), 0);
    knows_old.kill_9();
    let _knows_new = EndpointProcess::start(&world, "endpoint-new", &[&new.secret], &listen, &[]);
    wait_for(&third, RunStatus::Completed).await;
    println!(
        "push rotation: old secret accepted during the overlap, refused after; the new one accepted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_endpoint_is_fenced_and_its_run_finished_by_another_delivery() {
    let world = world_with_a_server().await;
    let (listen, url) = free_address();
    let secret = set_endpoint(&world, "long", &url, 30_000).await;
    let env = [("AIKI_LONG_TASK_MS", "9000")];
    let frozen = EndpointProcess::start(&world, "endpoint-frozen", &[&secret], &listen, &env);
    let other = EndpointProcess::start(&world, "endpoint-other", &[&secret], "127.0.0.1:0", &env);
    let run = world
        .client
        .start::<Long>("frozen".to_owned())
        .await
        .unwrap();
    world.wait_for_effect("long-start frozen attempt 1").await;
    // Later deliveries go to the other endpoint (once the dispatcher has read the change);
    // then the first is frozen mid-task, past the claim idle timeout.
    move_endpoint(&world, "long", &other.url).await;
    tokio::time::sleep(ENDPOINTS_READ).await;
    frozen.signal("STOP");
    let stopped = Instant::now();
    let record = wait_for(&run, RunStatus::Completed).await;
    println!(
        "push: an endpoint frozen mid-task; another delivery completed the run {:?} after",
        stopped.elapsed()
    );
    frozen.signal("CONT");
    // Woken, the frozen endpoint finishes its task; its writes are fenced.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = run.record().await.unwrap();
    assert_eq!(after.status, RunStatus::Completed);
    assert_eq!(
        after.revision, record.revision,
        "nothing written after completion"
    );
    let output = run.result().await.unwrap();
    assert!(
        output.contains("by endpoint-other in attempt 2"),
        "{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_run_requeued_is_pushed_again() {
    let world = world_with_a_server().await;
    world
        .client
        .set_config(aiki::ConfigKey::StallMaxAge, 1_000)
        .await
        .unwrap();
    // The endpoint is down while the run waits: deliveries fail, and the run stalls.
    let (listen, url) = free_address();
    let secret = set_endpoint(&world, "five-steps", &url, 10_000).await;
    // The dispatcher follows the endpoint before the run starts (a requeued run must be
    // delivered within the second it may wait before it stalls again).
    tokio::time::sleep(ENDPOINTS_READ).await;
    let run = world
        .client
        .start::<FiveSteps>("stalled".to_owned())
        .await
        .unwrap();
    wait_for(&run, RunStatus::Stalled).await;
    let _endpoint = EndpointProcess::start(&world, "endpoint-up", &[&secret], &listen, &[]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        run.record().await.unwrap().status,
        RunStatus::Stalled,
        "a stalled run is not pushed"
    );
    let requeued = Instant::now();
    run.requeue().await.unwrap();
    wait_for(&run, RunStatus::Completed).await;
    println!(
        "push: a stalled run requeued completed through its endpoint in {:?}",
        requeued.elapsed()
    );
    assert_eq!(world.count_prefix("step stalled/"), 5);
}
