//! Counting and listing runs, for metrics and operators.

use super::*;
use crate::{ListRuns, RunCounts, RunFilter, TimeRange};

/// `run_counts` counts the runs of each workflow version by status, with the oldest queued
/// one's queue time.
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
        .expect("claim")
        .runs;
    assert_eq!(claimed[0].created_at, now, "the oldest is running now");

    let counts = store.run_counts().await.expect("run_counts");
    let ours: Vec<&RunCounts> = counts
        .iter()
        .filter(|counts| counts.namespace.workflow == first.workflow)
        .collect();
    assert_eq!(
        ours,
        [
            &RunCounts::new(first.clone())
                .add(RunStatus::Queued, 2)
                .add(RunStatus::Running, 1)
                .add(RunStatus::Scheduled, 1)
                .oldest_queued_at(Some(now + 10)),
            &RunCounts::new(second)
                .add(RunStatus::Queued, 1)
                .oldest_queued_at(Some(now + 5)),
        ],
        "every status that has runs, in status order; the oldest of the queued ones"
    );
    assert_eq!(ours[0].queued(), 2);
    assert_eq!(ours[0].count(RunStatus::Failed), 0);
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

/// Seeds runs of a fresh workflow for the listing checks: `(created_at, pool, status,
/// reference id)`, several created at the same millisecond.
async fn listing_fixture(store: &dyn Store) -> (Namespace, Vec<RunRecord>) {
    let namespace = namespace();
    let mut runs = Vec::new();
    for (i, at) in [0, 10, 10, 10, 20, 30, 30, 40, 50].into_iter().enumerate() {
        let mut new = new_run(&namespace, RunStatus::Queued, LOCAL_TIME + at);
        if i % 3 == 0 {
            new.pool = "gpu".to_owned();
        }
        new.reference_id = Some(format!("ref-{i}-{}", RunId::new()));
        runs.push(create(store, new).await);
    }
    (namespace, runs)
}

/// Every page of `filter` in turn, `limit` at a time.
async fn all_pages(store: &dyn Store, filter: RunFilter, limit: u32) -> Vec<Vec<RunRecord>> {
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_runs(ListRuns::new(filter.clone(), limit).after(after))
            .await
            .expect("list_runs");
        assert!(page.runs.len() <= limit as usize);
        after = page.next;
        pages.push(page.runs);
        if after.is_none() {
            return pages;
        }
    }
}

/// `list_runs` lists newest first (creation time, then id), pages by cursor without repeating
/// or skipping a run, even among runs created in the same millisecond or created while paging.
pub async fn check_list_runs_pages_newest_first(store: &dyn Store) {
    let (namespace, runs) = listing_fixture(store).await;
    let filter = RunFilter::default()
        .workflow(namespace.workflow.clone())
        .version(namespace.version.clone());
    let mut expected = runs.clone();
    expected.sort_by_key(|run| std::cmp::Reverse((run.created_at, run.id)));
    for limit in [1, 2, 4, 9, 50] {
        let pages = all_pages(store, filter.clone(), limit).await;
        let listed: Vec<RunRecord> = pages.concat();
        assert_eq!(listed, expected, "limit {limit}");
        let full = pages
            .iter()
            .filter(|page| page.len() == limit as usize)
            .count();
        assert!(full >= pages.len() - 1, "only the last page may be short");
    }
    // A run created while paging, newer than the cursor, does not shift the later pages.
    let first = store
        .list_runs(ListRuns::new(filter.clone(), 4))
        .await
        .expect("list_runs");
    create(
        store,
        new_run(&namespace, RunStatus::Queued, LOCAL_TIME + 60),
    )
    .await;
    let mut resumed = first.runs.clone();
    let mut after = first.next;
    while let Some(cursor) = after {
        let page = store
            .list_runs(ListRuns::new(filter.clone(), 4).after(Some(cursor)))
            .await
            .expect("list_runs");
        resumed.extend(page.runs);
        after = page.next;
    }
    assert_eq!(resumed, expected, "nothing repeated or skipped");
    let empty = store
        .list_runs(ListRuns::new(filter, 0))
        .await
        .expect("list_runs");
    assert_eq!((empty.runs.len(), empty.next), (0, None));
}

/// Each filter of `list_runs` keeps exactly the runs it names.
pub async fn check_list_runs_filters(store: &dyn Store) {
    let (namespace, mut runs) = listing_fixture(store).await;
    // Give them different statuses, an error, and a child.
    let claimed = store
        .claim(ClaimRequest::new(
            "worker",
            vec![namespace.clone()],
            "default",
            3,
            LOCAL_TIME + 100,
        ))
        .await
        .expect("claim")
        .runs;
    let failed = store
        .transition(
            claimed[0].id,
            claimed[0].revision,
            Transition::to(RunStatus::Failed, LOCAL_TIME + 200).error(
                Failure::new("task_failed", "broken").call(crate::CallRef::new("ship:ef01", 0)),
            ),
        )
        .await
        .expect("fail");
    store
        .transition(
            claimed[1].id,
            claimed[1].revision,
            Transition::to(RunStatus::Failed, LOCAL_TIME + 200).error(
                Failure::new("task_failed", "card declined: HTTP 424 from the gateway")
                    .call(crate::CallRef::new("charge-card:ab12", 0)),
            ),
        )
        .await
        .expect("fail");
    let mut child = new_run(&namespace, RunStatus::Queued, LOCAL_TIME + 5);
    child.parent = Some(ParentLink::new(runs[0].id, "child:1:abc"));
    let child = create(store, child).await;
    for run in &mut runs {
        *run = store.get_run(run.id).await.expect("get_run");
    }
    runs.push(child.clone());
    let ours = RunFilter::default()
        .workflow(namespace.workflow.clone())
        .version(namespace.version.clone());
    let cases = [
        ours.clone().status(RunStatus::Running),
        ours.clone()
            .status(RunStatus::Running)
            .status(RunStatus::Failed),
        ours.clone().pool("gpu"),
        ours.clone().error_kind("task_failed"),
        ours.clone().failed_task("charge-card"),
        ours.clone().failed_task("ship"),
        ours.clone().error_contains("HTTP 424"),
        ours.clone()
            .error_kind("task_failed")
            .error_contains("broken"),
        RunFilter::default().reference_id(runs[4].reference_id.clone().expect("set")),
        RunFilter::default().parent(runs[0].id),
        ours.clone().created(TimeRange {
            from: Some(LOCAL_TIME + 10),
            until: Some(LOCAL_TIME + 30),
        }),
        ours.clone().updated(TimeRange {
            from: Some(LOCAL_TIME + 200),
            until: None,
        }),
        ours.clone().status(RunStatus::Queued).pool("gpu"),
    ];
    for filter in cases {
        let mut expected: Vec<&RunRecord> = runs.iter().filter(|run| filter.matches(run)).collect();
        expected.sort_by_key(|run| std::cmp::Reverse((run.created_at, run.id)));
        assert!(!expected.is_empty(), "the fixture has a run for {filter:?}");
        let listed = all_pages(store, filter.clone(), 3).await.concat();
        let listed: Vec<&RunRecord> = listed.iter().collect();
        assert_eq!(listed, expected, "{filter:?}");
    }
    assert_eq!(
        failed.error.map(|error| error.kind),
        Some("task_failed".into())
    );
    for none in [
        ours.clone().failed_task("charge"),
        ours.clone().failed_task("card"),
        ours.clone().error_contains("http 424"),
    ] {
        let page = store
            .list_runs(ListRuns::new(none.clone(), 10))
            .await
            .expect("list_runs");
        assert!(page.runs.is_empty(), "{none:?}: {page:?}");
    }
    let nobody = RunFilter::default().workflow(format!("nobody-{}", RunId::new()));
    let page = store
        .list_runs(ListRuns::new(nobody, 10))
        .await
        .expect("list_runs");
    assert!(page.runs.is_empty() && page.next.is_none());
}
