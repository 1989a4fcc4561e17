//! Fan-out / gather with child workflows: a parent run starts one child run per number,
//! waits for all of them, and sums their outputs. The children run concurrently on the worker;
//! the parent suspends (`awaiting_child_workflow`) until they are done and is then replayed,
//! its child starts returning the runs recorded the first time.
//!
//! Run it with `cargo run -p aiki-examples --example fan_out`.

use std::time::{Duration, Instant};

use aiki::{Client, Run, TaskError, Worker, WorkflowError};

/// How many children the parent starts.
const CHILDREN: u64 = 5;

/// The work of one child: a slow square.
#[aiki::task(name = "compute-square")]
async fn compute_square(n: u64) -> Result<u64, TaskError> {
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!("  child task: {n}² = {}", n * n);
    Ok(n * n)
}

/// The child workflow: one task.
#[aiki::workflow(name = "square", version = "1")]
async fn square(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    ComputeSquare.start(run, n).await
}

/// The parent: start every child first (fan out), then wait for each (gather).
#[aiki::workflow(name = "sum-of-squares", version = "1")]
async fn sum_of_squares(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    let mut children = Vec::new();
    for i in 1..=n {
        children.push(run.child::<Square>(i).start().await?);
    }
    let mut total = 0;
    for child in &children {
        total += child.wait().await?;
    }
    Ok(total)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A fresh SQLite database in a folder of its own, removed at the end.
    let dir = std::env::temp_dir().join(format!("aiki-fan-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let store = aiki::connect(&format!("sqlite://{}", dir.join("aiki.db").display())).await?;

    let worker = Worker::builder(store.clone())
        .register(SumOfSquares)
        .register(Square)
        .build()?
        .start();
    let client = Client::new(store);

    let started = Instant::now();
    let parent = client.start::<SumOfSquares>(CHILDREN).await?;
    println!(
        "started parent run {} with {CHILDREN} children",
        parent.id()
    );

    // Show the parent's status changes while it works.
    let mut last = None;
    loop {
        let status = parent.status().await?;
        if last != Some(status) {
            println!("  parent is {status} ({:?})", started.elapsed());
            last = Some(status);
        }
        if status.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let total = parent.result().await?;
    println!(
        "sum of squares 1..={CHILDREN} = {total} in {:?}",
        started.elapsed()
    );
    anyhow::ensure!(total == (1..=CHILDREN).map(|i| i * i).sum::<u64>());

    worker.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
