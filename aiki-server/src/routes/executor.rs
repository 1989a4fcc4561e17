//! The executor role's routes. A record's run id must be the path's.

use aiki_store::api::{
    AddCatalogTasks, PublishCatalog, PutEntry, PutSleep, RecordEventSlot, RecordWorker,
    RefreshClaim, StartChild, TransitionRun,
};
use aiki_store::{
    CatalogEntry, ClaimRequest, ClaimState, Claimed, EventRecord, RunRecord, WorkerRecord,
};
use axum::Json;
use axum::extract::State;

use super::Answer;
use crate::AppState;
use crate::error::{Body, RunPath, same_run};

pub(crate) async fn put_entry(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(body): Body<PutEntry>,
) -> Answer<()> {
    same_run(id, body.entry.run_id)?;
    Ok(Json(app.store.put_entry(body.expected, body.entry).await?))
}

pub(crate) async fn start_child(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut body): Body<StartChild>,
) -> Answer<RunRecord> {
    same_run(id, body.entry.run_id)?;
    body.child.now = app.time.stamp(body.child.now);
    Ok(Json(
        app.store
            .start_child(body.expected, body.entry, body.child)
            .await?,
    ))
}

pub(crate) async fn put_sleep(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(body): Body<PutSleep>,
) -> Answer<()> {
    same_run(id, body.sleep.run_id)?;
    Ok(Json(app.store.put_sleep(body.expected, body.sleep).await?))
}

pub(crate) async fn record_event_slot(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(body): Body<RecordEventSlot>,
) -> Answer<EventRecord> {
    same_run(id, body.slot.run_id)?;
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
) -> Answer<Claimed> {
    request.now = app.time.stamp(request.now);
    Ok(Json(app.store.claim_run(request, id).await?))
}

pub(crate) async fn claim(
    State(app): State<AppState>,
    Body(mut request): Body<ClaimRequest>,
) -> Answer<Claimed> {
    request.now = app.time.stamp(request.now);
    Ok(Json(app.store.claim(request).await?))
}

pub(crate) async fn refresh_claim(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(body): Body<RefreshClaim>,
) -> Answer<ClaimState> {
    let now = app.time.stamp(body.now);
    Ok(Json(
        app.store
            .refresh_claim(id, &body.owner, body.expected, now)
            .await?,
    ))
}

pub(crate) async fn transition(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    Body(mut body): Body<TransitionRun>,
) -> Answer<RunRecord> {
    body.transition.now = app.time.stamp(body.transition.now);
    Ok(Json(
        app.store
            .transition(id, body.expected, body.transition)
            .await?,
    ))
}

pub(crate) async fn record_worker(
    State(app): State<AppState>,
    Body(body): Body<RecordWorker>,
) -> Answer<WorkerRecord> {
    let now = app.time.stamp(body.now);
    Ok(Json(app.store.record_worker(body.worker, now).await?))
}

pub(crate) async fn publish_catalog(
    State(app): State<AppState>,
    Body(body): Body<PublishCatalog>,
) -> Answer<CatalogEntry> {
    let now = app.time.stamp(body.now);
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
