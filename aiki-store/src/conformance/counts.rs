//! Counting runs for metrics and operators.

use super::*;
use crate::RunCounts;

/// `run_counts` counts the `queued` runs of each workflow version, with the oldest one's
/// queue time, and nothing else.
pub async fn check_run_counts(store: &dyn Store) {
    let now = LOCAL_TIME;
    let first = namespace();
    let second = Namespace::new(first.workflow.clone(), "2.0.0");
    for at in [now + 20, now, now + 10] {
        create(store, new_run(&first, RunStatus::Queued, at)).await;
    }
    let mut later = new_run(&first, RunStatus::Scheduled, now - 5);
    later.due_at = Some(now + 60_000);
    create(store, later).await;
    create(store, new_run(&second, RunStatus::Queued, now + 5)).await;
    let claimed = store
        .claim(claim_request(&first, "worker", 1, now + 30))
        .await
        .expect("claim");
    assert_eq!(claimed[0].created_at, now, "the oldest is running now");

    let counts = store.run_counts().await.expect("run_counts");
    let ours: Vec<&RunCounts> = counts
        .iter()
        .filter(|counts| counts.namespace.workflow == first.workflow)
        .collect();
    assert_eq!(
        ours,
        [
            &RunCounts::new(first.clone(), 2, Some(now + 10)),
            &RunCounts::new(second, 1, Some(now + 5)),
        ],
        "queued runs only (not running, not scheduled), by workflow then version"
    );
    let keys: Vec<(&str, &str)> = counts
        .iter()
        .map(|counts| {
            (
                counts.namespace.workflow.as_str(),
                counts.namespace.version.as_str(),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted, "ordered by workflow and version");
}
