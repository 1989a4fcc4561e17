//! What a reader needs: runs, their timelines, the catalog, the workers and the change
//! stream. A dashboard, a read-only API key and every other role read through it.

use std::fmt::Debug;

use async_trait::async_trait;

use crate::{
    CatalogEntry, ChangeCursor, ChangePage, History, ListRuns, Millis, RunCounts, RunId, RunPage,
    RunRecord, RuntimeConfig, ScheduleLogEntry, ScheduleRecord, StatusChange, StoreError,
    WorkerRecord,
};

/// The reading role of the store contract: runs, counts, timelines, the catalog, the workers
/// and the change stream. Nothing here writes.
///
/// [`ExecutorStore`](crate::ExecutorStore) and [`ClientStore`](crate::ClientStore) extend it:
/// an executor reads the runs it replays, a client the runs it operates.
#[async_trait]
pub trait ReadStore: Send + Sync + Debug + 'static {
    /// A short name of the backend (`memory`, `sqlite`, `postgres`), for logs and test names.
    fn backend(&self) -> &'static str;

    /// One run. [`StoreError::NotFound`] if there is none.
    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError>;

    /// A run with everything it recorded: entries, sleeps, events and child runs, in one call.
    /// An executor replays it; the impact check, forks and operators read it.
    async fn load_history(&self, id: RunId) -> Result<History, StoreError>;

    /// One page of the runs passing the request's filter, newest first (by creation time, then
    /// id), starting after its cursor. Paging through never repeats or skips a run whose
    /// filtered fields do not change meanwhile.
    async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError>;

    /// Per workflow version with any runs: how many are in each status, and since when the
    /// oldest queued one has waited; ordered by workflow and version. One read, for a metrics
    /// scrape or an overview of every version.
    async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError>;

    /// Every status change of a run, oldest first: its creation, then one per change (from,
    /// to, reason, revision, time, the executor involved). Written by the statements that change
    /// the status, not by extra calls. Changes made before the store kept a timeline are not in
    /// it. [`StoreError::NotFound`] for an unknown run.
    async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError>;

    /// Every published catalog entry, by workflow name and version, then oldest publication
    /// first: one per build (fingerprint) of each version, with the tasks its runs were seen
    /// calling.
    async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError>;

    /// The workers seen within `within_ms` before `now` (by the same clock as
    /// [`record_worker`](crate::ExecutorStore::record_worker)), by id.
    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError>;

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

    /// The runtime configuration in force: each key's stored value, or its default. A store
    /// whose schema predates the configuration table has the defaults.
    async fn runtime_config(&self) -> Result<RuntimeConfig, StoreError>;

    /// Every schedule, by name (empty on a schema without schedules).
    async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError>;

    /// One schedule. [`StoreError::NotFound`] if there is none.
    async fn schedule(&self, name: &str) -> Result<ScheduleRecord, StoreError>;

    /// The latest `limit` rows of a schedule's log (what each occurrence became, its status
    /// changes), oldest first. [`StoreError::NotFound`] for an unknown schedule.
    async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<ScheduleLogEntry>, StoreError>;
}
