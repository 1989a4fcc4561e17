//! The change stream: every status change once, in order, from any cursor.

use super::*;

/// Reads the stream from `cursor` to its end, `limit` at a time; the changes of `runs` only
/// (other checks share the store), and the cursor at the end.
pub(super) async fn read_stream(
    store: &dyn Store,
    mut cursor: crate::ChangeCursor,
    limit: u32,
    runs: &HashSet<RunId>,
) -> (Vec<crate::Change>, crate::ChangeCursor) {
    let mut seen = Vec::new();
    for _ in 0..100_000 {
        let page = store
            .changes_since(&cursor, limit)
            .await
            .expect("changes_since");
        let done = page.changes.is_empty();
        seen.extend(
            page.changes
                .into_iter()
                .filter(|change| runs.contains(&change.run_id)),
        );
        cursor = page.next;
        if done {
            return (seen, cursor);
        }
    }
    panic!("the stream never ended");
}

/// A reader from the end of the stream sees each later change exactly once, with its run's
/// version and pool, its revision and statuses, in order, whatever its page size; a cursor
/// taken at the end sees nothing older; a cursor the store did not hand out is refused.
pub async fn check_changes_since_gives_every_change_once(store: &dyn Store) {
    let now = LOCAL_TIME;
    let start = store
        .changes_since(&crate::ChangeCursor::start(), 0)
        .await
        .expect("the end of the stream")
        .next;
    let namespace = namespace();
    let first = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let claimed = store
        .claim(claim_request(&namespace, "worker", 1, now + 1))
        .await
        .expect("claim")
        .runs
        .remove(0);
    store
        .transition(
            claimed.id,
            claimed.revision,
            Transition::to(RunStatus::Completed, now + 2).output(json!(1), "fp"),
        )
        .await
        .expect("complete");
    let mut second = new_run(&namespace, RunStatus::Scheduled, now + 3);
    second.pool = "gpu".to_owned();
    second.due_at = Some(now + 100);
    let second = create(store, second).await;
    let runs: HashSet<RunId> = [first.id, second.id].into();
    for limit in [1, 2, 1000] {
        let (seen, _) = read_stream(store, start.clone(), limit, &runs).await;
        let got: Vec<(RunId, u64, Option<RunStatus>, RunStatus)> = seen
            .iter()
            .map(|change| (change.run_id, change.revision, change.from, change.to))
            .collect();
        assert_eq!(
            got,
            [
                (first.id, 1, None, RunStatus::Queued),
                (first.id, 2, Some(RunStatus::Queued), RunStatus::Running),
                (first.id, 3, Some(RunStatus::Running), RunStatus::Completed),
                (second.id, 1, None, RunStatus::Scheduled),
            ],
            "page size {limit}"
        );
        assert!(seen.windows(2).all(|pair| pair[0].seq < pair[1].seq));
        assert_eq!(seen[3].pool, "gpu");
        assert_eq!(seen[0].namespace, namespace);
        assert_eq!(seen[2].at, now + 2);
    }
    let end = store
        .changes_since(&crate::ChangeCursor::start(), 0)
        .await
        .expect("the end")
        .next;
    let (later, _) = read_stream(store, end, 10, &runs).await;
    assert!(
        later.is_empty(),
        "a cursor at the end sees nothing older: {later:?}"
    );
    for bad in ["not a cursor", "1/2/3/4"] {
        assert!(
            matches!(
                store
                    .changes_since(&crate::ChangeCursor::new(bad), 10)
                    .await,
                Err(StoreError::Invalid { .. })
            ),
            "{bad}"
        );
    }
}

/// Writers changing statuses at once while a reader follows the stream: once they are done,
/// the reader has seen every change of theirs exactly once.
pub async fn check_changes_since_under_concurrent_writers(store: &dyn Store) {
    let now = LOCAL_TIME;
    let start = store
        .changes_since(&crate::ChangeCursor::start(), 0)
        .await
        .expect("the end of the stream")
        .next;
    let namespace = namespace();
    let mut runs = Vec::new();
    for _ in 0..8 {
        runs.push(create(store, new_run(&namespace, RunStatus::Scheduled, now)).await);
    }
    let ids: HashSet<RunId> = runs.iter().map(|run| run.id).collect();
    let writers: Vec<_> = runs
        .iter()
        .map(|run| async move {
            // Pause and resume, five times over: ten changes a run.
            let mut revision = run.revision;
            for i in 0..5 {
                let paused = store
                    .transition(run.id, revision, Transition::to(RunStatus::Paused, now + i))
                    .await
                    .expect("pause");
                let resumed = store
                    .transition(
                        run.id,
                        paused.revision,
                        Transition::to(RunStatus::Scheduled, now + i).due_at(now + 1_000_000),
                    )
                    .await
                    .expect("resume");
                revision = resumed.revision;
            }
        })
        .collect();
    let reader = async {
        let mut cursor = start.clone();
        let mut seen = Vec::new();
        for _ in 0..200 {
            let page = store.changes_since(&cursor, 7).await.expect("read");
            seen.extend(page.changes.into_iter().filter(|c| ids.contains(&c.run_id)));
            cursor = page.next;
            tokio::task::yield_now().await;
        }
        (seen, cursor)
    };
    let ((mut seen, cursor), ()) = tokio::join!(reader, async {
        super::concurrency::join_all(writers).await;
    });
    let (rest, _) = read_stream(store, cursor, 7, &ids).await;
    seen.extend(rest);
    let mut keys: Vec<(RunId, u64)> = seen.iter().map(|c| (c.run_id, c.revision)).collect();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), total, "no change twice");
    assert_eq!(
        total,
        8 * 11,
        "every change once: the creations and ten each"
    );
}
