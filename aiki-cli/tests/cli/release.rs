//! `aiki runs release`: a running run whose worker is gone, as `runs show` and `workers` see
//! it, refused until its claim is confirmed stale, released with `--force`; and a pause asked
//! of a running run.

use std::time::Duration;

use aiki::{Client, NoInput, RunStatus, Worker};
use aiki_tests::Backend;

use crate::scenes::{CliStuck, PATIENCE};
use crate::support::{aiki, aiki_with};

async fn a_run_held_by_a_gone_worker_is_released(backend: Backend) {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.unwrap();
    Client::new(store.clone())
        .set_config(aiki::ConfigKey::ClaimIdleTimeout, 120_000)
        .await
        .unwrap();
    let worker = Worker::builder(store.clone())
        .register(CliStuck)
        .worker_id("worker-stuck")
        .claim_refresh_interval(Duration::from_millis(200))
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let run = client.start::<CliStuck>(NoInput).await.unwrap();
    run.wait_for_status_timeout(RunStatus::Running, PATIENCE)
        .await
        .unwrap();
    let id = run.id().to_string();
    let show = || {
        let shown = aiki(&url, &["runs", "show", &id, "-o", "table"]);
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        println!("{}", shown.stdout);
        shown.stdout
    };

    // A pause of a running run is a request: its tasks in flight finish first.
    let paused = aiki_with(
        &url,
        &["runs", "pause", &id, "-o", "table"],
        &[("AIKI_ACTOR", "ops@desk")],
    );
    assert!(
        paused.stdout.contains("pause requested"),
        "{}",
        paused.stdout
    );
    let live = show();
    assert!(live.contains("running on worker-stuck"), "{live}");
    assert!(live.contains("pause requested by ops@desk at 20"), "{live}");

    // The worker dies: after two missed beats (and a margin) it is gone.
    worker.abort().await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let workers = aiki(&url, &["workers", "-o", "json"]).json();
        if workers[0]["liveness"]["state"] == "gone" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{workers}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let workers = aiki(&url, &["workers", "-o", "table"]);
    assert!(workers.stdout.contains("gone since "), "{}", workers.stdout);
    assert!(
        workers.stdout.contains("refresh 200 ms, idle 2 min"),
        "{}",
        workers.stdout
    );
    let gone = show();
    assert!(gone.contains("held by worker-stuck, gone since "), "{gone}");
    assert!(gone.contains("; released at the latest in 1 min"), "{gone}");
    assert!(gone.contains("pause requested by ops@desk"), "{gone}");

    // Not confirmed stale: refused in one line, exit 1.
    let refused = aiki(&url, &["runs", "release", &id]);
    let line = refused.failed(1);
    assert!(
        line.contains("held by `worker-stuck`") && line.contains("--force"),
        "{line}"
    );
    assert_eq!(run.record().await.unwrap().status, RunStatus::Running);
    // Forced: released, to `paused` since a pause was asked for; who did it is recorded.
    let released = aiki(
        &url,
        &[
            "runs", "release", &id, "--force", "--actor", "ops@desk", "-o", "json",
        ],
    )
    .json();
    assert_eq!(released["status"], "paused", "{released}");
    let shown = aiki(&url, &["runs", "show", &id, "-o", "json"]).json();
    let last = shown["timeline"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["to"].as_str(), last["actor"].as_str()),
        (Some("paused"), Some("ops@desk")),
        "{last}"
    );
    // A run that is not running: refused.
    let again = aiki(&url, &["runs", "release", &id, "--force"]);
    assert!(
        again.failed(1).contains("cannot release"),
        "{}",
        again.stderr
    );

    // Bad input: one line, exit 2.
    let malformed = aiki(&url, &["runs", "release", "not-a-run"]);
    assert!(malformed.failed(2).contains("is not a run id"));
    let valued = aiki(&url, &["runs", "release", &id, "--force=yes"]);
    valued.failed(2);
    let missing = aiki(&url, &["runs", "release"]);
    assert!(missing.failed(2).contains("required"), "{}", missing.stderr);
}

aiki_tests::on_sql_backends!(a_run_held_by_a_gone_worker_is_released);
