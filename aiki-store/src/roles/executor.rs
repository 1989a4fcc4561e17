//! What an executor needs to run a claimed run: the claim, its history, its writes (each
//! revision-checked) and what it publishes about itself.

use async_trait::async_trait;

use super::ReadStore;
use crate::{
    CatalogEntry, ClaimRequest, ClaimState, Claimed, Continuation, Continued, EntryRecord,
    EventRecord, Millis, Namespace, NewRun, RunId, RunRecord, SleepRecord, StoreError,
    TaskDeclaration, Transition, WorkerRecord,
};

/// The executor role of the store contract: claiming runs, holding the claim, reading a run's
/// history and writing what its execution records, each write checked against the revision the
/// executor last saw, in the same atomic operation. A remote worker holds this role (and the
/// reads it extends), never the [`Sweeper`](crate::Sweeper)'s.
///
/// [`transition`](ExecutorStore::transition) and [`claim`](ExecutorStore::claim) increment the
/// revision; entry, sleep and claim-refresh writes check it without incrementing, so a run's
/// concurrent tasks do not fence each other.
#[async_trait]
pub trait ExecutorStore: ReadStore {
    /// Inserts or replaces the manifest entry at `(run, address, index)`, checking the run's
    /// revision without incrementing it. A `running` entry (a new attempt) is refused with
    /// [`StoreError::PauseRequested`] while a pause is requested of the run.
    ///
    /// The store owns the times: `updated_at` is the writer's time, and a retry's `retry_at`
    /// counts from it. A store with a clock of its own (the server; PostgreSQL by default)
    /// stamps the entry by that clock and moves `retry_at` with it, so a task retries after
    /// the delay its policy says whatever the writer's clock says. A suspension waiting on the
    /// retry is due at the time stored here (see [`transition`](ExecutorStore::transition)).
    async fn put_entry(&self, expected: u64, entry: EntryRecord) -> Result<(), StoreError>;

    /// Writes several entries of one run in one operation where the store can (one statement,
    /// one request): the runtime sends a task's result with the `running` record of the next
    /// call, so that a task step costs one round trip. Each entry is written or refused as
    /// [`put_entry`](ExecutorStore::put_entry) would write or refuse it alone (a pause refuses
    /// a `running` record and keeps the others); the first refusal, in order, is returned.
    /// No two entries may share an `(address, index)`.
    ///
    /// An output over the store's payload limit refuses the call, nothing written. The
    /// default writes them one by one. An `HttpStore` (feature `http`) sends them in one
    /// request with the writes its other runs make meanwhile; the runtime only calls it with
    /// more than one entry when [`payload_limit`](ExecutorStore::payload_limit) is known, which
    /// a server of the release before batches were served does not say.
    async fn put_entries(
        &self,
        expected: u64,
        entries: Vec<EntryRecord>,
    ) -> Result<(), StoreError> {
        // An output over the limit refuses the call before anything is written.
        if let Some(limit) = self.payload_limit() {
            for entry in &entries {
                limit.check_entry(entry)?;
            }
        }
        let mut first = Ok(());
        for entry in entries {
            let outcome = self.put_entry(expected, entry).await;
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    }

    /// The largest payload this store keeps, when the executor can know it before writing:
    /// the runtime then checks a task's output itself and lets the workflow go on while the
    /// output is written with the next call's `running` record
    /// ([`put_entries`](ExecutorStore::put_entries)). `None` (the default): every output is
    /// written before the workflow sees it.
    fn payload_limit(&self) -> Option<crate::limit::PayloadLimit> {
        None
    }

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
    /// without incrementing it, and returns it as stored.
    ///
    /// The store owns the wake time. With `from`, the sleep counts from now: `wake_at` is
    /// the writer's `from` plus what is left to sleep, on the writer's clock, and the store
    /// moves it onto its own (the store's time plus `wake_at - from`), so a writer whose clock
    /// is off still sleeps for the duration it meant. Without `from`, `wake_at` counts from an
    /// instant the store recorded (a lengthened sleep ends at its recorded end plus the added
    /// time) and is stored as given. A store that times its writes by its callers (SQLite,
    /// memory, PostgreSQL with `aiki_claim_clock=caller`) reads `from` as its time.
    async fn put_sleep(
        &self,
        expected: u64,
        sleep: SleepRecord,
        from: Option<Millis>,
    ) -> Result<SleepRecord, StoreError>;

    /// Records `slot` (an event record the run itself writes: a wait's timeout, a child outcome
    /// it observed) in its queue and index, unless that slot is taken. Checks the revision
    /// without incrementing. Returns whatever holds the slot now.
    async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError>;

    /// Records that the `index`-th wait for `name` timed out, unless an event already took that
    /// slot: [`record_event_slot`](ExecutorStore::record_event_slot) with a timeout record. Checks the
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

    /// Claims run `id` by name, for an executor it was delivered to (a push): as
    /// [`claim`](ExecutorStore::claim) claims, if the run is `queued` and of one of
    /// `request`'s namespaces (`request`'s pool, limit and skip list do not apply). Returns it
    /// in [`Claimed::runs`], or no run when it is not claimable now (another executor has it,
    /// it moved on, or it is of a version the caller does not serve). [`StoreError::NotFound`]
    /// for an unknown run.
    async fn claim_run(&self, request: ClaimRequest, id: RunId) -> Result<Claimed, StoreError>;

    /// Claims up to `limit` `queued` runs of the given namespaces and pool, oldest first: each
    /// becomes `running` with `owner` set, its heartbeat at `now` and its revision incremented.
    /// Concurrent claimers never get the same run.
    ///
    /// A store may time claims by a clock of its own instead of the callers' `now`
    /// (the claim's heartbeat and change time here, heartbeats in [`refresh_claim`](ExecutorStore::refresh_claim), staleness in
    /// [`release_stale_claims`](crate::Sweeper::release_stale_claims)), so that workers whose clocks
    /// disagree judge each other's claims alike: `PostgresStore` uses the server's clock
    /// unless told otherwise.
    ///
    /// With the runs, the store tells the executor the claim idle timeout in force
    /// ([`Claimed::claim_idle_timeout_ms`]): it must refresh each claim well within it.
    async fn claim(&self, request: ClaimRequest) -> Result<Claimed, StoreError>;

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

    /// Moves a run to a new status, checking `expected` against its revision and incrementing
    /// it. Leaving `running` clears the owner. Also, in the same operation:
    ///
    /// * a suspension whose [`WaitSpec`](crate::WaitSpec) already holds (the event is there, a
    ///   child already ended) is queued at `now` instead;
    /// * a run reaching a terminal status queues every run awaiting it (revision
    ///   incremented);
    /// * `cancel_sleeps` marks the run's pending sleeps cancelled;
    /// * `rerun` resets task entries to run again, `forget` deletes event records.
    ///
    /// A suspension waiting on task retries takes their times from the entries the store
    /// holds, and is due at the earliest time of its wait set
    /// ([`Transition::retry_times_from`](crate::Transition::retry_times_from)); its other times
    /// are its sleeps', stored by the store's clock (see
    /// [`put_sleep`](ExecutorStore::put_sleep)). A due time without a wait set counts from
    /// `now`: a store with a clock of its own moves it onto that clock
    /// ([`Transition::rebase`](crate::Transition::rebase)).
    ///
    /// Returns the run as written.
    async fn transition(
        &self,
        id: RunId,
        expected: u64,
        transition: Transition,
    ) -> Result<RunRecord, StoreError>;

    /// Ends `running` run `id` (at revision `expected`, claimed) by continuing it as a new
    /// run, in one operation:
    ///
    /// * the successor is created `queued`, with the predecessor's reference id (which the
    ///   predecessor gives up), pool, parent link and `traceparent`, and
    ///   [`continued_from`](RunRecord::continued_from) set;
    /// * the events the predecessor received and did not consume move to it (see
    ///   [`Continuation::consumed`]);
    /// * whatever waited on the predecessor now waits on the successor: suspended runs whose
    ///   wait set names it, and a schedule whose last run it was;
    /// * the predecessor moves to `completed`, without an output, its
    ///   [`continued_as`](RunRecord::continued_as) set, its revision incremented. Nothing
    ///   waiting on it wakes.
    ///
    /// A pause requested of the run does not hold the continuation (the successor is a new
    /// run, which an operator pauses in turn). Refused like [`transition`](ExecutorStore::transition)
    /// (a revision conflict, a run not `running`) with nothing written; with
    /// [`StoreError::AlreadyExists`] when the successor's workflow version already has a run of the
    /// reference id; with [`StoreError::TooLarge`] for an input over the payload limit.
    async fn continue_run(
        &self,
        id: RunId,
        expected: u64,
        continuation: Continuation,
    ) -> Result<Continued, StoreError>;

    /// Records a worker's heartbeat: inserts or replaces the worker's row, its last-seen time
    /// at `now` (PostgreSQL: by the claim clock, see [`claim`](ExecutorStore::claim)). Returns the row
    /// as written.
    async fn record_worker(
        &self,
        worker: WorkerRecord,
        now: Millis,
    ) -> Result<WorkerRecord, StoreError>;

    /// Publishes the catalog entry of one build of a workflow version, its publication time at
    /// `now` (PostgreSQL: by the claim clock, as [`record_worker`](ExecutorStore::record_worker)). The
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

    /// The process's feed of this store's hints that runs may be ready to claim, when the
    /// store sends them: PostgreSQL from schema 20 on (a `NOTIFY` when a run is queued;
    /// one listening connection per database and schema in the process). `None` (the
    /// default) when it does not: claimers poll. Not an operation of the contract (nothing is
    /// read or written); a hint is never a claim.
    fn ready_signals(&self) -> Option<crate::ReadySignals> {
        None
    }

    /// Reconciles the schedules declared in a worker's code at its start (each with origin
    /// [`ScheduleOrigin::Code`](crate::ScheduleOrigin::Code) and a generation), forward only
    /// (see [`crate::schedule::Declared`]): a new one is created, a higher generation replaces
    /// the stored definition, the same or a lower one leaves it; a stored schedule in code of a
    /// workflow version in `serves` that `declared` no longer holds becomes inactive. Each
    /// schedule is written atomically. [`StoreError::Invalid`] for an invalid declaration
    /// (nothing written) or a schema without schedules.
    async fn declare_schedules(
        &self,
        declared: Vec<crate::ScheduleRecord>,
        serves: Vec<crate::Namespace>,
        worker: &str,
        now: crate::Millis,
    ) -> Result<Vec<crate::schedule::Declared>, StoreError>;
}
