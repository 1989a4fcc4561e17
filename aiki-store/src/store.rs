use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    AppendOutcome, CatalogEntry, ChangeCursor, ChangePage, ClaimRequest, ClaimState, ClaimTiming,
    CreateOutcome, EntryRecord, EventRecord, History, ListRuns, Millis, Move, Namespace, NewEvent,
    NewFork, NewRun, RunCounts, RunId, RunPage, RunRecord, SleepRecord, StatusChange, StoreError,
    TaskDeclaration, Transition, WorkerRecord,
};

/// A shared, type-erased store.
pub type BoxStore = Arc<dyn Store>;

/// The storage contract of Aiki.
///
/// Every method is one atomic operation: SQL backends implement each as one statement or one
/// transaction. Writes an executor makes carry the revision it last saw (`expected`); the store
/// compares it with the run's revision in the same operation and returns
/// [`StoreError::RevisionConflict`] on a mismatch, writing nothing. [`Store::transition`] and
/// [`Store::claim`] increment the revision; entry, sleep and claim-refresh writes check it
/// without incrementing, so a run's concurrent tasks do not fence each other.
#[async_trait]
pub trait Store: Send + Sync + Debug + 'static {
    /// A short name of the backend (`memory`, `sqlite`, `postgres`), for logs and test names.
    fn backend(&self) -> &'static str;

    /// Creates a run, unless one with the same namespace and reference id exists, in which case
    /// that run is returned untouched as [`CreateOutcome::Existing`].
    async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError>;

    /// Creates a fork: the run and its carried entries, sleeps and events (their `run_id`s
    /// are set to the new run's), all or nothing. A run already holding the fork's namespace
    /// and reference id is returned as [`CreateOutcome::Existing`] and nothing is written, so
    /// forking twice with the same options gives the same fork.
    async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError>;

    /// One run. [`StoreError::NotFound`] if there is none.
    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError>;

    /// A run with everything it recorded: entries, sleeps, events and child runs, in one call.
    async fn load_history(&self, id: RunId) -> Result<History, StoreError>;

    /// Moves a run to a new status, checking `expected` against its revision and incrementing
    /// it. Leaving `running` clears the owner. Also, in the same operation:
    ///
    /// * a suspension whose [`WaitSpec`](crate::WaitSpec) already holds (the event is there, a
    ///   child already ended) lands in `scheduled`, due at `now`, instead;
    /// * a run reaching a terminal status wakes its parent if the parent is
    ///   `awaiting_child_workflow` (to `scheduled`, due now, revision incremented);
    /// * `cancel_sleeps` marks the run's pending sleeps cancelled;
    /// * `rerun` resets task entries to run again, `forget` deletes event records.
    ///
    /// Returns the run as written.
    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError>;

    /// Applies several transitions in one atomic operation, each checked as
    /// [`transition`](Store::transition) checks one: all are applied, in order, or none is,
    /// and the first refusal is returned. Returns the runs as written, in order. (A retry of
    /// a parent together with the child whose failure it observed.)
    async fn transition_all(&self, moves: Vec<Move>) -> Result<Vec<RunRecord>, StoreError>;

    /// Claims up to `limit` `queued` runs of the given namespaces and pool, oldest first: each
    /// becomes `running` with `owner` set, its heartbeat at `now` and its revision incremented.
    /// Concurrent claimers never get the same run.
    ///
    /// A store may time claims by a clock of its own instead of the callers' `now`
    /// (heartbeats here and in [`refresh_claim`](Store::refresh_claim), staleness in
    /// [`release_stale_claims`](Store::release_stale_claims)), so that workers whose clocks
    /// disagree judge each other's claims alike: `PostgresStore` uses the server's clock
    /// unless told otherwise.
    async fn claim(&self, request: ClaimRequest) -> Result<Vec<RunRecord>, StoreError>;

    /// Refreshes a claim: checks the revision and owner (without incrementing), sets the
    /// heartbeat to `now` and clears a stale mark. Returns what the executor must know of the
    /// run: whether a pause was requested.
    async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<ClaimState, StoreError>;

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

    /// Asks to pause a `running` run without changing its revision, so that no write of its
    /// executor is fenced: the run's next new task attempt or child start is refused
    /// ([`StoreError::PauseRequested`]), and its leaving `running` other than by ending lands
    /// in `paused` (recorded as done by `actor`). Returns the run with the request, or `None`
    /// when it is not `running` (pause it with a transition).
    async fn request_pause(
        &self,
        id: RunId,
        actor: Option<String>,
        now: Millis,
    ) -> Result<Option<RunRecord>, StoreError>;

    /// Inserts or replaces the manifest entry at `(run, address, index)`, checking the run's
    /// revision without incrementing it. A `running` entry (a new attempt) is refused with
    /// [`StoreError::PauseRequested`] while a pause is requested of the run.
    async fn put_entry(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError>;

    /// Starts a child run: inserts its manifest entry in the parent (checking the parent's
    /// revision) and creates the child, in one operation. If the child's namespace and
    /// reference id already name a run, no run is created and the entry points at that one.
    /// Returns the child run. Refused with [`StoreError::PauseRequested`] while a pause is
    /// requested of the parent: nothing is written.
    async fn start_child(
        &self,
        expected: u64,
        entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError>;

    /// Inserts or replaces the sleep at `(run, name, index)`, checking the run's revision
    /// without incrementing it.
    async fn put_sleep(&self, expected: u64, sleep: SleepRecord) -> Result<(), StoreError>;

    /// Appends an event to its name's queue (dropped as [`AppendOutcome::Duplicate`] when its
    /// reference id was already seen for that run and name). A run in `awaiting_event` is woken
    /// to `scheduled` (due now) in the same operation. [`StoreError::NotFound`] for an unknown
    /// run; [`StoreError::InvalidTransition`] for a run that has ended.
    async fn append_event(&self, event: NewEvent) -> Result<AppendOutcome, StoreError>;

    /// Every status change of a run, oldest first: its creation, then one per change (from,
    /// to, reason, revision, time, the executor involved). Written by the statements that change
    /// the status, not by extra calls. Changes made before the store kept a timeline are not in
    /// it. [`StoreError::NotFound`] for an unknown run.
    async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError>;

    /// Records a worker's heartbeat: inserts or replaces the worker's row, its last-seen time
    /// at `now` (PostgreSQL: by the claim clock, see [`claim`](Store::claim)). Returns the row
    /// as written.
    async fn record_worker(
        &self,
        worker: WorkerRecord,
        now: Millis,
    ) -> Result<WorkerRecord, StoreError>;

    /// The workers seen within `within_ms` before `now` (by the same clock as
    /// [`record_worker`](Store::record_worker)), by id.
    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError>;

    /// Publishes the catalog entry of one build of a workflow version, its publication time at
    /// `now` (PostgreSQL: by the claim clock, as [`record_worker`](Store::record_worker)). The
    /// first publication of a build (version and fingerprint) wins: equal fingerprints declare
    /// the same things, so a restarted pod of a build changes nothing, and entries of the
    /// version's other builds stay. Returns the build's entry as stored, with the tasks its runs
    /// were seen calling.
    async fn publish_catalog(
        &self,
        entry: CatalogEntry,
        now: Millis,
    ) -> Result<CatalogEntry, StoreError>;

    /// Records tasks the runs of one build were seen calling that it may not declare
    /// (`WorkerBuilder::task` is optional for tasks a workflow calls): the catalog lists them with
    /// the build's declared ones. A task already known for the build stays as it was.
    ///
    /// A store whose schema predates the contract migration keeps nothing.
    async fn add_catalog_tasks(
        &self,
        namespace: &Namespace,
        fingerprint: &str,
        tasks: Vec<TaskDeclaration>,
    ) -> Result<(), StoreError>;

    /// Every published catalog entry, by workflow name and version, then oldest publication
    /// first: one per build (fingerprint) of each version, with the tasks its runs were seen
    /// calling.
    async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError>;

    /// Forgets the workers not seen within `older_than_ms` before `now` (by the clock of
    /// [`record_worker`](Store::record_worker)): retention of the worker list, whose rows would
    /// otherwise grow with every process start. Returns how many went.
    async fn prune_workers(&self, now: Millis, older_than_ms: i64) -> Result<u64, StoreError>;

    /// Records `slot` (an event record the run itself writes: a wait's timeout, a child outcome
    /// it observed) in its queue and index, unless that slot is taken. Checks the revision
    /// without incrementing. Returns whatever holds the slot now.
    async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError>;

    /// Records that the `index`-th wait for `name` timed out, unless an event already took that
    /// slot: [`record_event_slot`](Store::record_event_slot) with a timeout record. Checks the
    /// revision without incrementing. Returns whatever holds the slot now.
    async fn record_event_timeout(
        &self,
        id: RunId,
        expected: u64,
        name: &str,
        index: u32,
        now: Millis,
    ) -> Result<EventRecord, StoreError> {
        self.record_event_slot(expected, EventRecord::timeout(id, name, index, now))
            .await
    }

    /// Moves every `scheduled`, `sleeping`, `awaiting_event`, `awaiting_retry` and
    /// `awaiting_child_workflow` run whose `due_at` is at or before `now` to `queued`
    /// (incrementing revisions). Returns how many moved.
    async fn wake_due(&self, now: Millis) -> Result<u64, StoreError>;

    /// Claim recovery, in two phases recorded on the runs, so that it survives restarts and
    /// store outages whichever process sweeps (times by the store's claim clock, see
    /// [`claim`](Store::claim)):
    ///
    /// * marks (`claim_stale_since`) every `running` run whose heartbeat is older than
    ///   `timing.confirm_ms`, unless marked since its last refresh;
    /// * releases every `running` run whose heartbeat is older than `timing.idle_timeout_ms`
    ///   and which was marked at least `timing.confirm_ms` ago without a refresh since: back
    ///   to `queued` (to `paused` when a pause was requested), clearing its owner and
    ///   incrementing its revision.
    ///
    /// A live executor refreshes within one refresh interval of the store answering it, so
    /// after an outage it is never released, while a dead one's run is, at the latest one
    /// confirmation window after the first sweep that sees it stale. Returns the released
    /// runs.
    async fn release_stale_claims(
        &self,
        now: Millis,
        timing: ClaimTiming,
    ) -> Result<Vec<RunId>, StoreError>;

    /// Moves every run `queued` since before `now - max_age_ms` to `stalled`. Returns how many.
    async fn stall_undelivered(&self, now: Millis, max_age_ms: i64) -> Result<u64, StoreError>;

    /// The change stream: up to `limit` status changes after `cursor`, and the cursor that
    /// follows them. A reader that follows the cursors gets every committed change exactly
    /// once, in the order they were made within what committed together (the order of the
    /// changes one statement makes, a child's end and the wake-up of its parent, is not
    /// specified). An empty page means the reader is caught up for now. With `limit` 0, no
    /// changes and a cursor at the end of the stream now (to read only what comes next).
    /// [`StoreError::Invalid`] for a cursor the store did not hand out.
    async fn changes_since(
        &self,
        cursor: &ChangeCursor,
        limit: u32,
    ) -> Result<ChangePage, StoreError>;

    /// Per workflow version with any runs: how many are in each status, and since when the
    /// oldest queued one has waited; ordered by workflow and version. One read, for a metrics
    /// scrape or an overview of every version.
    async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError>;

    /// One page of the runs passing the request's filter, newest first (by creation time, then
    /// id), starting after its cursor. Paging through never repeats or skips a run whose
    /// filtered fields do not change meanwhile.
    async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError>;
}
