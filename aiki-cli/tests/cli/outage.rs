//! Exit codes a script can use: a store that does not answer has its own (7), `runs result`
//! rides out an outage up to its timeout, and a reader that goes away (`| head -1`) ends the
//! command quietly.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use aiki_tests::Backend;
use aiki_tests::proxy::FaultProxy;

use crate::support::{Output, aiki, command, fixture};

/// `aiki ARGS` on a thread of its own: the proxy runs on this test's runtime meanwhile.
async fn aiki_apart(url: &str, args: &[&str]) -> Output {
    let url = url.to_owned();
    let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        aiki(&url, &args)
    })
    .await
    .unwrap()
}

/// Through a fault proxy in front of the shared PostgreSQL server (never stopped itself).
async fn a_store_that_does_not_answer_has_its_own_exit_code() {
    let f = fixture(Backend::Postgres).await;
    let proxy = FaultProxy::start(aiki_tests::proxy::postgres_server())
        .await
        .expect("the proxy starts");
    let proxied = proxy.url_through(&f.url);
    let done = f.done.to_string();
    let answered = aiki_apart(&proxied, &["runs", "result", &done, "--timeout", "10s"]).await;
    assert_eq!(
        (answered.code, answered.stdout.trim()),
        (0, "2"),
        "{}",
        answered.stderr
    );

    proxy.cut();
    let down = aiki_apart(&proxied, &["runs", "list"]).await;
    assert!(down.failed(7).contains("unavailable"), "{}", down.stderr);
    // `runs result` waits the outage out up to its timeout, then says the store never
    // answered: exit 7, not 1 (failed) nor 5 (still running).
    let started = Instant::now();
    let waited = aiki_apart(&proxied, &["runs", "result", &done, "--timeout", "2s"]).await;
    let line = waited.failed(7);
    assert!(started.elapsed() >= Duration::from_secs(2), "{line}");
    assert!(line.contains("did not answer within 2s"), "{line}");
    // The store comes back within the timeout: the output, exit 0.
    let waiting = {
        let proxied = proxied.clone();
        let done = done.clone();
        tokio::task::spawn_blocking(move || {
            aiki(
                &proxied,
                &["runs", "result", &done, "--timeout", "60s", "-o", "json"],
            )
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    proxy.restore();
    let output = waiting.await.unwrap();
    assert_eq!(
        (output.code, output.stdout.trim()),
        (0, "2"),
        "{}",
        output.stderr
    );
    // A run that has not ended when the timeout passes, with the store up: exit 5.
    let queued = f.queued.to_string();
    let pending = aiki_apart(&proxied, &["runs", "result", &queued, "--timeout", "1s"]).await;
    assert!(
        pending.failed(5).contains("still `queued`"),
        "{}",
        pending.stderr
    );
}

async fn a_reader_that_goes_away_ends_the_command_quietly(backend: Backend) {
    let f = fixture(backend).await;
    // The reader is gone before the first line is written.
    for format in ["table", "json", "jsonl"] {
        let mut child = command(&f.url)
            .args(["runs", "list", "-o", format])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{format}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{format}");
    }
    // `aiki runs show ID | head -1`: the reader goes after the first line.
    let mut child = command(&f.url)
        .args(["runs", "show", &f.sleeping.to_string(), "-o", "table"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("run "), "{first}");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    // Through a shell, as people type it.
    let aiki = env!("CARGO_BIN_EXE_aiki");
    let piped = std::process::Command::new("bash")
        .args([
            "-c",
            &format!("set -o pipefail; '{aiki}' runs list -o table | head -1"),
        ])
        .env("AIKI_URL", &f.url)
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    assert_eq!(String::from_utf8_lossy(&piped.stderr), "");
    assert!(String::from_utf8_lossy(&piped.stdout).starts_with("ID"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_store_that_does_not_answer_has_its_own_exit_code() {
    if aiki_tests::postgres_available().await {
        aiki_tests::bounded(a_store_that_does_not_answer_has_its_own_exit_code()).await
    }
}

aiki_tests::on_sql_backends!(a_reader_that_goes_away_ends_the_command_quietly);
