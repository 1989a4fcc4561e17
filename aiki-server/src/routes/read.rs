//! The read role's routes.

use aiki_store::api::{ChangesSince, ListRunsQuery, ScheduleQuery, WorkersQuery};
use aiki_store::{
    CatalogEntry, ChangePage, History, ListRuns, RunCounts, RunPage, RunRecord, RuntimeConfig,
    ScheduleLogEntry, ScheduleRecord, StatusChange, WorkerRecord,
};
use axum::Json;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::Method;
use serde::de::DeserializeOwned;

use super::Answer;
use crate::AppState;
use crate::error::{ApiError, Body, QueryOf, RunPath};

/// A read's request: the query string of a `GET`, or the body of a `POST`, the previous
/// release's form (`aiki_store::api::READ_POSTS`).
pub(crate) struct Asked<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + aiki_store::bounds::Bounded> FromRequest<S>
    for Asked<T>
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        if request.method() == Method::GET {
            let (mut parts, _) = request.into_parts();
            let QueryOf(asked) = QueryOf::from_request_parts(&mut parts, state).await?;
            return Ok(Asked(asked));
        }
        let Body(asked) = Body::from_request(request, state).await?;
        Ok(Asked(asked))
    }
}

pub(crate) async fn get_run(
    State(app): State<AppState>,
    RunPath(id): RunPath,
) -> Answer<RunRecord> {
    Ok(Json(app.store.get_run(id).await?))
}

pub(crate) async fn load_history(
    State(app): State<AppState>,
    RunPath(id): RunPath,
) -> Answer<History> {
    Ok(Json(app.store.load_history(id).await?))
}

/// `GET`: the request in the query string.
pub(crate) async fn list_runs(
    State(app): State<AppState>,
    QueryOf(query): QueryOf<ListRunsQuery>,
) -> Answer<RunPage> {
    let request = ListRuns::try_from(query)?;
    Ok(Json(app.store.list_runs(request).await?))
}

/// `POST`, the previous release's form: the request as the body.
pub(crate) async fn list_runs_posted(
    State(app): State<AppState>,
    Body(request): Body<ListRuns>,
) -> Answer<RunPage> {
    Ok(Json(app.store.list_runs(request).await?))
}

pub(crate) async fn run_counts(State(app): State<AppState>) -> Answer<Vec<RunCounts>> {
    Ok(Json(app.store.run_counts().await?))
}

pub(crate) async fn timeline(
    State(app): State<AppState>,
    RunPath(id): RunPath,
) -> Answer<Vec<StatusChange>> {
    Ok(Json(app.store.timeline(id).await?))
}

pub(crate) async fn catalog(State(app): State<AppState>) -> Answer<Vec<CatalogEntry>> {
    Ok(Json(app.store.catalog().await?))
}

pub(crate) async fn list_workers(
    State(app): State<AppState>,
    QueryOf(query): QueryOf<WorkersQuery>,
) -> Answer<Vec<WorkerRecord>> {
    let now = app.time.now();
    Ok(Json(app.store.list_workers(now, query.within_ms).await?))
}

pub(crate) async fn changes_since(
    State(app): State<AppState>,
    Asked(request): Asked<ChangesSince>,
) -> Answer<ChangePage> {
    Ok(Json(
        app.store
            .changes_since(&request.cursor, request.limit)
            .await?,
    ))
}

pub(crate) async fn runtime_config(State(app): State<AppState>) -> Answer<RuntimeConfig> {
    Ok(Json(app.store.runtime_config().await?))
}

pub(crate) async fn schedules(State(app): State<AppState>) -> Answer<Vec<ScheduleRecord>> {
    Ok(Json(app.store.schedules().await?))
}

pub(crate) async fn schedule(
    State(app): State<AppState>,
    Asked(query): Asked<ScheduleQuery>,
) -> Answer<ScheduleRecord> {
    Ok(Json(app.store.schedule(&query.name).await?))
}

pub(crate) async fn schedule_log(
    State(app): State<AppState>,
    Asked(query): Asked<ScheduleQuery>,
) -> Answer<Vec<ScheduleLogEntry>> {
    let limit = query.limit.unwrap_or(100).min(10_000);
    Ok(Json(app.store.schedule_log(&query.name, limit).await?))
}
