//! The conformance suite every backend must pass.
//!
//! Each check is a plain `async fn` over a [`Store`]; [`conformance_tests!`](crate::conformance_tests)
//! stamps out one `#[tokio::test]` per check for a store factory, in one module per role trait
//! whose operations the check is about (`read::`, `executor::`, `client::`, `sweeper::`):
//!
//! ```no_run
//! aiki_store::conformance_tests!(async { aiki_store::connect("memory:").await.unwrap() });
//! # fn main() {}
//! ```
//!
//! Checks create their own runs with fresh random ids, namespaces and reference ids, so many
//! can share one database at once. The checks of the operations that sweep every run
//! ([`Sweeper::wake_due`], [`Sweeper::release_stale_claims`], [`Sweeper::stall_undelivered`]) take a
//! process-wide lock and use times around [`GLOBAL_TIME`], far
//! below [`LOCAL_TIME`], the time every other check uses, so a sweep never touches another
//! check's runs. Checks assert error kinds, never messages.
//!
//! The checks live in one file per topic (runs, claims, entries, sleeps, events, sweeps,
//! concurrency); this module holds the list of checks, the macro and the shared record builders.
//! The module is compiled with the `conformance` feature; the crate using the macro needs
//! `tokio` with the `macros` and `rt-multi-thread` features.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use serde_json::{Value, json};

#[allow(unused_imports)]
use crate::prelude::*;
use crate::{
    AppendOutcome, ClaimRequest, CreateOutcome, EntryKind, EntryRecord, EntryStatus, EventRecord,
    Failure, Millis, Namespace, NewEvent, NewRun, ParentLink, RunAction, RunId, RunRecord,
    RunStatus, SleepRecord, Store, StoreError, Transition, WaitSpec,
};

mod actions;
mod claims;
mod concurrency;
mod config;
mod continuation;
mod counts;
mod endpoints;
mod entries;
mod events;
mod keys;
mod leases;
mod limits;
mod operations;
mod outbox;
mod pause;
mod purge;
mod recovery;
mod runs;
mod schedule_code;
mod schedule_dst;
mod schedule_sweeps;
mod schedules;
mod sleeps;
mod sweeps;
mod timeline;
mod together;
mod waits;
mod wakes;
mod wire;
mod workers;

pub use actions::*;
pub use claims::*;
pub use concurrency::*;
pub use config::*;
pub use continuation::*;
pub use counts::*;
pub use endpoints::*;
pub use entries::*;
pub use events::*;
pub use keys::*;
pub use leases::*;
pub use limits::*;
pub use operations::*;
pub use outbox::{
    check_changes_since_gives_every_change_once, check_changes_since_under_concurrent_writers,
};
pub use pause::*;
pub use purge::*;
pub use recovery::*;
pub use runs::*;
pub use schedule_code::*;
pub use schedule_dst::*;
pub use schedule_sweeps::*;
pub use schedules::*;
pub use sleeps::*;
pub use sweeps::*;
pub use timeline::*;
pub use together::*;
pub use waits::*;
pub use wakes::*;
pub use wire::*;
pub use workers::*;

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
        $crate::conformance_tests!(@group $factory; read: [
                check_load_history,
                check_backend_has_a_name,
                check_unknown_run_is_not_found,
                check_timeline_records_every_status_change,
                check_changes_since_gives_every_change_once,
                check_changes_since_under_concurrent_writers,
                check_the_timeline_names_the_operator,
                check_wakes_are_worded_by_what_woke_them,
                check_run_counts,
                check_list_runs_pages_newest_first,
                check_list_runs_filters,
                check_values_round_trip,
                check_records_round_trip_through_json,
            ]);
        $crate::conformance_tests!(@group $factory; executor: [
                check_transition_checks_and_increments_revision,
                check_transition_refuses_moves_outside_the_table,
                check_transition_writes_output_error_and_attempts,
                check_leaving_running_clears_the_owner,
                check_suspension_after_its_event_is_queued_at_once,
                check_suspension_after_its_child_ended_is_queued_at_once,
                check_terminal_child_wakes_waiting_parent,
                check_wait_set_is_stored_with_the_suspension,
                check_child_end_wakes_every_run_awaiting_it,
                check_all_of_wait_wakes_once,
                check_first_of_a_child_and_an_event_wakes_the_run,
                check_retries_are_worded_and_completion_clears_the_error,
                check_worker_heartbeats,
                check_catalog_entries,
                check_workers_say_their_build_and_when_they_stop_and_are_pruned,
                check_cancel_sleeps,
                check_claim_filters_orders_and_limits,
                check_claim_skips_the_runs_it_is_told_to,
                check_a_run_is_claimed_by_name_once,
                check_a_claim_tells_the_idle_timeout_in_force,
                check_refresh_claim,
                check_put_entry,
                check_put_entries,
                check_a_suspension_on_a_task_retry_is_due_when_its_entry_says,
                check_put_sleep,
                check_start_child,
                check_record_event_timeout,
                check_zombie_executor_is_fenced,
                check_concurrent_claimers_never_share_a_run,
                check_concurrent_put_entry_outcomes_are_each_their_own,
                check_concurrent_put_entry_racing_a_transition,
                check_executor_writes_over_the_payload_limit_are_refused,
                check_a_run_continues_as_new_in_one_operation,
                check_a_parent_waits_on_through_a_childs_continuation,
            ]);
        $crate::conformance_tests!(@group $factory; client: [
                check_create_run,
                check_create_run_dedupes_by_reference,
                check_create_run_refuses_a_taken_id,
                check_any_event_wakes_a_run_awaiting_one,
                check_an_event_wakes_only_runs_awaiting_one,
                check_append_event,
                check_a_sent_event_cannot_take_a_wait_records_name,
                check_retry_moves_a_failed_run_back_and_resets_its_call,
                check_transition_all_moves_every_run_or_none,
                check_fork_creates_a_run_with_its_carried_history_once,
                check_an_operator_releases_a_claim_once_confirmed_stale,
                check_a_pause_request_fences_no_write_in_flight,
                check_a_run_ends_whatever_its_pause_request,
                check_runtime_config_is_set_one_key_at_a_time,
                check_an_operator_action_applies_only_where_it_may,
                check_operator_actions_race_without_repeating_a_move,
                check_a_run_cancelled_after_a_failed_attempt_reports_no_error,
                check_client_writes_over_the_payload_limit_are_refused,
            ]);
        $crate::conformance_tests!(@group $factory; operations: [
                check_a_repeated_write_gets_its_first_answer,
                check_a_refused_write_records_no_answer,
                check_answers_are_forgotten_after_their_time,
                check_a_repeat_sent_as_new_gets_the_first_answer,
                check_an_operation_id_reused_for_another_request_is_refused,
            ]);
        $crate::conformance_tests!(@group $factory; keys: [
                check_api_keys_are_kept_found_and_revoked,
                check_endpoints_are_written_by_compare_and_set,
            ]);
        $crate::conformance_tests!(@group $factory; schedules: [
                check_schedules_are_created_once_and_checked,
                check_schedule_actions,
                check_a_backfill_starts_one_run_per_occurrence,
                check_a_schedule_log_keeps_its_newest_rows,
                check_racing_sweepers_fire_each_occurrence_once,
                check_a_frozen_leader_and_a_version_move_fire_each_occurrence_once,
                check_an_outage_under_each_policy_and_window,
                check_an_occurrence_buffered_across_a_pause_keeps_its_window,
                check_daylight_saving_changes,
                check_a_repeated_schedule_action_is_done_once,
                check_schedules_in_code_are_reconciled_forward_only,
                check_a_paused_schedule_no_longer_declared_is_removed_for_good,
                check_stale_writes_and_backfills_are_refused_or_kept_apart,
                check_schedule_writes_over_the_payload_limit_are_refused,
            ]);
        $crate::conformance_tests!(@group $factory; sweeper: [
                check_a_lease_has_one_holder_at_a_time,
                check_a_lapsed_leases_sweeps_do_nothing,
                check_wake_due,
                check_release_stale_claims,
                check_stall_undelivered,
                check_sweeps_take_at_most_their_limit,
                check_recovery_pauses_a_run_with_a_pause_request,
                check_a_purge_takes_ended_runs_and_only_them,
                check_a_purge_takes_at_most_its_limit_under_its_lease,
                check_a_purge_asked_for_young_runs_takes_them,
            ]);
    };
    (@group $factory:expr; $group:ident: [$($check:ident),* $(,)?]) => {
        /// The checks of one role trait.
        mod $group {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let fixture = $factory.await;
                    if let Some(store) = $crate::conformance::Fixture::store(&fixture) {
                        $crate::conformance::$check(store).await;
                    }
                }
            )*
        }
    };
}

fn namespace() -> Namespace {
    Namespace::new(format!("conformance-{}", RunId::new()), "1.0.0")
}

/// The input hash of `input`, as `aiki::address` computes it and a server checks it:
/// `hex(sha256(canonical({"input": input})))`.
pub(crate) fn input_hash(input: &serde_json::Value) -> String {
    use sha2::Digest;
    let canonical = serde_json_canonicalizer::to_string(&json!({ "input": input }))
        .expect("BUG: JSON canonicalizes");
    hex::encode(sha2::Sha256::digest(canonical.as_bytes()))
}

/// `run` with the input hash of its input (after a check changed the input).
pub(crate) fn rehashed(mut run: NewRun) -> NewRun {
    run.input_hash = input_hash(&run.input);
    run
}

fn new_run(namespace: &Namespace, status: RunStatus, now: Millis) -> NewRun {
    NewRun {
        id: RunId::new(),
        namespace: namespace.clone(),
        input: json!({"order": 1}),
        input_hash: input_hash(&json!({"order": 1})),
        reference_id: None,
        pool: "default".to_owned(),
        status,
        due_at: None,
        parent: None,
        traceparent: None,
        lineage: None,
        actor: None,
        continued_from: None,
        now,
    }
}

async fn create(store: &dyn Store, run: NewRun) -> RunRecord {
    match store.create_run(run).await.expect("create_run") {
        CreateOutcome::Created(run) => run,
        CreateOutcome::Existing(run) => panic!("expected a new run, got existing {run:?}"),
    }
}

/// Claims expire after 90 s; executors refresh every 30 s (a stale mark confirms after 37.5 s).
const TIMING: crate::ClaimTiming = crate::ClaimTiming {
    idle_timeout_ms: 90_000,
    confirm_ms: 37_500,
    marks_trusted_since: None,
};

/// Claim recovery at `now`, and again one confirmation window later: what the two sweeps
/// released.
/// A lease of the check's own to sweep under, held for years from `now`: sweeps are fenced
/// by the lease they are given, whatever its name.
async fn leader(store: &dyn Store, now: Millis) -> crate::Lease {
    let name = format!("conformance-{}", RunId::new());
    let lease = store
        .acquire_lease(&name, "conformance", 10 * 365 * 86_400_000, now)
        .await
        .expect("acquire_lease");
    assert_eq!(lease.holder, "conformance", "a fresh lease is free");
    lease
}

async fn release_confirmed(store: &dyn Store, now: Millis) -> Vec<RunId> {
    let lease = leader(store, now).await;
    let mut released = store
        .release_stale_claims(&lease, now, TIMING, 100)
        .await
        .expect("mark");
    released.extend(
        store
            .release_stale_claims(&lease, now + TIMING.confirm_ms, TIMING, 100)
            .await
            .expect("release"),
    );
    released
}

fn claim_request(namespace: &Namespace, owner: &str, limit: u32, now: Millis) -> ClaimRequest {
    ClaimRequest::new(owner, vec![namespace.clone()], "default", limit, now)
}

/// A fresh run claimed by `owner` at `now` (revision 2, `running`).
async fn running(store: &dyn Store, owner: &str, now: Millis) -> RunRecord {
    let namespace = namespace();
    let run = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let claimed = store
        .claim(claim_request(&namespace, owner, 1, now))
        .await
        .expect("claim")
        .runs;
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
        input: None,
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
        actor: None,
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

/// Suspends `parent` (running, at its revision) awaiting `child` at `now`.
async fn await_child(
    store: &dyn Store,
    parent: &RunRecord,
    child: RunId,
    now: Millis,
) -> RunRecord {
    let mut suspend = Transition::to(RunStatus::AwaitingChildWorkflow, now);
    suspend.wait = Some(WaitSpec::default().child(child));
    let waiting = store
        .transition(parent.id, parent.revision, suspend)
        .await
        .expect("suspend");
    assert_eq!(waiting.status, RunStatus::AwaitingChildWorkflow);
    waiting
}

/// Claims run `run`, the one queued run of its namespace, at `now`.
async fn claim_alone(store: &dyn Store, run: &RunRecord, now: Millis) -> RunRecord {
    let claimed = store
        .claim(claim_request(&run.namespace, "worker", 1, now))
        .await
        .expect("claim")
        .runs;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, run.id);
    claimed.into_iter().next().expect("one run")
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
