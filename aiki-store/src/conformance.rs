//! The conformance suite every backend must pass.
//!
//! Each check is a plain `async fn` over a [`Store`]; [`conformance_tests!`](crate::conformance_tests)
//! stamps out one `#[tokio::test]` per check for a store factory:
//!
//! ```no_run
//! aiki_store::conformance_tests!(async { aiki_store::connect("memory:").await.unwrap() });
//! # fn main() {}
//! ```
//!
//! Checks create their own runs with fresh random ids, namespaces and reference ids, so many
//! can share one database at once. The checks of the operations that sweep every run
//! ([`Store::wake_due`], [`Store::release_stale_claims`], [`Store::stall_undelivered`],
//! [`Store::next_due`]) take a process-wide lock and use times around [`GLOBAL_TIME`], far
//! below [`LOCAL_TIME`], the time every other check uses, so a sweep never touches another
//! check's runs. Checks assert error kinds, never messages.
//!
//! The crate using the macro needs `tokio` with the `macros` and `rt-multi-thread` features.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use serde_json::{Value, json};

use crate::{
    AppendOutcome, ClaimRequest, CreateOutcome, EntryKind, EntryRecord, EntryStatus, Failure,
    Millis, Namespace, NewEvent, NewRun, ParentLink, RunId, RunRecord, RunStatus, SleepRecord,
    Store, StoreError, Transition, WaitSpec,
};

/// The time (ms) around which every check that does not sweep works (year 2096).
pub const LOCAL_TIME: Millis = 4_000_000_000_000;

/// The time (ms) around which the sweeping checks work (year 2001): a sweep at these times
/// never reaches runs written at [`LOCAL_TIME`].
pub const GLOBAL_TIME: Millis = 1_000_000_000_000;

/// Serializes the sweeping checks of one test binary.
static SWEEPS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What a conformance test runs against: a store, plus whatever must live as long as the test
/// (a temporary file or database to remove when dropped).
pub trait Fixture: Send {
    /// The store under test; `None` skips the test (the factory has said why, loudly).
    fn store(&self) -> Option<&dyn Store>;
}

impl Fixture for crate::BoxStore {
    fn store(&self) -> Option<&dyn Store> {
        Some(&**self)
    }
}

impl<F: Fixture> Fixture for Option<F> {
    fn store(&self) -> Option<&dyn Store> {
        self.as_ref().and_then(Fixture::store)
    }
}

/// Stamps out one `#[tokio::test]` per conformance check, each calling `$factory` (an
/// expression evaluating to a future of a [`Fixture`](crate::conformance::Fixture), e.g. a
/// [`BoxStore`](crate::BoxStore)) for its store.
#[macro_export]
macro_rules! conformance_tests {
    ($factory:expr) => {
        $crate::conformance_tests!(@checks $factory;
            check_backend_has_a_name,
            check_create_run,
            check_create_run_dedupes_by_reference,
            check_create_run_refuses_a_taken_id,
            check_unknown_run_is_not_found,
            check_transition_checks_and_increments_revision,
            check_transition_refuses_moves_outside_the_table,
            check_transition_writes_output_error_and_attempts,
            check_leaving_running_clears_the_owner,
            check_suspension_after_its_event_lands_in_scheduled,
            check_suspension_after_its_child_ended_lands_in_scheduled,
            check_terminal_child_wakes_waiting_parent,
            check_cancel_sleeps,
            check_claim_filters_orders_and_limits,
            check_refresh_claim,
            check_put_entry,
            check_put_sleep,
            check_start_child,
            check_append_event,
            check_record_event_timeout,
            check_wake_due,
            check_release_stale_claims,
            check_stall_undelivered,
            check_next_due,
            check_zombie_executor_is_fenced,
            check_concurrent_claimers_never_share_a_run,
            check_concurrent_put_entry_outcomes_are_each_their_own,
            check_concurrent_put_entry_racing_a_transition,
            check_values_round_trip,
            check_load_history,
        );
    };
    (@checks $factory:expr; $($check:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                let fixture = $factory.await;
                if let Some(store) = $crate::conformance::Fixture::store(&fixture) {
                    $crate::conformance::$check(store).await;
                }
            }
        )*
    };
}

fn namespace() -> Namespace {
    Namespace::new(format!("conformance-{}", RunId::new()), "1.0.0")
}

fn new_run(namespace: &Namespace, status: RunStatus, now: Millis) -> NewRun {
    NewRun {
        id: RunId::new(),
        namespace: namespace.clone(),
        input: json!({"order": 1}),
        input_hash: "0".repeat(64),
        reference_id: None,
        pool: "default".to_owned(),
        status,
        due_at: None,
        parent: None,
        now,
    }
}

async fn create(store: &dyn Store, run: NewRun) -> RunRecord {
    match store.create_run(run).await.expect("create_run") {
        CreateOutcome::Created(run) => run,
        CreateOutcome::Existing(run) => panic!("expected a new run, got existing {run:?}"),
    }
}

fn claim_request(namespace: &Namespace, owner: &str, limit: u32, now: Millis) -> ClaimRequest {
    ClaimRequest {
        owner: owner.to_owned(),
        namespaces: vec![namespace.clone()],
        pool: "default".to_owned(),
        limit,
        now,
    }
}

/// A fresh run claimed by `owner` at `now` (revision 2, `running`).
async fn running(store: &dyn Store, owner: &str, now: Millis) -> RunRecord {
    let namespace = namespace();
    let run = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let claimed = store
        .claim(claim_request(&namespace, owner, 1, now))
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1, "the queued run is claimed");
    assert_eq!(claimed[0].id, run.id);
    claimed.into_iter().next().expect("one run")
}

fn entry(run_id: RunId, address: &str, index: u32, now: Millis) -> EntryRecord {
    EntryRecord {
        run_id,
        address: address.to_owned(),
        index,
        kind: EntryKind::Task,
        status: EntryStatus::Running,
        output: None,
        fingerprint: None,
        attempts: 1,
        error: None,
        retry_at: None,
        updated_at: now,
    }
}

fn sleep(run_id: RunId, name: &str, index: u32, wake_at: Millis) -> SleepRecord {
    SleepRecord {
        run_id,
        name: name.to_owned(),
        index,
        duration_ms: 1_000,
        wake_at,
        cancelled: false,
    }
}

fn event(run_id: RunId, name: &str, data: Value, now: Millis) -> NewEvent {
    NewEvent {
        run_id,
        name: name.to_owned(),
        data,
        reference_id: None,
        now,
    }
}

fn assert_conflict<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    run_id: RunId,
    expected: u64,
    actual: u64,
) {
    match result {
        Err(StoreError::RevisionConflict {
            run_id: id,
            expected: e,
            actual: a,
        }) => {
            assert_eq!((id, e, a), (run_id, expected, actual), "conflict details");
        }
        other => panic!("expected a revision conflict, got {other:?}"),
    }
}

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::NotFound { .. })),
        "expected NotFound, got {result:?}"
    );
}

fn assert_invalid_transition<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::InvalidTransition { .. })),
        "expected InvalidTransition, got {result:?}"
    );
}

/// [`Store::backend`] names the backend.
pub async fn check_backend_has_a_name(store: &dyn Store) {
    assert!(!store.backend().is_empty());
}

/// A created run is stored as given, at revision 1 and attempt 1.
pub async fn check_create_run(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let mut new = new_run(&namespace, RunStatus::Queued, now);
    new.reference_id = Some(format!("ref-{}", RunId::new()));
    new.pool = "gpu".to_owned();
    let run = create(store, new.clone()).await;
    assert_eq!(run.id, new.id);
    assert_eq!(run.namespace, namespace);
    assert_eq!(run.input, new.input);
    assert_eq!(run.input_hash, new.input_hash);
    assert_eq!(run.reference_id, new.reference_id);
    assert_eq!(run.pool, "gpu");
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!((run.revision, run.attempts), (1, 1));
    assert_eq!(run.queued_at, Some(now));
    assert_eq!((run.created_at, run.updated_at), (now, now));
    assert_eq!(run.owner, None);
    assert_eq!(run.output, None);
    assert_eq!(run.error, None);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);

    let mut scheduled = new_run(&namespace, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now + 60_000);
    scheduled.parent = Some(ParentLink {
        run_id: run.id,
        address: "child:1.0.0:abc".to_owned(),
    });
    let scheduled = create(store, scheduled).await;
    assert_eq!(scheduled.status, RunStatus::Scheduled);
    assert_eq!(scheduled.due_at, Some(now + 60_000));
    assert_eq!(scheduled.queued_at, None);
    assert_eq!(
        store.get_run(scheduled.id).await.expect("get_run"),
        scheduled
    );
}

/// A second run with the same namespace and reference id returns the first, untouched.
pub async fn check_create_run_dedupes_by_reference(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = namespace();
    let reference = format!("order-{}", RunId::new());
    let mut first = new_run(&namespace, RunStatus::Queued, now);
    first.reference_id = Some(reference.clone());
    let first = create(store, first).await;

    let mut second = new_run(&namespace, RunStatus::Scheduled, now + 1);
    second.reference_id = Some(reference.clone());
    second.input = json!({"order": 2});
    let second_id = second.id;
    match store.create_run(second).await.expect("create_run") {
        CreateOutcome::Existing(existing) => assert_eq!(existing, first),
        CreateOutcome::Created(run) => panic!("duplicate reference created {run:?}"),
    }
    assert_not_found(store.get_run(second_id).await);
    assert_eq!(store.get_run(first.id).await.expect("get_run"), first);

    // The same reference in another namespace is another run.
    let mut other = new_run(&self::namespace(), RunStatus::Queued, now);
    other.reference_id = Some(reference);
    create(store, other).await;
    // Runs without a reference never collide.
    create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    create(store, new_run(&namespace, RunStatus::Queued, now)).await;
}

/// Creating a run with an id already taken is [`StoreError::AlreadyExists`].
pub async fn check_create_run_refuses_a_taken_id(store: &dyn Store) {
    let namespace = namespace();
    let run = create(store, new_run(&namespace, RunStatus::Queued, LOCAL_TIME)).await;
    let mut again = new_run(&namespace, RunStatus::Queued, LOCAL_TIME);
    again.id = run.id;
    let result = store.create_run(again).await;
    assert!(
        matches!(result, Err(StoreError::AlreadyExists { .. })),
        "expected AlreadyExists, got {result:?}"
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
}

/// Every operation on a run that does not exist is [`StoreError::NotFound`].
pub async fn check_unknown_run_is_not_found(store: &dyn Store) {
    let id = RunId::new();
    let now = LOCAL_TIME;
    assert_not_found(store.get_run(id).await);
    assert_not_found(store.load_history(id).await);
    assert_not_found(
        store
            .transition(id, 1, Transition::to(RunStatus::Queued, now))
            .await,
    );
    assert_not_found(store.refresh_claim(id, "worker", 1, now).await);
    assert_not_found(store.put_entry(1, entry(id, "task:00", 0, now)).await);
    assert_not_found(store.put_sleep(1, sleep(id, "nap", 0, now)).await);
    assert_not_found(store.append_event(event(id, "go", json!(1), now)).await);
    assert_not_found(store.record_event_timeout(id, 1, "go", 0, now).await);
    let child = new_run(&namespace(), RunStatus::Queued, now);
    let child_id = child.id;
    assert_not_found(
        store
            .start_child(1, entry(id, "child:1:x", 0, now), child)
            .await,
    );
    assert_not_found(store.get_run(child_id).await);
}

/// A transition checks the revision (a mismatch writes nothing) and increments it.
pub async fn check_transition_checks_and_increments_revision(store: &dyn Store) {
    let now = LOCAL_TIME;
    let mut new = new_run(&namespace(), RunStatus::Scheduled, now);
    new.due_at = Some(now + 10);
    let run = create(store, new).await;
    assert_conflict(
        store
            .transition(run.id, 2, Transition::to(RunStatus::Queued, now + 1))
            .await,
        run.id,
        2,
        1,
    );
    assert_conflict(
        store
            .transition(run.id, 0, Transition::to(RunStatus::Queued, now + 1))
            .await,
        run.id,
        0,
        1,
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);

    let queued = store
        .transition(run.id, 1, Transition::to(RunStatus::Queued, now + 5))
        .await
        .expect("transition");
    assert_eq!(queued.status, RunStatus::Queued);
    assert_eq!(queued.revision, 2);
    assert_eq!(queued.due_at, None);
    assert_eq!(queued.queued_at, Some(now + 5));
    assert_eq!(queued.updated_at, now + 5);
    assert_eq!(queued.created_at, now);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), queued);
    // The old revision is stale now.
    assert_conflict(
        store
            .transition(run.id, 1, Transition::to(RunStatus::Paused, now + 6))
            .await,
        run.id,
        1,
        2,
    );
}

/// A move the status table forbids is [`StoreError::InvalidTransition`] and writes nothing.
pub async fn check_transition_refuses_moves_outside_the_table(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = create(store, new_run(&namespace(), RunStatus::Queued, now)).await;
    assert_invalid_transition(
        store
            .transition(run.id, 1, Transition::to(RunStatus::Completed, now))
            .await,
    );
    assert_invalid_transition(
        store
            .transition(run.id, 1, Transition::to(RunStatus::Sleeping, now))
            .await,
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
    let cancelled = store
        .transition(run.id, 1, Transition::to(RunStatus::Cancelled, now + 1))
        .await
        .expect("cancel");
    assert_eq!(
        (cancelled.status, cancelled.revision),
        (RunStatus::Cancelled, 2)
    );
    for to in RunStatus::ALL {
        assert_invalid_transition(
            store
                .transition(run.id, 2, Transition::to(to, now + 2))
                .await,
        );
    }
    assert_eq!(store.get_run(run.id).await.expect("get_run"), cancelled);
}

/// A transition records the output and its fingerprint, the error, the attempt count and the
/// due time it carries, and keeps them when a later transition carries none.
pub async fn check_transition_writes_output_error_and_attempts(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let mut complete = Transition::to(RunStatus::Completed, now + 1);
    complete.output = Some(json!({"receipt": "r-1", "cents": 1250}));
    complete.output_fingerprint = Some("fp-1".to_owned());
    let completed = store
        .transition(run.id, run.revision, complete)
        .await
        .expect("complete");
    assert_eq!(completed.status, RunStatus::Completed);
    assert_eq!(
        completed.output,
        Some(json!({"receipt": "r-1", "cents": 1250}))
    );
    assert_eq!(completed.output_fingerprint.as_deref(), Some("fp-1"));
    assert_eq!(completed.owner, None);
    assert_eq!(store.get_run(run.id).await.expect("get_run"), completed);

    let run = running(store, "worker", now).await;
    let mut retry = Transition::to(RunStatus::AwaitingRetry, now + 1)
        .due_at(now + 5_000)
        .error(Failure::new("workflow_failed", "boom"));
    retry.attempts = Some(2);
    let waiting = store
        .transition(run.id, run.revision, retry)
        .await
        .expect("retry");
    assert_eq!(waiting.status, RunStatus::AwaitingRetry);
    assert_eq!(waiting.due_at, Some(now + 5_000));
    assert_eq!(waiting.attempts, 2);
    assert_eq!(waiting.error, Some(Failure::new("workflow_failed", "boom")));
    let queued = store
        .transition(
            run.id,
            waiting.revision,
            Transition::to(RunStatus::Queued, now + 5_000),
        )
        .await
        .expect("requeue");
    assert_eq!(queued.attempts, 2, "attempts are kept");
    assert_eq!(
        queued.error,
        Some(Failure::new("workflow_failed", "boom")),
        "the last error is kept"
    );
    assert_eq!(queued.due_at, None);
    assert_eq!(queued.queued_at, Some(now + 5_000));
}

/// Leaving `running` clears the owner and the heartbeat.
pub async fn check_leaving_running_clears_the_owner(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-1", now).await;
    assert_eq!(run.owner.as_deref(), Some("worker-1"));
    assert_eq!(run.heartbeat_at, Some(now));
    let sleeping = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now + 1).due_at(now + 60_000),
        )
        .await
        .expect("sleep");
    assert_eq!(sleeping.status, RunStatus::Sleeping);
    assert_eq!(sleeping.revision, run.revision + 1);
    assert_eq!(sleeping.owner, None);
    assert_eq!(sleeping.heartbeat_at, None);
    assert_eq!(sleeping.due_at, Some(now + 60_000));
    assert_eq!(store.get_run(run.id).await.expect("get_run"), sleeping);
}

/// A suspension waiting for an event that is already there lands in `scheduled`, due now.
pub async fn check_suspension_after_its_event_lands_in_scheduled(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let outcome = store
        .append_event(event(run.id, "approved", json!({"by": "ana"}), now + 1))
        .await
        .expect("append");
    assert_eq!(
        outcome,
        AppendOutcome::Appended {
            index: 0,
            woke: false
        }
    );
    assert_eq!(
        store.get_run(run.id).await.expect("get_run").revision,
        run.revision,
        "an event for a running run does not fence its executor"
    );
    let mut suspend = Transition::to(RunStatus::AwaitingEvent, now + 2).due_at(now + 99_000);
    suspend.wait = Some(WaitSpec {
        events: vec![("approved".to_owned(), 0)],
        children: vec![],
    });
    let landed = store
        .transition(run.id, run.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(landed.status, RunStatus::Scheduled);
    assert_eq!(landed.due_at, Some(now + 2));
    assert_eq!(landed.revision, run.revision + 1);

    // Waiting for the next event of that name suspends for real.
    let run = running(store, "worker", now).await;
    store
        .append_event(event(run.id, "approved", json!(1), now + 1))
        .await
        .expect("append");
    let mut suspend = Transition::to(RunStatus::AwaitingEvent, now + 2).due_at(now + 99_000);
    suspend.wait = Some(WaitSpec {
        events: vec![("approved".to_owned(), 1), ("other".to_owned(), 0)],
        children: vec![],
    });
    let waiting = store
        .transition(run.id, run.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(waiting.status, RunStatus::AwaitingEvent);
    assert_eq!(waiting.due_at, Some(now + 99_000));
}

/// A suspension waiting for a child that already ended lands in `scheduled`, due now.
pub async fn check_suspension_after_its_child_ended_lands_in_scheduled(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let (ended, _) = start_child_run(store, &parent, "a", now).await;
    let (pending, _) = start_child_run(store, &parent, "b", now).await;
    store
        .transition(ended.id, 1, Transition::to(RunStatus::Cancelled, now + 1))
        .await
        .expect("cancel child");
    assert_eq!(
        store.get_run(parent.id).await.expect("get_run").status,
        RunStatus::Running,
        "a running parent is not woken"
    );

    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now + 2);
    suspend.wait = Some(WaitSpec {
        events: vec![],
        children: vec![pending.id, ended.id],
    });
    let landed = store
        .transition(parent.id, parent.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(landed.status, RunStatus::Scheduled);
    assert_eq!(landed.due_at, Some(now + 2));

    let other = running(store, "worker", now).await;
    let (pending, _) = start_child_run(store, &other, "c", now).await;
    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now + 2);
    suspend.wait = Some(WaitSpec {
        events: vec![],
        children: vec![pending.id],
    });
    let waiting = store
        .transition(other.id, other.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(waiting.status, RunStatus::AwaitingChildWorkflow);
}

/// Starts a child of `parent` (at the parent's current revision) addressed by `label`.
async fn start_child_run(
    store: &dyn Store,
    parent: &RunRecord,
    label: &str,
    now: Millis,
) -> (RunRecord, String) {
    let address = format!("child:1.0.0:{label}");
    let mut child = new_run(&namespace(), RunStatus::Queued, now);
    child.parent = Some(ParentLink {
        run_id: parent.id,
        address: address.clone(),
    });
    let mut start = entry(parent.id, &address, 0, now);
    start.kind = EntryKind::Child;
    start.status = EntryStatus::Completed;
    let child = store
        .start_child(parent.revision, start, child)
        .await
        .expect("start_child");
    (child, address)
}

/// A child reaching any terminal status wakes a parent in `awaiting_child_workflow`.
pub async fn check_terminal_child_wakes_waiting_parent(store: &dyn Store) {
    let now = LOCAL_TIME;
    for end in [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ] {
        let parent = running(store, "worker", now).await;
        let (child, _) = start_child_run(store, &parent, "x", now).await;
        let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now + 1);
        suspend.wait = Some(WaitSpec {
            events: vec![],
            children: vec![child.id],
        });
        let waiting = store
            .transition(parent.id, parent.revision, suspend)
            .await
            .expect("suspend");
        assert_eq!(waiting.status, RunStatus::AwaitingChildWorkflow);

        let claimed = store
            .claim(claim_request(&child.namespace, "worker", 1, now + 2))
            .await
            .expect("claim child");
        assert_eq!(claimed.len(), 1);
        store
            .transition(child.id, claimed[0].revision, Transition::to(end, now + 3))
            .await
            .expect("end child");
        let woken = store.get_run(parent.id).await.expect("get_run");
        assert_eq!(woken.status, RunStatus::Scheduled, "woken by a {end} child");
        assert_eq!(woken.due_at, Some(now + 3));
        assert_eq!(woken.revision, waiting.revision + 1);
    }

    // A parent that is not waiting is left alone.
    let parent = running(store, "worker", now).await;
    let (child, _) = start_child_run(store, &parent, "y", now).await;
    store
        .transition(child.id, 1, Transition::to(RunStatus::Cancelled, now + 1))
        .await
        .expect("cancel child");
    assert_eq!(store.get_run(parent.id).await.expect("get_run"), parent);
}

/// `cancel_sleeps` marks the run's pending sleeps cancelled, and only those.
pub async fn check_cancel_sleeps(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    store
        .put_sleep(run.revision, sleep(run.id, "done", 0, now - 1))
        .await
        .expect("put_sleep");
    store
        .put_sleep(run.revision, sleep(run.id, "pending", 0, now + 60_000))
        .await
        .expect("put_sleep");
    let sleeping = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now).due_at(now + 60_000),
        )
        .await
        .expect("sleep");
    let mut wake = Transition::to(RunStatus::Scheduled, now + 10).due_at(now + 10);
    wake.cancel_sleeps = true;
    let woken = store
        .transition(run.id, sleeping.revision, wake)
        .await
        .expect("wakeup");
    assert_eq!(woken.status, RunStatus::Scheduled);
    let history = store.load_history(run.id).await.expect("load_history");
    let cancelled: Vec<(&str, bool)> = history
        .sleeps
        .iter()
        .map(|sleep| (sleep.name.as_str(), sleep.cancelled))
        .collect();
    assert_eq!(cancelled, [("done", false), ("pending", true)]);
}

/// Claims take `queued` runs of the asked namespaces and pool only, oldest first, at most
/// `limit`, each becoming `running` with its owner, heartbeat and an incremented revision.
pub async fn check_claim_filters_orders_and_limits(store: &dyn Store) {
    let now = LOCAL_TIME;
    let (a, b, unlisted) = (namespace(), namespace(), namespace());
    let a_late = create(store, new_run(&a, RunStatus::Queued, now + 3)).await;
    let b_early = create(store, new_run(&b, RunStatus::Queued, now + 1)).await;
    let mut gpu = new_run(&a, RunStatus::Queued, now);
    gpu.pool = "gpu".to_owned();
    let gpu = create(store, gpu).await;
    let elsewhere = create(store, new_run(&unlisted, RunStatus::Queued, now)).await;
    let a_latest = create(store, new_run(&a, RunStatus::Queued, now + 4)).await;
    let mut scheduled = new_run(&a, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now);
    let scheduled = create(store, scheduled).await;

    let request = |limit: u32| ClaimRequest {
        owner: "worker-7".to_owned(),
        namespaces: vec![a.clone(), b.clone()],
        pool: "default".to_owned(),
        limit,
        now: now + 10,
    };
    let first = store.claim(request(2)).await.expect("claim");
    let ids: Vec<RunId> = first.iter().map(|run| run.id).collect();
    assert_eq!(
        ids,
        [b_early.id, a_late.id],
        "oldest first, at most the limit"
    );
    for run in &first {
        assert_eq!(run.status, RunStatus::Running);
        assert_eq!(run.owner.as_deref(), Some("worker-7"));
        assert_eq!(run.heartbeat_at, Some(now + 10));
        assert_eq!(run.revision, 2);
        assert_eq!(store.get_run(run.id).await.expect("get_run"), *run);
    }
    let second = store.claim(request(10)).await.expect("claim");
    assert_eq!(
        second.iter().map(|run| run.id).collect::<Vec<_>>(),
        [a_latest.id]
    );
    assert!(store.claim(request(10)).await.expect("claim").is_empty());
    for untouched in [gpu, elsewhere, scheduled] {
        assert_eq!(
            store.get_run(untouched.id).await.expect("get_run"),
            untouched
        );
    }
    assert!(store.claim(request(0)).await.expect("claim").is_empty());
}

/// A claim refresh checks owner and revision without incrementing, and moves the heartbeat.
pub async fn check_refresh_claim(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-1", now).await;
    assert_conflict(
        store
            .refresh_claim(run.id, "worker-2", run.revision, now + 1)
            .await,
        run.id,
        run.revision,
        run.revision,
    );
    assert_conflict(
        store
            .refresh_claim(run.id, "worker-1", run.revision + 1, now + 1)
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), run);
    store
        .refresh_claim(run.id, "worker-1", run.revision, now + 30_000)
        .await
        .expect("refresh");
    let refreshed = store.get_run(run.id).await.expect("get_run");
    assert_eq!(refreshed.heartbeat_at, Some(now + 30_000));
    assert_eq!(
        refreshed.revision, run.revision,
        "refresh does not increment"
    );
    assert_eq!(refreshed.status, RunStatus::Running);
}

/// Entries are checked against the revision without incrementing it, and upserted by
/// `(run, address, index)`.
pub async fn check_put_entry(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    assert_conflict(
        store
            .put_entry(run.revision + 1, entry(run.id, "charge:aa", 0, now))
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    assert_conflict(
        store
            .put_entry(run.revision - 1, entry(run.id, "charge:aa", 0, now))
            .await,
        run.id,
        run.revision - 1,
        run.revision,
    );
    assert!(
        store
            .load_history(run.id)
            .await
            .expect("history")
            .entries
            .is_empty(),
        "a refused write writes nothing"
    );

    store
        .put_entry(run.revision, entry(run.id, "charge:aa", 0, now))
        .await
        .expect("put_entry");
    // Concurrent tasks of one run do not fence each other.
    store
        .put_entry(run.revision, entry(run.id, "email:bb", 0, now))
        .await
        .expect("put_entry");
    let mut done = entry(run.id, "charge:aa", 0, now + 5);
    done.status = EntryStatus::Completed;
    done.output = Some(json!({"transaction_id": "t-1"}));
    done.fingerprint = Some("fp".to_owned());
    done.attempts = 2;
    store
        .put_entry(run.revision, done.clone())
        .await
        .expect("upsert");
    let mut failed = entry(run.id, "charge:aa", 1, now + 6);
    failed.status = EntryStatus::AwaitingRetry;
    failed.error = Some(Failure::new("task_failed", "card declined"));
    failed.retry_at = Some(now + 1_000);
    store
        .put_entry(run.revision, failed.clone())
        .await
        .expect("put_entry");

    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.revision, run.revision, "no increment");
    assert_eq!(
        history.entries,
        [done, failed, entry(run.id, "email:bb", 0, now)]
    );
}

/// Sleeps are checked against the revision without incrementing it, and upserted by
/// `(run, name, index)` (an extension replaces the record).
pub async fn check_put_sleep(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    assert_conflict(
        store
            .put_sleep(run.revision + 1, sleep(run.id, "nap", 0, now + 1_000))
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    store
        .put_sleep(run.revision, sleep(run.id, "nap", 0, now + 1_000))
        .await
        .expect("put_sleep");
    let mut extended = sleep(run.id, "nap", 0, now + 5_000);
    extended.duration_ms = 5_000;
    store
        .put_sleep(run.revision, extended.clone())
        .await
        .expect("extend");
    let second = sleep(run.id, "nap", 1, now + 9_000);
    store
        .put_sleep(run.revision, second.clone())
        .await
        .expect("put_sleep");
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.sleeps, [extended, second]);
    assert_eq!(history.run.revision, run.revision, "no increment");
}

/// A child start writes the parent's entry (output: the child's id) and the child in one
/// operation; a revision conflict writes neither; a known child reference reuses that run.
pub async fn check_start_child(store: &dyn Store) {
    let now = LOCAL_TIME;
    let parent = running(store, "worker", now).await;
    let child_namespace = namespace();
    let address = "child:1.0.0:ship-1";
    let make_child = |reference: &str| {
        let mut child = new_run(&child_namespace, RunStatus::Queued, now);
        child.reference_id = Some(reference.to_owned());
        child.parent = Some(ParentLink {
            run_id: parent.id,
            address: address.to_owned(),
        });
        child
    };
    let mut start = entry(parent.id, address, 0, now);
    start.kind = EntryKind::Child;
    start.status = EntryStatus::Completed;

    let refused = make_child("ship-1");
    let refused_id = refused.id;
    assert_conflict(
        store
            .start_child(parent.revision + 1, start.clone(), refused)
            .await,
        parent.id,
        parent.revision + 1,
        parent.revision,
    );
    assert_not_found(store.get_run(refused_id).await);
    let history = store.load_history(parent.id).await.expect("history");
    assert!(history.entries.is_empty() && history.children.is_empty());

    let new_child = make_child("ship-1");
    let child = store
        .start_child(parent.revision, start.clone(), new_child.clone())
        .await
        .expect("start_child");
    assert_eq!(child.id, new_child.id);
    assert_eq!(child.status, RunStatus::Queued);
    assert_eq!(child.revision, 1);
    assert_eq!(child.parent, new_child.parent);
    assert_eq!(store.get_run(child.id).await.expect("get_run"), child);
    let history = store.load_history(parent.id).await.expect("history");
    assert_eq!(history.run.revision, parent.revision, "no increment");
    assert_eq!(history.children, std::slice::from_ref(&child));
    assert_eq!(history.entries.len(), 1);
    assert_eq!(history.entries[0].kind, EntryKind::Child);
    assert_eq!(
        history.entries[0].output,
        Some(Value::String(child.id.to_string()))
    );

    // The same reference again: the existing child, no new run.
    let again = make_child("ship-1");
    let again_id = again.id;
    let mut second = start.clone();
    second.index = 1;
    let existing = store
        .start_child(parent.revision, second, again)
        .await
        .expect("start_child");
    assert_eq!(existing, child);
    assert_not_found(store.get_run(again_id).await);
    let history = store.load_history(parent.id).await.expect("history");
    assert_eq!(history.children.len(), 1);
    assert_eq!(
        history.entries[1].output,
        Some(Value::String(child.id.to_string()))
    );
}

/// Events get per-name indexes, are deduplicated by reference id, wake only runs in
/// `awaiting_event`, and are refused for ended runs.
pub async fn check_append_event(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let appended = |index, woke| AppendOutcome::Appended { index, woke };
    assert_eq!(
        store
            .append_event(event(run.id, "a", json!(1), now))
            .await
            .expect("append"),
        appended(0, false)
    );
    assert_eq!(
        store
            .append_event(event(run.id, "a", json!(2), now))
            .await
            .expect("append"),
        appended(1, false)
    );
    assert_eq!(
        store
            .append_event(event(run.id, "b", json!(3), now))
            .await
            .expect("append"),
        appended(0, false)
    );
    let mut keyed = event(run.id, "a", json!(4), now);
    keyed.reference_id = Some("payment-1".to_owned());
    assert_eq!(
        store.append_event(keyed.clone()).await.expect("append"),
        appended(2, false)
    );
    let mut repeat = keyed.clone();
    repeat.data = json!("different");
    assert_eq!(
        store.append_event(repeat).await.expect("append"),
        AppendOutcome::Duplicate
    );
    let mut other_name = keyed.clone();
    other_name.name = "b".to_owned();
    assert_eq!(
        store.append_event(other_name).await.expect("append"),
        appended(1, false),
        "reference ids are unique per name"
    );
    // A recorded timeout holds its slot.
    store
        .record_event_timeout(run.id, run.revision, "c", 0, now)
        .await
        .expect("timeout");
    assert_eq!(
        store
            .append_event(event(run.id, "c", json!(5), now))
            .await
            .expect("append"),
        appended(1, false)
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.revision, run.revision, "no increment, no wake");
    let a: Vec<&Value> = history
        .events
        .iter()
        .filter(|event| event.name == "a")
        .filter_map(|event| event.data.as_ref())
        .collect();
    assert_eq!(a, [&json!(1), &json!(2), &json!(4)]);

    // A sleeping run is not woken by an event.
    let sleeping = store
        .transition(
            run.id,
            run.revision,
            Transition::to(RunStatus::Sleeping, now + 1).due_at(now + 9_000),
        )
        .await
        .expect("sleep");
    assert_eq!(
        store
            .append_event(event(run.id, "a", json!(6), now + 2))
            .await
            .expect("append"),
        appended(3, false)
    );
    assert_eq!(store.get_run(run.id).await.expect("get_run"), sleeping);

    // A run awaiting an event is woken to `scheduled`, due now.
    let waiter = running(store, "worker", now).await;
    let waiting = store
        .transition(
            waiter.id,
            waiter.revision,
            Transition::to(RunStatus::AwaitingEvent, now + 1).due_at(now + 9_000),
        )
        .await
        .expect("suspend");
    assert_eq!(
        store
            .append_event(event(waiter.id, "go", json!(null), now + 2))
            .await
            .expect("append"),
        appended(0, true)
    );
    let woken = store.get_run(waiter.id).await.expect("get_run");
    assert_eq!(woken.status, RunStatus::Scheduled);
    assert_eq!(woken.due_at, Some(now + 2));
    assert_eq!(woken.revision, waiting.revision + 1);

    // Ended runs take no events.
    let ended = store
        .transition(
            waiter.id,
            woken.revision,
            Transition::to(RunStatus::Cancelled, now + 3),
        )
        .await
        .expect("cancel");
    assert_invalid_transition(
        store
            .append_event(event(waiter.id, "go", json!(1), now + 4))
            .await,
    );
    assert_eq!(store.get_run(waiter.id).await.expect("get_run"), ended);
    assert_eq!(
        store
            .load_history(waiter.id)
            .await
            .expect("history")
            .events
            .len(),
        1
    );
}

/// A wait's timeout is recorded unless an event took the slot first; the revision is checked.
pub async fn check_record_event_timeout(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let timeout = store
        .record_event_timeout(run.id, run.revision, "approval", 0, now + 1)
        .await
        .expect("timeout");
    assert!(timeout.timed_out);
    assert_eq!(timeout.data, None);
    assert_eq!((timeout.name.as_str(), timeout.index), ("approval", 0));
    assert_eq!(timeout.received_at, now + 1);
    // Recording it again returns the same record.
    assert_eq!(
        store
            .record_event_timeout(run.id, run.revision, "approval", 0, now + 2)
            .await
            .expect("timeout"),
        timeout
    );

    store
        .append_event(event(run.id, "approval", json!({"ok": true}), now + 3))
        .await
        .expect("append");
    let slot = store
        .record_event_timeout(run.id, run.revision, "approval", 1, now + 4)
        .await
        .expect("timeout");
    assert!(!slot.timed_out, "the event that took the slot wins");
    assert_eq!(slot.data, Some(json!({"ok": true})));
    assert_eq!(slot.index, 1);

    assert_conflict(
        store
            .record_event_timeout(run.id, run.revision + 1, "approval", 2, now + 5)
            .await,
        run.id,
        run.revision + 1,
        run.revision,
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.events.len(), 2, "a refused timeout writes nothing");
    assert_eq!(history.run.revision, run.revision, "no increment");
}

/// `wake_due` queues every timer-driven run that is due, and nothing else.
pub async fn check_wake_due(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let namespace = namespace();
    let mut scheduled = new_run(&namespace, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now + 100);
    let scheduled = create(store, scheduled).await;
    let mut later = new_run(&namespace, RunStatus::Scheduled, now);
    later.due_at = Some(LOCAL_TIME * 2);
    let later = create(store, later).await;
    let sleeper = running(store, "worker", now).await;
    let sleeper = store
        .transition(
            sleeper.id,
            sleeper.revision,
            Transition::to(RunStatus::Sleeping, now).due_at(now + 200),
        )
        .await
        .expect("sleep");
    let waiter = running(store, "worker", now).await;
    let waiter = store
        .transition(
            waiter.id,
            waiter.revision,
            Transition::to(RunStatus::AwaitingEvent, now).due_at(now + 50),
        )
        .await
        .expect("await");
    let mut paused = new_run(&namespace, RunStatus::Scheduled, now);
    paused.due_at = Some(now + 10);
    let paused = create(store, paused).await;
    let paused = store
        .transition(
            paused.id,
            paused.revision,
            Transition::to(RunStatus::Paused, now).due_at(now + 10),
        )
        .await
        .expect("pause");

    let moved = store.wake_due(now + 200).await.expect("wake_due");
    assert!(moved >= 3, "at least this check's three due runs moved");
    for due in [scheduled.clone(), sleeper, waiter] {
        let run = store.get_run(due.id).await.expect("get_run");
        assert_eq!(run.status, RunStatus::Queued);
        assert_eq!(run.revision, due.revision + 1);
        assert_eq!(run.due_at, None);
        assert_eq!(run.queued_at, Some(now + 200));
    }
    assert_eq!(store.get_run(later.id).await.expect("get_run"), later);
    assert_eq!(store.get_run(paused.id).await.expect("get_run"), paused);
    let again = store.get_run(scheduled.id).await.expect("get_run");
    store.wake_due(now + 300).await.expect("wake_due");
    assert_eq!(
        store.get_run(scheduled.id).await.expect("get_run"),
        again,
        "a queued run is not moved again"
    );
}

/// Claim recovery releases `running` runs whose heartbeat is too old, and only those.
pub async fn check_release_stale_claims(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let stale = running(store, "dead-worker", now).await;
    let fresh = running(store, "live-worker", now).await;
    store
        .refresh_claim(fresh.id, "live-worker", fresh.revision, now + 80_000)
        .await
        .expect("refresh");
    let released = store
        .release_stale_claims(now + 100_000, 90_000)
        .await
        .expect("release");
    assert!(released.contains(&stale.id));
    assert!(!released.contains(&fresh.id));
    let run = store.get_run(stale.id).await.expect("get_run");
    assert_eq!(run.status, RunStatus::Queued);
    assert_eq!(run.revision, stale.revision + 1);
    assert_eq!(run.owner, None);
    assert_eq!(run.heartbeat_at, None);
    assert_eq!(run.queued_at, Some(now + 100_000));
    let kept = store.get_run(fresh.id).await.expect("get_run");
    assert_eq!(kept.status, RunStatus::Running);
    assert_eq!(kept.revision, fresh.revision);
    assert_eq!(kept.owner.as_deref(), Some("live-worker"));
}

/// Runs left `queued` longer than `max_age` move to `stalled`, and can be requeued.
pub async fn check_stall_undelivered(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let namespace = namespace();
    let old = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let young = create(store, new_run(&namespace, RunStatus::Queued, now + 50_000)).await;
    let stalled = store
        .stall_undelivered(now + 100_000, 60_000)
        .await
        .expect("stall");
    assert!(stalled >= 1);
    let run = store.get_run(old.id).await.expect("get_run");
    assert_eq!(run.status, RunStatus::Stalled);
    assert_eq!(run.revision, old.revision + 1);
    assert_eq!(store.get_run(young.id).await.expect("get_run"), young);
    assert!(
        store
            .claim(claim_request(&namespace, "worker", 10, now + 100_001))
            .await
            .expect("claim")
            .iter()
            .all(|claimed| claimed.id != old.id),
        "a stalled run is not delivered"
    );
    let requeued = store
        .transition(
            old.id,
            run.revision,
            Transition::to(RunStatus::Queued, now + 200_000),
        )
        .await
        .expect("requeue");
    assert_eq!(requeued.queued_at, Some(now + 200_000), "a fresh clock");
}

/// `next_due` is the earliest due time among runs a timer moves.
pub async fn check_next_due(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let namespace = namespace();
    // Earlier due times on runs no timer moves are ignored.
    let mut queued = new_run(&namespace, RunStatus::Queued, now);
    queued.due_at = Some(1);
    create(store, queued).await;
    let mut scheduled = new_run(&namespace, RunStatus::Scheduled, now);
    scheduled.due_at = Some(now + 5);
    create(store, scheduled).await;
    let next = store.next_due().await.expect("next_due");
    assert!(
        next.is_some_and(|due| due > 1 && due <= now + 5),
        "next_due {next:?}"
    );
    store.wake_due(now + 5).await.expect("wake_due");
    let next = store.next_due().await.expect("next_due");
    assert!(next.is_none_or(|due| due > now + 5), "next_due {next:?}");
}

/// A zombie executor (its claim released and taken by another) can write nothing.
pub async fn check_zombie_executor_is_fenced(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let namespace = namespace();
    let mut new = new_run(&namespace, RunStatus::Scheduled, now);
    new.due_at = Some(LOCAL_TIME * 2);
    let run = create(store, new).await; // 1
    let run = store
        .transition(run.id, 1, Transition::to(RunStatus::Queued, now))
        .await
        .expect("queue"); // 2
    let claimed = store
        .claim(claim_request(&namespace, "zombie", 1, now))
        .await
        .expect("claim"); // 3
    assert_eq!(claimed.len(), 1);
    let requeued = store
        .transition(run.id, 3, Transition::to(RunStatus::Queued, now))
        .await
        .expect("requeue"); // 4
    assert_eq!(requeued.revision, 4);
    let zombie = store
        .claim(claim_request(&namespace, "zombie", 1, now))
        .await
        .expect("claim")
        .remove(0); // 5
    assert_eq!(zombie.revision, 5);

    let released = store
        .release_stale_claims(now + 100_000, 90_000)
        .await
        .expect("release"); // 6
    assert!(released.contains(&run.id));
    let healthy = store
        .claim(claim_request(&namespace, "healthy", 1, now + 100_001))
        .await
        .expect("claim")
        .remove(0); // 7
    assert_eq!(healthy.revision, 7);
    assert_eq!(healthy.owner.as_deref(), Some("healthy"));

    let id = run.id;
    let then = now + 100_002;
    assert_conflict(
        store.put_entry(5, entry(id, "t:1", 0, then)).await,
        id,
        5,
        7,
    );
    assert_conflict(store.put_sleep(5, sleep(id, "s", 0, then)).await, id, 5, 7);
    assert_conflict(store.refresh_claim(id, "zombie", 5, then).await, id, 5, 7);
    assert_conflict(
        store.record_event_timeout(id, 5, "e", 0, then).await,
        id,
        5,
        7,
    );
    assert_conflict(
        store
            .transition(id, 5, Transition::to(RunStatus::Completed, then))
            .await,
        id,
        5,
        7,
    );
    let child = new_run(&self::namespace(), RunStatus::Queued, then);
    let child_id = child.id;
    assert_conflict(
        store
            .start_child(5, entry(id, "child:1:x", 0, then), child)
            .await,
        id,
        5,
        7,
    );
    assert_not_found(store.get_run(child_id).await);
    let history = store.load_history(id).await.expect("history");
    assert_eq!(history.run, healthy, "nothing written");
    assert!(history.entries.is_empty());
    assert!(history.sleeps.is_empty());
    assert!(history.events.is_empty());
    assert!(history.children.is_empty());
}

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
                .expect("claim");
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
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
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

fn nested(depth: usize) -> Value {
    (0..depth).fold(json!("bottom"), |inner, level| {
        if level % 2 == 0 {
            json!([inner, level])
        } else {
            json!({"level": level, "inner": inner})
        }
    })
}

/// Unicode, deeply nested JSON and a 1 MiB output come back exactly as written.
pub async fn check_values_round_trip(store: &dyn Store) {
    let now = LOCAL_TIME;
    let namespace = Namespace::new(format!("commande-été-{}", RunId::new()), "1.0.0-β");
    let unicode = json!({
        "name": "Zoë Ærøskøbing — 東京 🚀 👩‍👩‍👧",
        "nul": "a\u{0}b",
        "quote": "\"'\\\n\t",
        "numbers": [0, -1, 1.5, 9007199254740993_u64, u64::MAX, i64::MIN, 1e300],
        "empty": {}, "list": [], "null": null, "bool": true
    });
    let mut new = new_run(&namespace, RunStatus::Queued, now);
    new.input = unicode.clone();
    new.reference_id = Some("réf-🚀".to_owned());
    new.pool = "pöol".to_owned();
    let run = create(store, new).await;
    assert_eq!(run.input, unicode);
    assert_eq!(store.get_run(run.id).await.expect("get_run").input, unicode);

    let claimed = store
        .claim(ClaimRequest {
            owner: "wörker".to_owned(),
            namespaces: vec![namespace.clone()],
            pool: "pöol".to_owned(),
            limit: 1,
            now,
        })
        .await
        .expect("claim")
        .remove(0);
    let deep = nested(100);
    let mut deep_entry = entry(run.id, "tâche:ünïcode", 0, now);
    deep_entry.status = EntryStatus::Completed;
    deep_entry.output = Some(deep.clone());
    store
        .put_entry(claimed.revision, deep_entry.clone())
        .await
        .expect("put_entry");
    store
        .append_event(event(run.id, "évènement", unicode.clone(), now))
        .await
        .expect("append");

    let large = json!({"blob": "x".repeat(1024 * 1024), "tail": "ok"});
    let mut complete = Transition::to(RunStatus::Completed, now + 1);
    complete.output = Some(large.clone());
    complete.output_fingerprint = Some("fp-ü".to_owned());
    store
        .transition(run.id, claimed.revision, complete)
        .await
        .expect("complete");

    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run.input, unicode);
    assert_eq!(history.run.namespace, namespace);
    assert_eq!(history.run.reference_id.as_deref(), Some("réf-🚀"));
    assert_eq!(history.run.output.as_ref(), Some(&large));
    assert_eq!(history.run.output_fingerprint.as_deref(), Some("fp-ü"));
    assert_eq!(history.entries, [deep_entry]);
    assert_eq!(history.events[0].data.as_ref(), Some(&unicode));
    assert_eq!(history.events[0].name, "évènement");
}

/// `load_history` returns the run with all its entries (by address, then index), sleeps and
/// events (by name, then index) and children, in one call.
pub async fn check_load_history(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker", now).await;
    let rev = run.revision;
    for (address, index) in [("b:2", 1), ("a:1", 0), ("b:2", 0), ("a:1", 1)] {
        store
            .put_entry(rev, entry(run.id, address, index, now))
            .await
            .expect("put_entry");
    }
    for (name, index) in [("z", 0), ("m", 1), ("m", 0)] {
        store
            .put_sleep(rev, sleep(run.id, name, index, now + 100))
            .await
            .expect("put_sleep");
    }
    for name in ["y", "x", "y"] {
        store
            .append_event(event(run.id, name, json!(name), now))
            .await
            .expect("append");
    }
    let (first, _) = start_child_run(store, &run, "first", now).await;
    let (second, _) = start_child_run(store, &run, "second", now + 1).await;

    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.run, store.get_run(run.id).await.expect("get_run"));
    let entries: Vec<(&str, u32)> = history
        .entries
        .iter()
        .map(|entry| (entry.address.as_str(), entry.index))
        .collect();
    assert_eq!(
        entries,
        [
            ("a:1", 0),
            ("a:1", 1),
            ("b:2", 0),
            ("b:2", 1),
            ("child:1.0.0:first", 0),
            ("child:1.0.0:second", 0)
        ]
    );
    let sleeps: Vec<(&str, u32)> = history
        .sleeps
        .iter()
        .map(|sleep| (sleep.name.as_str(), sleep.index))
        .collect();
    assert_eq!(sleeps, [("m", 0), ("m", 1), ("z", 0)]);
    let events: Vec<(&str, u32)> = history
        .events
        .iter()
        .map(|event| (event.name.as_str(), event.index))
        .collect();
    assert_eq!(events, [("x", 0), ("y", 0), ("y", 1)]);
    let mut children: Vec<RunId> = history.children.iter().map(|child| child.id).collect();
    children.sort();
    let mut expected = vec![first.id, second.id];
    expected.sort();
    assert_eq!(children, expected);
}
