//! Concurrency: claimers racing for runs, and concurrent entry writes each getting their own outcome.

use super::*;

/// Eight claimers racing over 500 queued runs: every run is claimed exactly once.
pub async fn check_concurrent_claimers_never_share_a_run(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let mut ids = HashSet::new();
    for i in 0..500 {
        let run = create(store, new_run(&namespace, RunStatus::Queued, now + i)).await;
        ids.insert(run.id);
    }
    async fn claimer(store: &dyn Store, namespace: &Namespace, owner: usize) -> Vec<RunRecord> {
        let mut mine = Vec::new();
        loop {
            let batch = store
                .claim(claim_request(
                    namespace,
                    &format!("worker-{owner}"),
                    7,
                    LOCAL_TIME + 1_000,
                ))
                .await
                .expect("claim")
                .runs;
            if batch.is_empty() {
                return mine;
            }
            mine.extend(batch);
            tokio::task::yield_now().await;
        }
    }
    let ns = &namespace;
    let (a, b, c, d, e, f, g, h) = tokio::join!(
        claimer(store, ns, 0),
        claimer(store, ns, 1),
        claimer(store, ns, 2),
        claimer(store, ns, 3),
        claimer(store, ns, 4),
        claimer(store, ns, 5),
        claimer(store, ns, 6),
        claimer(store, ns, 7),
    );
    let mut seen = HashSet::new();
    for (owner, claimed) in [a, b, c, d, e, f, g, h].into_iter().enumerate() {
        for run in claimed {
            assert!(seen.insert(run.id), "run {} claimed twice", run.id);
            assert_eq!(run.owner, Some(format!("worker-{owner}")));
            assert_eq!(run.revision, 2);
        }
    }
    assert_eq!(seen, ids, "every run claimed");
}

/// Polls every future concurrently on the calling task (so they all reach the store before
/// any answer comes back) and returns their outputs in order.
pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|output| output.expect("every future is done"))
        .collect()
}

/// Many concurrent `put_entry` calls over several runs (backends may write them together):
/// each call gets exactly its own outcome (written, a conflict with its own expected and the
/// actual revision, or not found), and the stored entries are exactly the written ones.
pub async fn check_concurrent_put_entry_outcomes_are_each_their_own(store: &dyn Store) {
    let now = LOCAL_TIME;
    let mut runs = Vec::new();
    for i in 0..4 {
        let run = running(store, &format!("worker-{i}"), now).await;
        // Move some runs on (entry writes check the revision, not the status), so that
        // their revisions differ.
        let run = if i % 2 == 1 {
            store
                .transition(run.id, run.revision, Transition::to(RunStatus::Queued, now))
                .await
                .expect("requeue")
        } else {
            run
        };
        runs.push(run);
    }
    let unknown = RunId::new();
    // (expected revision, entry, expected outcome: None = written, Some(actual) = conflict
    // with that actual revision, Some(0) = not found)
    let mut calls: Vec<(u64, EntryRecord, Option<u64>)> = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        for i in 0..40u32 {
            let mut written = entry(run.id, &format!("task:{r}:{i}"), i % 3, now + i64::from(i));
            written.attempts = i + 1;
            written.output = Some(json!({"run": r, "call": i}));
            written.status = EntryStatus::Completed;
            calls.push((run.revision, written, None));
            let stale = entry(run.id, &format!("stale:{r}:{i}"), 0, now);
            calls.push((run.revision - 1, stale, Some(run.revision)));
            if i % 5 == 0 {
                let ahead = entry(run.id, &format!("ahead:{r}:{i}"), 1, now);
                calls.push((run.revision + 1, ahead, Some(run.revision)));
            }
        }
    }
    for i in 0..5 {
        calls.push((2, entry(unknown, &format!("task:{i}"), 0, now), Some(0)));
    }
    let outcomes = join_all(
        calls
            .iter()
            .map(|(expected, written, _)| store.put_entry(*expected, written.clone()))
            .collect(),
    )
    .await;
    for ((expected, written, outcome), result) in calls.iter().zip(outcomes) {
        match outcome {
            None => result.unwrap_or_else(|error| {
                panic!("put_entry {} at its revision: {error}", written.address)
            }),
            Some(0) => assert_not_found(result),
            Some(actual) => assert_conflict(result, written.run_id, *expected, *actual),
        }
    }
    for run in &runs {
        let history = store.load_history(run.id).await.expect("history");
        assert_eq!(history.run.revision, run.revision, "no increment");
        let mut stored: Vec<EntryRecord> = calls
            .iter()
            .filter(|(_, written, outcome)| written.run_id == run.id && outcome.is_none())
            .map(|(_, written, _)| written.clone())
            .collect();
        stored.sort_by(|a, b| (&a.address, a.index).cmp(&(&b.address, b.index)));
        assert_eq!(history.entries, stored, "exactly the written entries");
    }

    // Concurrent writes of one key: one of them is stored, whole.
    let run = &runs[0];
    let mut first = entry(run.id, "same:1", 0, now + 100);
    first.output = Some(json!("first"));
    let mut second = entry(run.id, "same:1", 0, now + 200);
    second.status = EntryStatus::Completed;
    second.output = Some(json!("second"));
    let results = join_all(vec![
        store.put_entry(run.revision, first.clone()),
        store.put_entry(run.revision, second.clone()),
        store.put_entry(run.revision, first.clone()),
        store.put_entry(run.revision, second.clone()),
    ])
    .await;
    for result in results {
        result.expect("put_entry of one key");
    }
    let history = store.load_history(run.id).await.expect("history");
    let same: Vec<&EntryRecord> = history
        .entries
        .iter()
        .filter(|stored| stored.address == "same:1")
        .collect();
    assert_eq!(same.len(), 1);
    assert!(*same[0] == first || *same[0] == second, "{:?}", same[0]);
}

/// Concurrent `put_entry` calls racing a transition of their run: each call either wrote its
/// entry, or got a conflict naming the new revision and wrote nothing.
pub async fn check_concurrent_put_entry_racing_a_transition(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let other = running(store, "worker", now).await;
    let mut calls = Vec::new();
    for i in 0..100u32 {
        calls.push((
            run.id,
            run.revision,
            entry(run.id, &format!("task:{i}"), 0, now),
        ));
        calls.push((
            other.id,
            other.revision,
            entry(other.id, &format!("task:{i}"), 0, now),
        ));
    }
    let writes = join_all(
        calls
            .iter()
            .map(|(_, expected, written)| store.put_entry(*expected, written.clone()))
            .collect(),
    );
    let requeue = async {
        tokio::task::yield_now().await;
        store
            .transition(run.id, run.revision, Transition::to(RunStatus::Queued, now))
            .await
            .expect("requeue")
    };
    let (outcomes, requeued) = tokio::join!(writes, requeue);
    assert_eq!(requeued.revision, run.revision + 1);
    let mut written = HashSet::new();
    for ((id, expected, entry), result) in calls.iter().zip(outcomes) {
        if *id == other.id {
            result.expect("the other run's writes are not fenced");
            continue;
        }
        match result {
            Ok(()) => {
                written.insert(entry.address.clone());
            }
            conflict => assert_conflict(conflict, *id, *expected, requeued.revision),
        }
    }
    let history = store.load_history(run.id).await.expect("history");
    let stored: HashSet<String> = history
        .entries
        .iter()
        .map(|entry| entry.address.clone())
        .collect();
    assert_eq!(stored, written, "exactly the written entries");
    let history = store.load_history(other.id).await.expect("history");
    assert_eq!(history.entries.len(), 100);
}
