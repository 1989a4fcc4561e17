//! `my-app aiki check -o table`: runs that would do the same at the same call site are one
//! line with their count, not one identical line per run; `-o json` still lists every run.
//!
//! This file is the test and the app it runs: started with `aiki` as its first argument, it
//! is a service's binary with its next build compiled in (`aiki_cli::App::registry`), as a
//! real process; started otherwise (by `cargo test`), it makes runs under the build deployed
//! now and runs itself as that app against them.

#![allow(missing_docs)]

use std::process::{Command, ExitCode};
use std::time::Duration;

use aiki::{Client, Run, RunStatus, TaskError, Worker, WorkflowError};
use aiki_tests::Backend;
use serde_json::Value;

#[aiki::task(name = "chk-step")]
async fn chk_step(n: u32) -> Result<u32, TaskError> {
    Ok(n + 1)
}

#[aiki::task(name = "chk-audit")]
async fn chk_audit(n: u32) -> Result<u32, TaskError> {
    Ok(n)
}

const NAP: Duration = Duration::from_secs(3 * 3600);

/// Deployed: a step, then a nap.
#[aiki::workflow(name = "chk-flow", version = "1")]
async fn flow_deployed(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    let m = ChkStep.start(run, n).await?;
    run.sleep("nap", NAP).await?;
    Ok(m)
}

/// Next: an audit before the step, which every run's record diverges at.
#[aiki::workflow(name = "chk-flow", version = "1")]
async fn flow_next(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    ChkAudit.start(run, n).await?;
    let m = ChkStep.start(run, n).await?;
    run.sleep("nap", NAP).await?;
    Ok(m)
}

/// Deployed: a nap, then a step.
#[aiki::workflow(name = "chk-tail", version = "1")]
async fn tail_deployed(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    run.sleep("nap", NAP).await?;
    ChkStep.start(run, n).await
}

/// Next: an audit after the step, new work for every run.
#[aiki::workflow(name = "chk-tail", version = "1")]
async fn tail_next(run: &Run, n: u32) -> Result<u32, WorkflowError> {
    run.sleep("nap", NAP).await?;
    let m = ChkStep.start(run, n).await?;
    ChkAudit.start(run, m).await
}

const NAME: &str = "the_check_table_groups_runs_by_verdict_and_call_site";

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == "aiki") {
        let registry = aiki::Registry::builder()
            .register(FlowNext)
            .register(TailNext)
            .build()
            .expect("the registry");
        let app = aiki_cli::App::new().registry(registry);
        return app.main(args.into_iter().skip(1));
    }
    // As libtest would: `--list` names the test, `--ignored` runs none (it is not ignored),
    // and `cargo test FILTER` hands the filter over: run only when it names this test.
    if args.iter().any(|arg| arg == "--list") {
        println!("{NAME}: test");
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|arg| arg == "--ignored") {
        println!("test result: ok. 0 passed; 0 failed; 1 filtered out");
        return ExitCode::SUCCESS;
    }
    let filters: Vec<String> = args
        .iter()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|filter| NAME.contains(filter.as_str())) {
        println!("test result: ok. 0 passed; 0 failed; 1 filtered out");
        return ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut passed = 0;
    runtime.block_on(async {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            if backend == Backend::Postgres && !aiki_tests::postgres_available().await {
                continue;
            }
            aiki_tests::bounded(the_check_table_groups_runs(backend)).await;
            println!("test {NAME}::{backend:?} ... ok");
            passed += 1;
        }
    });
    println!("test result: ok. {passed} passed; 0 failed");
    ExitCode::SUCCESS
}

/// `my-app aiki ARGS`: this binary as the app.
fn app(url: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(std::env::current_exe().unwrap())
        .arg("aiki")
        .args(args)
        .env("AIKI_URL", url)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stdout, stderr)
}

async fn the_check_table_groups_runs(backend: Backend) {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.unwrap();
    let worker = Worker::builder(store.clone())
        .register(FlowDeployed)
        .register(TailDeployed)
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let client = Client::new(store).with_poll_interval(Duration::from_millis(5));
    let mut runs = Vec::new();
    for n in 0..6 {
        runs.push(client.start::<FlowDeployed>(n).await.unwrap().id());
    }
    for n in 0..3 {
        runs.push(client.start::<TailDeployed>(n).await.unwrap().id());
    }
    for id in &runs {
        let run = *id;
        let any = client.any_run(run);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while any.record().await.unwrap().status != RunStatus::Sleeping {
            assert!(tokio::time::Instant::now() < deadline, "run {run}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    worker.shutdown().await;

    let (code, table, stderr) = app(&url, &["check", "-o", "table"]);
    assert_eq!(code, Some(6), "the diverging runs fail the gate: {stderr}");
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|line| !line.starts_with("RUNS"))
        .skip(1)
        .take_while(|line| !line.is_empty())
        .collect();
    assert_eq!(rows.len(), 2, "one line per verdict and call site: {table}");
    assert!(
        rows[0].starts_with("6 ")
            && rows[0].contains("chk-flow@1")
            && rows[0].contains("FAILS")
            && rows[0].contains("diverges: new call `chk-audit` at ")
            && rows[0].contains("check_app.rs:")
            && rows[0].contains("while recorded chk-step unconsumed")
            && rows[0].contains(" and 5 more"),
        "{table}"
    );
    assert!(
        rows[1].starts_with("3 ")
            && rows[1].contains("chk-tail@1")
            && rows[1].contains(" ok ")
            && rows[1].contains("then task `chk-step` after sleep `nap` ends at ")
            && rows[1].contains(" and 2 more"),
        "{table}"
    );
    let (code, json, _) = app(&url, &["check", "-o", "json"]);
    assert_eq!(code, Some(6));
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        report["runs"].as_array().map(Vec::len),
        Some(9),
        "JSON stays per run: {report}"
    );
}
