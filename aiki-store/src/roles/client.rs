//! What a client or an operator does to runs: create, fork, send events, and act on them.

use async_trait::async_trait;

use super::ReadStore;
use crate::{
    AppendOutcome, ConfigKey, CreateOutcome, Millis, Move, NewEvent, NewFork, NewRun, RunAction,
    RunId, RunRecord, RuntimeConfig, ScheduleActed, ScheduleAction, ScheduleCreated,
    ScheduleRecord, StoreError,
};

/// The client role of the store contract: creating and forking runs, sending events, and the
/// operator's actions, each one atomic operation.
#[async_trait]
pub trait ClientStore: ReadStore {
    /// Creates a run, unless one with the same namespace and reference id exists, in which case
    /// that run is returned untouched as [`CreateOutcome::Existing`].
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError>;

    /// Creates a fork: the run and its carried entries, sleeps and events (their `run_id`s
    /// are set to the new run's), all or nothing. A run already holding the fork's namespace
    /// and reference id is returned as [`CreateOutcome::Existing`] and nothing is written, so
    /// forking twice with the same options gives the same fork.
    async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError>;

    /// Appends an event to its name's queue (dropped as [`AppendOutcome::Duplicate`] when its
    /// reference id was already seen for that run and name). A run awaiting an event is queued
    /// in the same operation. [`StoreError::NotFound`] for an unknown
    /// run; [`StoreError::InvalidTransition`] for a run that has ended;
    /// [`StoreError::Invalid`] for a name in the runtime's own namespace (starting with
    /// [`RESERVED_EVENT_PREFIX`](crate::RESERVED_EVENT_PREFIX)), nothing written.
    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError>;

    /// Applies an operator's action to run `id` at `now`, recorded as done by `actor`, as one
    /// compare-and-set: the run's status is read, checked against the action
    /// ([`RunAction::applies_to`]) and the action written, in one atomic operation, whatever
    /// executor or operator moves the run meanwhile. Returns the run as written.
    ///
    /// Pausing a `running` run asks for the pause without changing its revision, so that no
    /// write of its executor is fenced: the run's next new task attempt or child start is
    /// refused ([`StoreError::PauseRequested`]), its claim refresh says so, and its leaving
    /// `running` other than by ending lands in `paused` (recorded as done by `actor`; the
    /// first request stands). On a schema older than pause requests it pauses the run at once.
    /// Every other action is a transition that increments the revision.
    /// [`StoreError::NotFound`] for an unknown run; [`StoreError::InvalidTransition`] (`from`
    /// its status, `to` the action's) when the action does not apply, nothing written.
    async fn act(
        &self,
        id: RunId,
        action: RunAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<RunRecord, StoreError>;

    /// An operator's release of a `running` run's claim (its executor is gone), at revision
    /// `expected`, fenced as claim recovery's release is: back to `queued` (to `paused` when a
    /// pause was requested), its revision incremented, recorded as done by `actor`. With
    /// `confirm_ms`, only if claim recovery has marked the claim stale at least that long ago
    /// and it was not refreshed since (right after a store outage every executor looks gone,
    /// and the live ones refresh within that window): `None` otherwise, nothing changed.
    /// Without it (forced), whatever the claim's state. [`StoreError::RevisionConflict`] or
    /// [`StoreError::InvalidTransition`] when the run moved on or is not `running`.
    async fn release_claim(
        &self,
        id: RunId,
        expected: u64,
        now: Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<RunRecord>, StoreError>;

    /// Applies several transitions in one atomic operation, each checked as
    /// [`transition`](crate::ExecutorStore::transition) checks one: all are applied, in order, or none is,
    /// and the first refusal is returned. Returns the runs as written, in order. (A retry of
    /// a parent together with the child whose failure it observed.)
    async fn transition_all(&self, moves: Vec<Move>) -> Result<Vec<RunRecord>, StoreError>;

    /// Sets one key of the runtime configuration (an operator's change, at `now`), checked
    /// by [`ConfigKey::check`]: [`StoreError::Invalid`] for a value out of the key's range,
    /// nothing written. Returns the configuration now in force. A store whose schema predates
    /// the configuration table refuses with [`StoreError::Invalid`].
    async fn set_config(
        &self,
        key: ConfigKey,
        value: i64,
        now: Millis,
    ) -> Result<RuntimeConfig, StoreError>;

    /// Creates a schedule (made with [`ScheduleRecord::new`]; its revision is set to 1),
    /// recorded as done by `actor`, unless one of its name exists: that one, untouched, as
    /// [`ScheduleCreated::Existing`] when its definition is the same (creating a schedule twice
    /// is idempotent), [`StoreError::AlreadyExists`] when it differs. [`StoreError::Invalid`]
    /// for a definition that is not valid (see [`crate::schedule::check`]) or a schema without
    /// schedules, nothing written.
    async fn create_schedule(
        &self,
        schedule: ScheduleRecord,
        actor: Option<String>,
    ) -> Result<ScheduleCreated, StoreError>;

    /// Applies an operator's action to the schedule `name` at `now`, recorded as done by
    /// `actor`, as one atomic write (see [`ScheduleAction`]): its state, the runs it starts and
    /// the rows of its log, all or nothing. [`StoreError::NotFound`] for an unknown schedule;
    /// [`StoreError::Invalid`] for an action that does not apply (resuming an active schedule,
    /// a backfill range that ends before it starts or holds too many occurrences).
    async fn act_on_schedule(
        &self,
        name: &str,
        action: ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<ScheduleActed, StoreError>;
}
