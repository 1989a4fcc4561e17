//! The executor role's routes. A record's run id must be the path's.

use std::time::Duration;

use aiki_store::api::{
    AddCatalogTasks, ClaimWait, ContinueRun, MAX_ENTRY_BATCH, MAX_ENTRY_WRITES, PublishCatalog,
    PutEntries, PutEntry, PutEntryWrites, PutSleep, RecordEventSlot, RecordWorker, RefreshClaim,
    StartChild, TransitionRun,
};
use aiki_store::{
    CatalogEntry, ClaimRequest, ClaimState, Claimed, Continued, EntryRecord, ErrorBody,
    EventRecord, ParentLink, RunRecord, SleepRecord, WorkerRecord,
};
use axum::Json;
use axum::extract::State;
use tokio::time::Instant;

use super::Answer;
use super::client::{Key, checked_input};
use crate::AppState;
use crate::auth::Caller;
use crate::error::{ApiError, Body, QueryOf, RunPath, same_run};
use crate::owned;
use axum::Extension;

/// The actor of an executor's request: its key, whatever it named.
fn executor(key: &Key, actor: Option<String>) -> Option<String> {
    Caller::executor(key.as_ref().map(|Extension(caller)| caller), actor)
}
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// The entry stamped by the server's clock, a retry's time moved with it (see
/// `ExecutorStore::put_entry`).
pub(crate) async fn put_entry(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut body): Body<PutEntry>,
) -> Answer<()> {
    same_run(id, body.entry.run_id)?;
    body.entry.rebase(app.time.now());
    Ok(Json(app.store.put_entry(body.expected, body.entry).await?))
}

/// Several entries of the run, each stamped by the server's clock as [`put_entry`] stamps one,
/// written in one operation (`ExecutorStore::put_entries`).
pub(crate) async fn put_entries(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut body): Body<PutEntries>,
) -> Answer<()> {
    if body.entries.is_empty() || body.entries.len() > MAX_ENTRY_BATCH {
        return Err(ApiError::invalid(
            StatusCode::BAD_REQUEST,
            format!(
                "`entries` holds {} entries; a batch holds 1 to {MAX_ENTRY_BATCH}: send more \
                 in several requests",
                body.entries.len()
            ),
        ));
    }
    let mut keys = std::collections::HashSet::with_capacity(body.entries.len());
    let now = app.time.now();
    for entry in &mut body.entries {
        same_run(id, entry.run_id)?;
        if !keys.insert((entry.address.clone(), entry.index)) {
            return Err(ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!(
                    "`entries` holds entry `{}` #{} twice; send each entry once",
                    entry.address, entry.index
                ),
            ));
        }
        entry.rebase(now);
    }
    Ok(Json(
        app.store.put_entries(body.expected, body.entries).await?,
    ))
}

/// The entry writes of several runs (`api::PutEntryWrites`), each stamped by the server's
/// clock as [`put_entry`] stamps one and written or refused on its own, in one operation of the
/// store where it batches (the SQL stores' group commit); the answer is each write's error, or
/// `null` where it was written, in order.
pub(crate) async fn put_entry_writes(
    State(app): State<AppState>,
    Body(body): Body<PutEntryWrites>,
) -> Answer<Vec<Option<ErrorBody>>> {
    if body.writes.is_empty() || body.writes.len() > MAX_ENTRY_WRITES {
        return Err(ApiError::invalid(
            StatusCode::BAD_REQUEST,
            format!(
                "`writes` holds {} writes; a request holds 1 to {MAX_ENTRY_WRITES}: send more \
                 in several requests",
                body.writes.len()
            ),
        ));
    }
    let mut keys = std::collections::HashSet::with_capacity(body.writes.len());
    for write in &body.writes {
        let entry = &write.entry;
        if !keys.insert((entry.run_id, entry.address.as_str(), entry.index)) {
            return Err(ApiError::invalid(
                StatusCode::BAD_REQUEST,
                format!(
                    "`writes` holds entry `{}` #{} of run {} twice; send each entry once",
                    entry.address, entry.index, entry.run_id
                ),
            ));
        }
    }
    let now = app.time.now();
    // A run's writes come in one piece (one caller's `put_entries`): they go to the store as
    // one call, as they would from a local executor.
    let mut groups: Vec<(u64, Vec<EntryRecord>)> = Vec::new();
    for mut write in body.writes {
        write.entry.rebase(now);
        match groups.last_mut() {
            Some((expected, entries))
                if *expected == write.expected && entries[0].run_id == write.entry.run_id =>
            {
                entries.push(write.entry);
            }
            _ => groups.push((write.expected, vec![write.entry])),
        }
    }
    let written = groups.into_iter().map(|(expected, entries)| {
        let store = &app.store;
        async move { group_outcomes(store, expected, entries).await }
    });
    let outcomes = futures_util::future::join_all(written).await;
    Ok(Json(
        outcomes
            .into_iter()
            .flatten()
            .map(|outcome| outcome.err().map(|error| ApiError::from(error).body))
            .collect(),
    ))
}

/// Writes one run's `entries` in one call of the store; each entry's outcome. A refused call
/// of several entries is told apart by writing each again alone (entry writes are upserts, so
/// one written already is written the same again).
async fn group_outcomes(
    store: &aiki_store::BoxStore,
    expected: u64,
    entries: Vec<EntryRecord>,
) -> Vec<Result<(), aiki_store::StoreError>> {
    if entries.len() == 1 {
        let entry = entries.into_iter().next().expect("BUG: one entry");
        return vec![store.put_entry(expected, entry).await];
    }
    match store.put_entries(expected, entries.clone()).await {
        Ok(()) => entries.iter().map(|_| Ok(())).collect(),
        Err(_) => {
            let mut outcomes = Vec::with_capacity(entries.len());
            for entry in entries {
                outcomes.push(store.put_entry(expected, entry).await);
            }
            outcomes
        }
    }
}

/// A child start, checked as a client's start is (input, input hash, what the store owns);
/// its parent is the path's run, at the entry's address, whatever the body says.
pub(crate) async fn start_child(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    key: Key,
    Body(mut body): Body<StartChild>,
) -> Answer<RunRecord> {
    same_run(id, body.entry.run_id)?;
    owned::child_start(&body.child)?;
    checked_input(&app, &body.child, "child.").await?;
    body.child.parent = Some(ParentLink::new(id, body.entry.address.clone()));
    body.child.now = app.time.now();
    body.child.actor = executor(&key, body.child.actor);
    let child = app
        .store
        .start_child(body.expected, body.entry, body.child)
        .await?;
    app.waiters.queued(child.status);
    Ok(Json(child))
}

/// A sleep counted from the writer's `from` moves onto the server's clock (see
/// `ExecutorStore::put_sleep`); the answer is the stored sleep for a writer that sent `from`
/// (this release on), `null` for one that did not.
pub(crate) async fn put_sleep(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut body): Body<PutSleep>,
) -> Answer<Option<SleepRecord>> {
    same_run(id, body.sleep.run_id)?;
    let from = body.from.map(|from| {
        let now = app.time.now();
        body.sleep.rebase(from, now);
        now
    });
    let stored = app.store.put_sleep(body.expected, body.sleep, from).await?;
    Ok(Json(from.map(|_| stored)))
}

pub(crate) async fn record_event_slot(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    key: Key,
    Body(mut body): Body<RecordEventSlot>,
) -> Answer<EventRecord> {
    same_run(id, body.slot.run_id)?;
    if body.slot.sent_by.is_some() {
        body.slot.sent_by = executor(&key, body.slot.sent_by);
    }
    Ok(Json(
        app.store
            .record_event_slot(body.expected, body.slot)
            .await?,
    ))
}

pub(crate) async fn claim_run(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut request): Body<ClaimRequest>,
) -> Result<Response, ApiError> {
    request.now = app.time.now();
    Ok(claimed(app.store.claim_run(request, id).await?))
}

/// A claim's answer: one that claimed nothing is not kept for repeats (a repeat claims
/// again), as the store records none for it.
fn claimed(claimed: Claimed) -> Response {
    let empty = claimed.runs.is_empty();
    let mut response = Json(claimed).into_response();
    if empty {
        response.extensions_mut().insert(crate::replay::NotKept);
    }
    response
}

/// A claim; one that finds nothing and may wait (`?wait_ms=`) claims again each time a run
/// may have been queued, until it takes one or its time is up, or the server shuts down (it
/// answers what it has at once, so that its shutdown does not wait for the long polls).
pub(crate) async fn claim(
    State(app): State<AppState>,
    QueryOf(wait): QueryOf<ClaimWait>,
    Body(request): Body<ClaimRequest>,
) -> Result<Response, ApiError> {
    let deadline = Instant::now() + Duration::from_millis(wait.wait_ms).min(app.max_wait);
    let mut draining = app.draining.clone();
    loop {
        let mut seen = app.waiters.watch();
        let mut attempt = request.clone();
        attempt.now = app.time.now();
        let claimed = app.store.claim(attempt).await?;
        if !claimed.runs.is_empty() || Instant::now() >= deadline || *draining.borrow() {
            return Ok(self::claimed(claimed));
        }
        tokio::select! {
            () = app.waiters.wait(&mut seen, deadline) => {}
            _ = draining.wait_for(|draining| *draining) => {}
        }
    }
}

pub(crate) async fn refresh_claim(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(body): Body<RefreshClaim>,
) -> Answer<ClaimState> {
    let now = app.time.now();
    Ok(Json(
        app.store
            .refresh_claim(id, &body.owner, body.expected, now)
            .await?,
    ))
}

/// A transition, whose actor is the caller's key whatever the body names.
pub(crate) async fn transition(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    key: Key,
    Body(mut body): Body<TransitionRun>,
) -> Answer<RunRecord> {
    body.transition.rebase(app.time.now());
    body.transition.actor = executor(&key, body.transition.actor.take());
    let run = app
        .store
        .transition(id, body.expected, body.transition)
        .await?;
    app.waiters.queued(run.status);
    Ok(Json(run))
}

pub(crate) async fn continue_run(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut body): Body<ContinueRun>,
) -> Answer<Continued> {
    let successor = &body.continuation.successor;
    if successor.id.as_uuid().is_nil() {
        return Err(ApiError::invalid(
            StatusCode::BAD_REQUEST,
            "`continuation.successor.id` is the nil UUID: send a fresh run id (a random UUID)",
        ));
    }
    checked_input(&app, successor, "continuation.successor.").await?;
    body.continuation.now = app.time.now();
    let continued = app
        .store
        .continue_run(id, body.expected, body.continuation)
        .await?;
    app.waiters.queued(continued.successor.status);
    Ok(Json(continued))
}

pub(crate) async fn record_worker(
    State(app): State<AppState>,
    Body(body): Body<RecordWorker>,
) -> Answer<WorkerRecord> {
    let now = app.time.now();
    Ok(Json(app.store.record_worker(body.worker, now).await?))
}

pub(crate) async fn publish_catalog(
    State(app): State<AppState>,
    Body(body): Body<PublishCatalog>,
) -> Answer<CatalogEntry> {
    let now = app.time.now();
    Ok(Json(app.store.publish_catalog(body.entry, now).await?))
}

pub(crate) async fn add_catalog_tasks(
    State(app): State<AppState>,
    Body(body): Body<AddCatalogTasks>,
) -> Answer<()> {
    Ok(Json(
        app.store
            .add_catalog_tasks(&body.namespace, &body.fingerprint, body.tasks)
            .await?,
    ))
}

/// Schedules declared in code; the worker named on their log is the caller's key, with the
/// worker id it sent.
pub(crate) async fn declare_schedules(
    State(app): State<AppState>,
    key: Key,
    Body(mut body): Body<aiki_store::api::DeclareSchedules>,
) -> Answer<Vec<aiki_store::schedule::Declared>> {
    if let Some(Extension(caller)) = &key {
        body.worker = format!("{} ({})", body.worker, caller.who());
    }
    let now = app.time.now();
    // Made again at the server's time: a new one's creation and first occurrence.
    let declared = body
        .declared
        .into_iter()
        .map(|given| {
            aiki_store::ScheduleRecord::new(
                given.name,
                given.definition,
                given.origin,
                given.generation,
                now,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let outcomes = app
        .store
        .declare_schedules(declared, body.serves, &body.worker, now)
        .await?;
    Ok(Json(outcomes))
}
