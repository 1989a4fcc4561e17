//! `--idle-fleet`: what idle workers cost the database. Eight worker processes (two with
//! `--quick`) with the default settings and nothing to do, for 60 s (3 s with `--quick`) after
//! a warm-up of half that (their pool connections preparing their statements); each
//! counts the statements it sends through its executor role (claim polls, heartbeats) and
//! through its sweeper role (the daemons' lease and sweeps) apart, on two stores of its own, and
//! reports them when it stops. Only the holder of the daemons' lease sweeps; the others only ask
//! for the lease now and then. On PostgreSQL the workers hear ready hints (`NOTIFY`) and poll
//! every 5 s as the safety net; the database's own count of transactions committed
//! (`pg_stat_database`, the whole database, this bench's two reads taken off) is shown beside
//! the processes' counts, with the database's background (autovacuum, other sessions) counted
//! first over half the window with no worker running.

use std::time::{Duration, Instant};

use aiki::store::{ExecutorStore, Sweeper};
use aiki::{Worker, WorkerStore};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// `--idle-worker <url>`: an idle worker with the default settings; prints its executor's and
/// its sweeper's statement counts, as one JSON line, when stdin closes.
pub(crate) async fn worker_process(url: String) -> anyhow::Result<()> {
    let (executor, executed) = super::counted_store(&url).await?;
    let (sweeper, swept) = super::counted_store(&url).await?;
    let executor: std::sync::Arc<dyn ExecutorStore> = executor;
    let sweeper: std::sync::Arc<dyn Sweeper> = sweeper;
    let worker = Worker::builder(WorkerStore::executor(executor).with_sweeper(sweeper))
        .register(super::Chain)
        .build()?
        .start();
    println!("ready");
    // Counted from the bench's `go` line on: starting up (opening the stores, migrating, each
    // pool connection preparing its statements) is not idle work.
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut go = String::new();
    stdin.read_line(&mut go).await?;
    let (executed_before, swept_before) = (executed(), swept());
    let mut sink = Vec::new();
    let _ = stdin.read_to_end(&mut sink).await;
    let counts = json!({
        "executor": executed() - executed_before,
        "sweeper": swept() - swept_before,
    });
    worker.shutdown().await;
    println!("{counts}");
    Ok(())
}

pub(crate) async fn measure(url: &str, processes: usize, seconds: u64) -> anyhow::Result<Value> {
    // The schema first, so that the processes do not all migrate at once.
    drop(aiki::store::connect(url).await?);
    // The database's own background (autovacuum, other sessions) over half the window, with
    // no worker running: what its commit count holds that the fleet did not send.
    let quiet = Duration::from_secs(seconds.div_ceil(2));
    let background = match database_commits(url).await? {
        Some(before) => {
            tokio::time::sleep(quiet).await;
            database_commits(url)
                .await?
                .map(|after| (after - before - 2).max(0) as f64 / quiet.as_secs_f64())
        }
        None => None,
    };
    let mut fleet = Vec::new();
    for _ in 0..processes {
        fleet.push(super::WorkerProcess::start_with(&["--idle-worker", url], false).await?);
    }
    // A warm-up of half the window: each worker's pool connections prepare their statements
    // the first time they run them (a commit each on PostgreSQL), which an idle fleet does once.
    tokio::time::sleep(quiet).await;
    for process in &mut fleet {
        if let Some(stdin) = process.child.stdin.as_mut() {
            stdin.write_all(b"go\n").await?;
            stdin.flush().await?;
        }
    }
    let commits_before = database_commits(url).await?;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let commits = match (commits_before, database_commits(url).await?) {
        // This bench's own two reads are transactions too.
        (Some(before), Some(after)) => Some((after - before - 2).max(0) as f64),
        _ => None,
    };
    let mut executor = Vec::new();
    let mut sweeper = Vec::new();
    for mut process in fleet {
        drop(process.child.stdin.take());
        let line = tokio::time::timeout(Duration::from_secs(30), process.lines.next_line())
            .await
            .map_err(|_| anyhow::anyhow!("an idle worker did not report within 30 s"))??
            .ok_or_else(|| anyhow::anyhow!("an idle worker stopped without reporting"))?;
        let counts: Value = serde_json::from_str(&line)?;
        process.stop().await;
        executor.push(counts["executor"].as_f64().unwrap_or(f64::NAN));
        sweeper.push(counts["sweeper"].as_f64().unwrap_or(f64::NAN));
    }
    let window = started.elapsed().as_secs_f64();
    let per_s = |counts: &[f64]| counts.iter().sum::<f64>() / window;
    let leader = sweeper.iter().copied().fold(0.0, f64::max);
    let followers = sweeper.iter().sum::<f64>() - leader;
    Ok(json!({
        "processes": processes,
        "seconds": window,
        "database_commits_per_s": commits.map(|commits| commits / window),
        "database_background_commits_per_s": background,
        "statements_per_s": per_s(&executor) + per_s(&sweeper),
        "executor_statements_per_s": per_s(&executor),
        "sweeper_statements_per_s": per_s(&sweeper),
        "leader_sweeper_statements_per_s": leader / window,
        "followers_sweeper_statements_per_s": followers / window,
        "processes_with_sweeper_statements": sweeper.iter().filter(|&&n| n > 0.0).count(),
    }))
}

/// PostgreSQL's count of the transactions committed in the bench's database so far (`None`
/// on SQLite). Each backend reports its counts at most every second (an idle one within 10 s):
/// over a 60 s window, a small error.
async fn database_commits(url: &str) -> anyhow::Result<Option<i64>> {
    use sqlx::Connection;
    if !url.starts_with("postgres") {
        return Ok(None);
    }
    let mut admin = sqlx::PgConnection::connect(&super::postgres_url()).await?;
    let commits: i64 = sqlx::query_scalar(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut admin)
    .await?;
    let _ = admin.close().await;
    Ok(Some(commits))
}

pub(crate) fn print(backend: &str, result: &Value) {
    let f = |key: &str| result[key].as_f64().unwrap_or(f64::NAN);
    println!(
        "  {backend:<8} idle fleet, {} worker processes, {:.0} s: {:.0} statements/s \
         (executor: claim polls and heartbeats {:.0}/s; sweeper {:.1}/s, of which the lease \
         holder's sweeps and renewals {:.1}/s and the others' lease asks {:.1}/s){}",
        result["processes"],
        f("seconds"),
        f("statements_per_s"),
        f("executor_statements_per_s"),
        f("sweeper_statements_per_s"),
        f("leader_sweeper_statements_per_s"),
        f("followers_sweeper_statements_per_s"),
        match (
            result["database_commits_per_s"].as_f64(),
            result["database_background_commits_per_s"].as_f64(),
        ) {
            (Some(commits), Some(background)) => format!(
                "; the database counted {commits:.1} commits/s, {background:.1}/s of them its \
                 background (counted with no worker running)"
            ),
            (Some(commits), None) => format!("; the database counted {commits:.1} commits/s"),
            _ => String::new(),
        },
    );
}
