//! A server's memory after 400 listings: reads are never kept as repeats' answers, so a read
//! key that lists the same 1,000 runs 400 times (each request with an idempotency key of its
//! own, as the previous release sent its `POST` reads) leaves the server's memory where it
//! was, where it once grew by every answer for ten minutes.

use std::time::Duration;

use aiki::store::{ListRuns, RunFilter};
use aiki_tests::Backend;
use aiki_tests::crash::FiveSteps;

use super::SERIAL;
use super::world::{Serving, World};

const RUNS: usize = 1_000;
const LISTINGS: usize = 400;

/// The resident memory of process `pid`, in MiB.
fn resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS");
    kib / 1024.0
}

pub(super) async fn listings_leave_a_servers_memory_as_it_was(backend: Backend) {
    let _serial = SERIAL.lock().await;
    let world = World::through_a_server_process(backend).await;
    let server = world.server.as_ref().unwrap();
    let Serving::Process(child) = &server.runs else {
        panic!("a server process");
    };
    let pid = child.id();
    let padding = "x".repeat(1_000);
    for i in 0..RUNS {
        world
            .client
            .start::<FiveSteps>(format!("{i}-{padding}"))
            .await
            .unwrap();
    }
    let listing = serde_json::to_value(ListRuns::new(RunFilter::default(), 1_000)).unwrap();
    let http = reqwest::Client::new();
    let list = |form: &'static str, n: usize| {
        let request = match form {
            "POST" => http
                .post(format!("{}/api/v1/runs/list", server.url))
                .json(&listing),
            _ => http.get(format!("{}/api/v1/runs/list?limit=1000", server.url)),
        };
        request.bearer_auth(&server.key).header(
            aiki::store::api::IDEMPOTENCY_KEY,
            format!("listing-{form}-{n}"),
        )
    };
    let first = list("GET", 0).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let bytes = first.bytes().await.unwrap().len();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = resident_mib(pid);
    // The `GET` form never went through the repeats' cache: a few, as a control.
    for (form, count) in [("POST", LISTINGS), ("GET", 50)] {
        for n in 0..count {
            let answer = list(form, n).send().await.unwrap();
            assert_eq!(answer.status(), 200, "{form} #{n}");
            assert_eq!(answer.bytes().await.unwrap().len(), bytes, "{form} #{n}");
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = resident_mib(pid);
    println!(
        "[{backend:?}] a server's resident memory before and after {LISTINGS} listings as POST \
         and 50 as GET of {RUNS} runs ({} KiB each), every one with its own \
         idempotency key: {before:.0} MiB, then {after:.0} MiB",
        bytes / 1024
    );
    assert!(
        after - before < 64.0,
        "the listings stayed in memory: {before:.0} MiB, then {after:.0} MiB"
    );
}
