//! A worker in an application that installs no `tracing` subscriber still says on stderr what
//! keeps it from claiming: a server it cannot reach, a key the server refuses. Once at first,
//! then at most once a minute, however often its claims fail.

use std::process::Stdio;
use std::time::Duration;

use aiki_tests::Backend;

use super::SERIAL;
use super::world::{World, free_address};

/// Runs a worker process on `url` with `key` for a few seconds; what it said on stderr.
fn stderr_of_a_worker(world: &World, url: &str, key: &str) -> String {
    let mut command = world.worker_command("unheard", Duration::from_millis(200), &[]);
    command
        .env("AIKI_WORKER_STORE_URL", url)
        .env("AIKI_API_KEY", key)
        .env("AIKI_SET_CONFIG", "0")
        .env_remove("AIKI_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("the worker starts");
    // Claims fail again and again meanwhile (back-off up to 5 s).
    std::thread::sleep(Duration::from_secs(8));
    child.kill().expect("kill");
    let output = child.wait_with_output().expect("its output");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(super) async fn a_worker_without_a_subscriber_says_why_it_cannot_claim(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let world = World::through_a_server_process(backend).await;
    let server = world.server.as_ref().unwrap();
    let unknown_key = format!("aiki_000000000000_{}", "0".repeat(64));
    let refused = stderr_of_a_worker(&world, &server.url, &unknown_key);
    let said: Vec<&str> = refused
        .lines()
        .filter(|line| line.starts_with("aiki:"))
        .collect();
    assert_eq!(
        said.len(),
        1,
        "said once, not at every failed claim: {refused}"
    );
    assert!(
        said[0].contains("refuses this worker's API key"),
        "{refused}"
    );
    let (_, nobody) = free_address();
    let down = stderr_of_a_worker(&world, &nobody, &server.key);
    let said: Vec<&str> = down
        .lines()
        .filter(|line| line.starts_with("aiki:"))
        .collect();
    assert_eq!(said.len(), 1, "said once: {down}");
    assert!(said[0].contains("cannot reach its store"), "{down}");
    assert!(said[0].contains(&nobody), "names the server: {down}");
    println!(
        "[{backend:?}] a worker without a subscriber said: {}",
        said[0]
    );
}
