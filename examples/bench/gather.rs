//! `--gather`: a parent starting 1,000 child runs (100 with `--quick`) and gathering their
//! outputs, two ways: awaiting every child's `wait()` at once (`run.join_all`), which wakes and
//! replays the parent at each child's end; and `run.join_children`, which suspends once on all
//! of them and wakes once. The children end one by one, 10 ms apart. Printed: parent executions, history rows read by them (each
//! execution reads the whole history once, at most the final one: that bound is printed), and
//! the time from start to the parent's completion.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aiki::{Client, Run, RunStatus, Worker, WorkflowError};
use serde_json::{Value, json};

static EACH_EXECUTIONS: AtomicU64 = AtomicU64::new(0);
static ALL_EXECUTIONS: AtomicU64 = AtomicU64::new(0);

/// Child `i` sleeps 1 s + 10 ms × `i`, so that the children end one by one, mostly after the
/// parent has suspended (as real children do), instead of all before it.
#[aiki::workflow(name = "bench-gather-leaf", version = "1")]
async fn gather_leaf(run: &Run, i: u64) -> Result<u64, WorkflowError> {
    run.sleep("stagger", Duration::from_millis(1_000 + 10 * i))
        .await?;
    Ok(i)
}

async fn start_leaves(
    run: &Run,
    n: u64,
) -> Result<Vec<aiki::ChildRun<'_, GatherLeaf>>, WorkflowError> {
    let mut children = Vec::new();
    for i in 0..n {
        children.push(
            run.child::<GatherLeaf>(i)
                .reference_id(format!("{}-{i}", run.id()))
                .await?,
        );
    }
    Ok(children)
}

#[aiki::workflow(name = "bench-gather-each", version = "1")]
async fn gather_each(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    EACH_EXECUTIONS.fetch_add(1, Ordering::Relaxed);
    let children = start_leaves(run, n).await?;
    let outputs = run
        .join_all(children.iter().map(|child| child.wait()))
        .await?;
    Ok(outputs.into_iter().sum())
}

#[aiki::workflow(name = "bench-gather-all", version = "1")]
async fn gather_all(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    ALL_EXECUTIONS.fetch_add(1, Ordering::Relaxed);
    let children = start_leaves(run, n).await?;
    Ok(run.join_children(&children).await?.into_iter().sum())
}

/// Both ways on the store at `url`.
pub(crate) async fn measure(url: &str, children: u64) -> anyhow::Result<Value> {
    let store = aiki::store::connect(url).await?;
    let worker = Worker::builder(store.clone())
        .register(GatherLeaf)
        .register(GatherEach)
        .register(GatherAll)
        .poll_interval(Duration::from_millis(10))
        .build()?
        .start();
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(10));
    let expected = children * children.saturating_sub(1) / 2;

    let clock = Instant::now();
    let each = client.start::<GatherEach>(children).await?;
    let sum = tokio::time::timeout(Duration::from_secs(1800), each.result()).await??;
    anyhow::ensure!(sum == expected, "join_all summed {sum}, not {expected}");
    let each_ms = clock.elapsed().as_secs_f64() * 1e3;
    let each_rows = history_rows(&*store, each.id()).await?;

    let clock = Instant::now();
    let all = client.start::<GatherAll>(children).await?;
    let sum = tokio::time::timeout(Duration::from_secs(1800), all.result()).await??;
    anyhow::ensure!(
        sum == expected,
        "join_children summed {sum}, not {expected}"
    );
    let all_ms = clock.elapsed().as_secs_f64() * 1e3;
    let all_rows = history_rows(&*store, all.id()).await?;
    worker.shutdown().await;

    let each_executions = EACH_EXECUTIONS.swap(0, Ordering::Relaxed);
    let all_executions = ALL_EXECUTIONS.swap(0, Ordering::Relaxed);
    Ok(json!({
        "children": children,
        "join_all": {
            "parent_executions": each_executions,
            "history_rows": each_rows,
            "rows_read_at_most": each_executions * each_rows,
            "ms": each_ms,
        },
        "join_children": {
            "parent_executions": all_executions,
            "history_rows": all_rows,
            "rows_read_at_most": all_executions * all_rows,
            "ms": all_ms,
        },
    }))
}

/// Rows one history read of the run returns now: the run, its entries, sleeps, events and
/// children.
async fn history_rows(store: &dyn aiki::Store, id: aiki::RunId) -> anyhow::Result<u64> {
    let history = store.load_history(id).await?;
    anyhow::ensure!(history.run.status == RunStatus::Completed);
    let rows = 1
        + history.entries.len()
        + history.sleeps.len()
        + history.events.len()
        + history.children.len();
    Ok(rows as u64)
}

/// One backend's figures, as lines.
pub(crate) fn print(backend: &str, result: &Value) {
    println!(
        "{backend}: gathering {} children",
        result["children"].as_u64().unwrap_or(0)
    );
    for way in ["join_all", "join_children"] {
        let r = &result[way];
        println!(
            "  {way:<14} parent executions {:>5}   history rows read <= {:>9}   {:>8.0} ms",
            r["parent_executions"].as_u64().unwrap_or(0),
            r["rows_read_at_most"].as_u64().unwrap_or(0),
            r["ms"].as_f64().unwrap_or(0.0)
        );
    }
}
