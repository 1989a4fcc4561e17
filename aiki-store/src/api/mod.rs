//! The HTTP API's wire shapes: the path of every route and the body of every request that is
//! not one of the contract's own records. `aiki-server` serves them and
//! [`HttpStore`](crate::http::HttpStore) (feature `http`) calls them, so both sides name each
//! route and field once, here.
//!
//! Every route is under [`PREFIX`]; a request body and a success body are JSON; an error is an
//! [`ErrorBody`](crate::ErrorBody) with the status [`status_of`] gives. A route's role (what an
//! API key's scope will have to allow) is the role trait its operation belongs to.
//!
//! Times: a request that carries the caller's `now` (an operation's own or a record's) is
//! stamped by the server's clock instead, unless the server was built to trust its callers'
//! clocks (tests that share one injected clock with the server do).

use serde::{Deserialize, Serialize};

use crate::{
    CatalogEntry, ChangeCursor, EntryRecord, EventRecord, Millis, Namespace, NewRun, RunAction,
    SleepRecord, StoreError, TaskDeclaration, Transition, WorkerRecord,
};

mod reads;

pub use reads::{ListRunsQuery, READ_POSTS};

/// The prefix of every route of this version of the API.
pub const PREFIX: &str = "/api/v1";

/// The routes, relative to [`PREFIX`], in axum's path syntax (`{id}` is a run id).
pub mod path {
    /// `GET`: the server answers (no store access). Liveness.
    pub const HEALTH: &str = "/health";
    /// `GET`: the store answers. Readiness.
    pub const READY: &str = "/ready";
    /// `GET` → [`WhoAmI`](super::WhoAmI): the key the request was made with (any scope).
    pub const WHOAMI: &str = "/whoami";
    /// `GET` → Prometheus (OpenMetrics) text: the store's queue gauges and this server
    /// process's metrics (read).
    pub const METRICS: &str = "/metrics";
    /// `POST` [`NewRun`](crate::NewRun) → [`CreateOutcome`](crate::CreateOutcome) (client).
    pub const RUNS: &str = "/runs";
    /// `GET` with [`ListRunsQuery`](super::ListRunsQuery) → [`RunPage`](crate::RunPage)
    /// (read). (`POST` [`ListRuns`](crate::ListRuns), the previous release's form, is answered
    /// too, for this release only: see [`READ_POSTS`](super::READ_POSTS).)
    pub const RUNS_LIST: &str = "/runs/list";
    /// `GET` → `[RunCounts]` (read).
    pub const RUNS_COUNTS: &str = "/runs/counts";
    /// `GET` → [`RunRecord`](crate::RunRecord) (read).
    pub const RUN: &str = "/runs/{id}";
    /// `GET` → [`History`](crate::History) (read).
    pub const HISTORY: &str = "/runs/{id}/history";
    /// `GET` → `[StatusChange]` (read).
    pub const TIMELINE: &str = "/runs/{id}/timeline";
    /// `POST` [`PutEntry`](super::PutEntry) → `null` (executor).
    pub const ENTRIES: &str = "/runs/{id}/entries";
    /// `POST` [`PutEntries`](super::PutEntries) → `null` (executor): several entries of the
    /// run in one request (`ExecutorStore::put_entries`).
    pub const ENTRY_BATCH: &str = "/runs/{id}/entries/batch";
    /// `POST` [`PutEntryWrites`](super::PutEntryWrites) → `[ErrorBody | null]` (executor): the
    /// entry writes of several runs in one request, each checked against its own run's
    /// revision and answered on its own, in order (`null`: written). An `HttpStore` sends what
    /// its runs wrote while its previous request was in flight (group commit, see
    /// [`crate::batch`]).
    pub const ENTRY_WRITES: &str = "/entries";
    /// `POST` [`StartChild`](super::StartChild) → the child's [`RunRecord`](crate::RunRecord)
    /// (executor).
    pub const CHILDREN: &str = "/runs/{id}/children";
    /// `POST` [`PutSleep`](super::PutSleep) → the stored [`SleepRecord`](crate::SleepRecord)
    /// when the body has `from`, else `null` (executor).
    pub const SLEEPS: &str = "/runs/{id}/sleeps";
    /// `POST` [`RecordEventSlot`](super::RecordEventSlot) → [`EventRecord`](crate::EventRecord)
    /// (executor).
    pub const EVENT_SLOTS: &str = "/runs/{id}/event-slots";
    /// `POST` [`ClaimRequest`](crate::ClaimRequest) → [`Claimed`](crate::Claimed): the claim of
    /// this run by name (executor).
    pub const CLAIM_RUN: &str = "/runs/{id}/claim";
    /// `POST` [`RefreshClaim`](super::RefreshClaim) → [`ClaimState`](crate::ClaimState)
    /// (executor).
    pub const REFRESH: &str = "/runs/{id}/refresh";
    /// `POST` [`TransitionRun`](super::TransitionRun) → [`RunRecord`](crate::RunRecord)
    /// (executor).
    pub const TRANSITION: &str = "/runs/{id}/transition";
    /// `POST` [`ContinueRun`](super::ContinueRun) → [`Continued`](crate::Continued)
    /// (executor).
    pub const CONTINUATION: &str = "/runs/{id}/continuation";
    /// `POST` [`NewEvent`](crate::NewEvent) → [`AppendOutcome`](crate::AppendOutcome) (client).
    pub const EVENTS: &str = "/runs/{id}/events";
    /// `POST` [`Act`](super::Act) → [`RunRecord`](crate::RunRecord) (client).
    pub const ACTIONS: &str = "/runs/{id}/actions";
    /// `POST` [`ReleaseClaim`](super::ReleaseClaim) → `RunRecord | null` (client).
    pub const RELEASE: &str = "/runs/{id}/release";
    /// `POST` [`NewFork`](crate::NewFork) → [`CreateOutcome`](crate::CreateOutcome) (client).
    pub const FORKS: &str = "/forks";
    /// `POST` `[Move]` → `[RunRecord]`: several transitions, all or none (client).
    pub const TRANSITIONS: &str = "/transitions";
    /// `POST` [`ClaimRequest`](crate::ClaimRequest) → [`Claimed`](crate::Claimed) (executor);
    /// with [`ClaimWait`](super::ClaimWait) as its query, a claim that finds nothing waits up
    /// to `wait_ms` for a run to be queued (long-polling).
    pub const CLAIMS: &str = "/claims";
    /// `GET` with [`WorkersQuery`](super::WorkersQuery) → `[WorkerRecord]` (read); `POST`
    /// [`RecordWorker`](super::RecordWorker) → [`WorkerRecord`](crate::WorkerRecord)
    /// (executor).
    pub const WORKERS: &str = "/workers";
    /// `GET` → `[CatalogEntry]` (read); `POST` [`PublishCatalog`](super::PublishCatalog) →
    /// [`CatalogEntry`](crate::CatalogEntry) (executor).
    pub const CATALOG: &str = "/catalog";
    /// `POST` [`AddCatalogTasks`](super::AddCatalogTasks) → `null` (executor).
    pub const CATALOG_TASKS: &str = "/catalog/tasks";
    /// `GET` with [`ChangesSince`](super::ChangesSince) as its query →
    /// [`ChangePage`](crate::ChangePage) (read). (`POST` with it as the body: the previous
    /// release's form, see [`READ_POSTS`](super::READ_POSTS).)
    pub const CHANGES: &str = "/changes";
    /// `GET` → [`RuntimeConfig`](crate::RuntimeConfig) (read).
    pub const CONFIG: &str = "/config";
    /// `PUT` [`SetConfig`](super::SetConfig) → [`RuntimeConfig`](crate::RuntimeConfig): one key,
    /// by its product name (client).
    pub const CONFIG_KEY: &str = "/config/{key}";
    /// `GET` → `[ScheduleRecord]` (read); `POST` [`CreateSchedule`](super::CreateSchedule) →
    /// [`ScheduleCreated`](crate::ScheduleCreated) (client).
    pub const SCHEDULES: &str = "/schedules";
    /// `GET` with [`ScheduleQuery`](super::ScheduleQuery) as its query →
    /// [`ScheduleRecord`](crate::ScheduleRecord) (read). Schedules are named in the query, not
    /// the path, since a name may hold any character. (`POST` with it as the body: the previous
    /// release's form, see [`READ_POSTS`](super::READ_POSTS).)
    pub const SCHEDULE: &str = "/schedules/show";
    /// `GET` with [`ScheduleQuery`](super::ScheduleQuery) as its query → `[ScheduleLogEntry]`
    /// (read). (`POST`: the previous release's form.)
    pub const SCHEDULE_LOG: &str = "/schedules/log";
    /// `POST` [`ActOnSchedule`](super::ActOnSchedule) → [`ScheduleActed`](crate::ScheduleActed)
    /// (client).
    pub const SCHEDULE_ACTIONS: &str = "/schedules/actions";
    /// `POST` [`DeclareSchedules`](super::DeclareSchedules) →
    /// `[Declared]` (executor): a worker's schedules in code, reconciled at its start.
    pub const SCHEDULES_DECLARED: &str = "/schedules/declared";
}

/// The header naming one operation (a UUID the client makes per operation, sent again with
/// each repeat of it): a server answers a repeat with the first answer, kept in the store with
/// the write (see [`crate::operation`]), so an operation whose answer was lost on the way can
/// be sent again, to any server in front of the store, without being done twice.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Sent (`true`) with the first send of an operation whose [`IDEMPOTENCY_KEY`] the client has
/// just made: no answer can have been recorded for it, so the store need not look for one (a
/// statement saved per write). A repeat is sent without it. Sent wrongly on a repeat, it costs
/// correctness nothing but the first answer of a write that the repeat's own checks refuse:
/// a write the repeat does is rolled back for the answer already recorded.
pub const FRESH_OPERATION: &str = "aiki-fresh-operation";

/// The error code of a route the server does not serve ([`ErrorBody::code`](crate::ErrorBody)):
/// a server of an earlier release answers it, with 404, to a route added since.
pub const NO_ROUTE: &str = "no_route";

/// The most entries one [`PutEntries`] carries (an `HttpStore` sends more in several requests).
pub const MAX_ENTRY_BATCH: usize = 1_000;

/// The most writes one [`PutEntryWrites`] carries: what one batch of [`crate::batch`] holds.
pub const MAX_ENTRY_WRITES: usize = 2 * crate::batch::MAX_BATCH;

/// Sent by a server with every answer: the largest payload its store keeps, in bytes of JSON
/// text (`ExecutorStore::payload_limit`). A server that sends it also serves
/// [`path::ENTRY_BATCH`].
pub const PAYLOAD_LIMIT: &str = "aiki-payload-limit";

/// The longest a claim may wait for work ([`ClaimWait::wait_ms`] is capped to it, and to a
/// second below the server's request timeout).
pub const MAX_CLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The query of a `POST` to [`path::CLAIMS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimWait {
    /// How long a claim that finds nothing waits for a run to be queued (ms); 0 answers at
    /// once.
    #[serde(default)]
    pub wait_ms: u64,
}

/// The answer of [`path::WHOAMI`]: the key in use, as the server knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoAmI {
    /// The key's id; `None` when the server checks no keys.
    pub key: Option<String>,
    /// The key's name.
    pub name: Option<String>,
    /// What the key may do (every scope when the server checks no keys).
    pub scopes: Vec<crate::Scope>,
    /// Whether the server checks keys.
    pub auth: bool,
}

/// The body of [`path::ENTRY_BATCH`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PutEntries {
    /// The revision the executor last saw.
    pub expected: u64,
    /// The entries, each of the run the path names, in the order they are written.
    pub entries: Vec<EntryRecord>,
}

/// The body of [`path::ENTRIES`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PutEntry {
    /// The revision the executor last saw.
    pub expected: u64,
    /// The entry.
    pub entry: EntryRecord,
}

/// The body of [`path::ENTRY_WRITES`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PutEntryWrites {
    /// The writes, of any runs, each with the revision its executor last saw of its run; no
    /// two of one `(run, address, index)`.
    pub writes: Vec<PutEntry>,
}

/// The body of [`path::CHILDREN`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartChild {
    /// The parent's revision the executor last saw.
    pub expected: u64,
    /// The parent's entry of the child start.
    pub entry: EntryRecord,
    /// The child.
    pub child: NewRun,
}

/// The body of [`path::SLEEPS`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PutSleep {
    /// The revision the executor last saw.
    pub expected: u64,
    /// The sleep.
    pub sleep: SleepRecord,
    /// The writer's time the wake time counts from (see
    /// [`ExecutorStore::put_sleep`](crate::ExecutorStore::put_sleep)). Sent by this release on;
    /// the answer is then the sleep as stored, by the server's clock, and `null` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Millis>,
}

/// The body of [`path::EVENT_SLOTS`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordEventSlot {
    /// The revision the executor last saw.
    pub expected: u64,
    /// The slot.
    pub slot: EventRecord,
}

/// The body of [`path::REFRESH`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefreshClaim {
    /// The claim's owner.
    pub owner: String,
    /// The revision the executor last saw.
    pub expected: u64,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// The body of [`path::TRANSITION`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransitionRun {
    /// The revision the executor last saw.
    pub expected: u64,
    /// The move.
    pub transition: Transition,
}

/// The body of [`path::CONTINUATION`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContinueRun {
    /// The revision the executor last saw.
    pub expected: u64,
    /// The successor and what it takes over.
    pub continuation: crate::Continuation,
}

/// The body of [`path::ACTIONS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Act {
    /// The action (`wakeup`, `pause`, `resume`, `requeue`, `cancel`).
    pub action: RunAction,
    /// Who acts.
    #[serde(default)]
    pub actor: Option<String>,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// The body of [`path::RELEASE`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseClaim {
    /// The revision the operator last saw.
    pub expected: u64,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
    /// Release only a claim marked stale at least this long ago; `null` forces.
    #[serde(default)]
    pub confirm_ms: Option<i64>,
    /// Who releases.
    #[serde(default)]
    pub actor: Option<String>,
}

/// The body of a `POST` to [`path::WORKERS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordWorker {
    /// The worker's row.
    pub worker: WorkerRecord,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// The query of a `GET` of [`path::WORKERS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkersQuery {
    /// The caller's time (see the module's note on times).
    pub now: Millis,
    /// Workers seen within this many ms before `now`.
    pub within_ms: i64,
}

/// The body of a `POST` to [`path::CATALOG`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublishCatalog {
    /// The entry.
    pub entry: CatalogEntry,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// The body of [`path::CATALOG_TASKS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddCatalogTasks {
    /// The workflow version.
    pub namespace: Namespace,
    /// The build's fingerprint.
    pub fingerprint: String,
    /// The tasks to add.
    pub tasks: Vec<TaskDeclaration>,
}

/// The body of [`path::CHANGES`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesSince {
    /// Where the reader stands (`""` is the start).
    #[serde(default)]
    pub cursor: ChangeCursor,
    /// At most this many changes.
    pub limit: u32,
}

/// The body of [`path::CONFIG_KEY`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetConfig {
    /// The key's new value.
    pub value: i64,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// The body of a `POST` to [`path::SCHEDULES`]: the schedule as the client made it; the
/// server makes it again at its own time (creation, first occurrence).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateSchedule {
    /// The schedule.
    pub schedule: crate::ScheduleRecord,
    /// Who creates it.
    #[serde(default)]
    pub actor: Option<String>,
}

/// The body of [`path::SCHEDULES_DECLARED`]: the schedules a worker's code declares (made
/// again at the server's time), the workflow versions it serves and its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeclareSchedules {
    /// The declarations.
    pub declared: Vec<crate::ScheduleRecord>,
    /// The workflow versions the worker serves.
    pub serves: Vec<Namespace>,
    /// The worker's id.
    pub worker: String,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// The body of [`path::SCHEDULE`] and [`path::SCHEDULE_LOG`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleQuery {
    /// The schedule's name.
    pub name: String,
    /// At most this many log rows (the latest).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The body of [`path::SCHEDULE_ACTIONS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActOnSchedule {
    /// The schedule's name.
    pub name: String,
    /// The action.
    pub action: crate::ScheduleAction,
    /// Who acts.
    #[serde(default)]
    pub actor: Option<String>,
    /// The caller's time (see the module's note on times).
    pub now: Millis,
}

/// `/runs/{id}…`: `template` (one of [`path`]'s) with the run id in place of `{id}`.
pub fn run_path(template: &str, id: crate::RunId) -> String {
    template.replace("{id}", &id.to_string())
}

/// The HTTP status an error is answered with: 404 for an unknown run or version, 409 for a
/// revision, status or reference conflict, 400 for a request the store refuses as invalid,
/// 401 and 403 for a refused API key, 413 for a payload over the store's size limit, 503 while the store is unavailable, 500 for the rest.
pub fn status_of(error: &StoreError) -> u16 {
    match error {
        StoreError::NotFound { .. } => 404,
        StoreError::RevisionConflict { .. }
        | StoreError::PauseRequested { .. }
        | StoreError::InvalidTransition { .. }
        | StoreError::AlreadyExists { .. } => 409,
        StoreError::Invalid { .. } => 400,
        StoreError::Refused { .. } => 422,
        StoreError::Unauthorized { .. } => 401,
        StoreError::Forbidden { .. } => 403,
        StoreError::RateLimited { .. } => 429,
        StoreError::TooLarge { .. } => 413,
        StoreError::KeyReused { .. } => 422,
        StoreError::Unavailable { .. } => 503,
        StoreError::Migration { .. }
        | StoreError::Schema { .. }
        | StoreError::UnsupportedUrl { .. }
        | StoreError::CannotOpen { .. }
        | StoreError::Incompatible { .. }
        | StoreError::Corrupt { .. }
        | StoreError::Backend { .. } => 500,
    }
}
