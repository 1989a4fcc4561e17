//! The records the contract passes are its wire format: what a store hands out comes back
//! unchanged from its JSON form, so a remote store (over HTTP) returns what a local one does.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::*;

/// `value` through JSON and back: equal, and the same JSON again.
fn round_trip<T>(what: &str, value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_value(value).unwrap_or_else(|error| panic!("{what}: {error}"));
    let back: T = serde_json::from_value(json.clone())
        .unwrap_or_else(|error| panic!("{what} does not come back from {json}: {error}"));
    assert_eq!(&back, value, "{what} changed on its way through JSON");
    assert_eq!(
        serde_json::to_value(&back).expect("to JSON"),
        json,
        "{what}"
    );
}

/// Every record a run's life produces (the run, a claim request, entries, a sleep, an event,
/// a child, a suspension's wait set, the history, the timeline, a page of runs, the change
/// stream, counts, a worker) comes back from JSON as the store handed it out.
pub async fn check_records_round_trip_through_json(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let new = new_run(&namespace, RunStatus::Queued, now);
    round_trip("NewRun", &new);
    let start = store.changes_since(&crate::ChangeCursor::start(), 0).await;
    let cursor = start.expect("changes_since").next;
    let run = create(store, new).await;
    round_trip("RunRecord", &run);
    let request = claim_request(&namespace, "wire", 1, now + 1);
    round_trip("ClaimRequest", &request);
    let claimed = store.claim(request).await.expect("claim").runs.remove(0);
    round_trip("claimed RunRecord", &claimed);

    let mut done = entry(run.id, "ship:1", 0, now + 2);
    done.status = EntryStatus::Completed;
    done.output = Some(json!({"tracking": "ZX-1", "weight": 1.5}));
    done.fingerprint = Some("fp".to_owned());
    done.input = Some(json!({"to": "Zoë"}));
    round_trip("EntryRecord", &done);
    store
        .put_entry(claimed.revision, done)
        .await
        .expect("put_entry");
    let nap = sleep(run.id, "nap", 0, now + 60_000);
    round_trip("SleepRecord", &nap);
    store
        .put_sleep(claimed.revision, nap, None)
        .await
        .expect("put_sleep");
    let (child, _) = start_child_run(store, &claimed, "wire", now + 3).await;
    round_trip("child RunRecord", &child);
    let arrived = event(run.id, "approved", json!({"by": "ops"}), now + 4);
    round_trip("NewEvent", &arrived);
    store.append_event(arrived).await.expect("append_event");

    let wait = crate::WaitSpec::default()
        .sleep("nap", now + 60_000)
        .event("cancel", 0)
        .child(child.id);
    let suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now + 5).wait(wait);
    round_trip("Transition", &suspend);
    let suspended = store
        .transition(run.id, claimed.revision, suspend)
        .await
        .expect("suspend");
    round_trip("suspended RunRecord", &suspended);

    round_trip(
        "History",
        &store.load_history(run.id).await.expect("history"),
    );
    round_trip("timeline", &store.timeline(run.id).await.expect("timeline"));
    let filter = crate::RunFilter::default().workflow(namespace.workflow.clone());
    let page = store.list_runs(crate::ListRuns::new(filter, 10)).await;
    let page = page.expect("list_runs");
    assert_eq!(page.runs.len(), 1, "{page:?}");
    round_trip("RunPage", &page);
    let changes = store.changes_since(&cursor, 100).await;
    round_trip("ChangePage", &changes.expect("changes_since"));
    let counts = store.run_counts().await.expect("run_counts");
    round_trip("RunCounts", &counts);
    let beat = crate::WorkerRecord::new("wire-worker", "host", 7, vec![namespace], "default", now);
    round_trip(
        "WorkerRecord",
        &store.record_worker(beat, now).await.expect("beat"),
    );
}
