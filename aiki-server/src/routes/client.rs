//! The client role's routes: starts, forks, events and the operator's actions.

use aiki_store::api::{Act, ActOnSchedule, CreateSchedule, ReleaseClaim, SetConfig};
use aiki_store::{
    AppendOutcome, ConfigKey, CreateOutcome, Move, Namespace, NewEvent, NewFork, NewRun, RunRecord,
    RunStatus, RuntimeConfig, ScheduleActed, ScheduleAction, ScheduleCreated, ScheduleDefinition,
    ScheduleRecord,
};
use axum::Extension;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::Value;

use super::Answer;
use crate::AppState;
use crate::auth::Caller;
use crate::error::{ApiError, Body, RunPath, same_run};
use crate::owned;

/// The key a request came with, if the server checks keys.
pub(crate) type Key = Option<Extension<Caller>>;

/// The actor of an operator's request that named `actor`: the key, as that name.
fn actor(key: &Key, actor: Option<String>) -> Option<String> {
    Caller::operator(key.as_ref().map(|Extension(caller)| caller), actor)
}

/// Refuses what the catalog refuses (422), as the JSON starts and sends of `aiki::Client` do;
/// a version no worker has published yet cannot be checked, and passes (`None`: no entry to
/// check by). The catalog entry that accepts the input, if any.
pub(crate) fn checked<T>(result: Result<T, aiki::ClientError>) -> Result<Option<T>, ApiError> {
    match result {
        Ok(accepted) => Ok(Some(accepted)),
        Err(aiki::ClientError::NotInCatalog { .. }) => Ok(None),
        Err(refused) => Err(refusal(refused)),
    }
}

/// The answer to a check the runtime refused: 422 with its body (a store error as the
/// store's).
fn refusal(error: aiki::ClientError) -> ApiError {
    match error {
        aiki::ClientError::Store(error) => error.into(),
        refused => ApiError::refused(StatusCode::UNPROCESSABLE_ENTITY, &refused),
    }
}

/// Checks a start's input (at `at` in the body): against the catalog, and its input hash
/// against it.
async fn checked_start(
    app: &AppState,
    namespace: &Namespace,
    input: &Value,
    input_hash: &str,
    at: &str,
) -> Result<(), ApiError> {
    let entry = checked(app.checks.check_start_json(namespace, input).await)?;
    owned::hashed(entry.as_ref(), input, input_hash, at)
}

/// Checks a new run's input: against the store's payload limit (a payload over it is
/// `too_large`, before anything hashes it), then as [`checked_start`].
pub(crate) async fn checked_input(app: &AppState, run: &NewRun, at: &str) -> Result<(), ApiError> {
    if let Some(limit) = app.store.payload_limit() {
        limit.check_new_run(run)?;
    }
    checked_start(app, &run.namespace, &run.input, &run.input_hash, at).await
}

/// A schedule's definition as the runtime checks a client's (`Client::check_schedule_json`:
/// against the catalog, a version no worker has published refused, the input hash the
/// server's), within the store's payload limit.
async fn checked_schedule(
    app: &AppState,
    name: &str,
    definition: ScheduleDefinition,
) -> Result<ScheduleDefinition, ApiError> {
    if let Some(limit) = app.store.payload_limit() {
        limit.check_schedule(name, &definition)?;
    }
    app.checks
        .check_schedule_json(definition)
        .await
        .map_err(refusal)
}

pub(crate) async fn create_run(
    State(app): State<AppState>,
    key: Key,
    Body(mut run): Body<NewRun>,
) -> Answer<CreateOutcome> {
    owned::client_start(&run)?;
    checked_input(&app, &run, "").await?;
    run.now = app.time.now();
    run.actor = actor(&key, run.actor);
    let outcome = app.store.create_run(run).await?;
    if let CreateOutcome::Created(run) = &outcome {
        app.waiters.queued(run.status);
    }
    Ok(Json(outcome))
}

/// A fork, checked against the run it forks: what it carries, its input and its lineage are
/// that run's (see `owned::fork_of`).
pub(crate) async fn fork_run(
    State(app): State<AppState>,
    key: Key,
    Body(mut fork): Body<NewFork>,
) -> Answer<CreateOutcome> {
    let Some(lineage) = fork.run.lineage else {
        return Err(ApiError::invalid(
            StatusCode::BAD_REQUEST,
            "`run.lineage` is missing: a fork names the run it forks (`forked_from`) and its \
             lineage's first run (`root`)",
        ));
    };
    if let Some(limit) = app.store.payload_limit() {
        limit.check_fork(&fork)?;
    }
    let source = app.store.load_history(lineage.forked_from).await?;
    owned::fork_of(&fork, &source)?;
    fork.run.now = app.time.now();
    fork.run.actor = actor(&key, fork.run.actor);
    let outcome = app.store.fork_run(fork).await?;
    if let CreateOutcome::Created(run) = &outcome {
        app.waiters.queued(run.status);
    }
    Ok(Json(outcome))
}

pub(crate) async fn append_event(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    key: Key,
    Body(mut event): Body<NewEvent>,
) -> Answer<AppendOutcome> {
    same_run(id, event.run_id)?;
    let namespace = app.store.get_run(id).await?.namespace;
    checked(
        app.checks
            .check_event_json(&namespace, &event.name, &event.data)
            .await,
    )?;
    event.now = app.time.now();
    event.actor = actor(&key, event.actor);
    let outcome = app.store.append_event(event).await?;
    if let AppendOutcome::Appended { woke: true, .. } = outcome {
        app.waiters.queued(RunStatus::Queued);
    }
    Ok(Json(outcome))
}

pub(crate) async fn act(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    key: Key,
    Body(body): Body<Act>,
) -> Answer<RunRecord> {
    let now = app.time.now();
    let actor = actor(&key, body.actor);
    let run = app.store.act(id, body.action, actor, now).await?;
    app.waiters.queued(run.status);
    Ok(Json(run))
}

pub(crate) async fn release_claim(
    State(app): State<AppState>,
    RunPath(id): RunPath,
    key: Key,
    Body(body): Body<ReleaseClaim>,
) -> Answer<Option<RunRecord>> {
    let now = app.time.now();
    let actor = actor(&key, body.actor);
    let released = app
        .store
        .release_claim(id, body.expected, now, body.confirm_ms, actor)
        .await?;
    if let Some(run) = &released {
        app.waiters.queued(run.status);
    }
    Ok(Json(released))
}

pub(crate) async fn transition_all(
    State(app): State<AppState>,
    key: Key,
    Body(mut moves): Body<Vec<Move>>,
) -> Answer<Vec<RunRecord>> {
    for each in &mut moves {
        each.transition.rebase(app.time.now());
        each.transition.actor = actor(&key, each.transition.actor.take());
    }
    let runs = app.store.transition_all(moves).await?;
    for run in &runs {
        app.waiters.queued(run.status);
    }
    Ok(Json(runs))
}

pub(crate) async fn set_config(
    State(app): State<AppState>,
    Path(key): Path<String>,
    Body(body): Body<SetConfig>,
) -> Answer<RuntimeConfig> {
    let key = key.parse::<ConfigKey>()?;
    let now = app.time.now();
    Ok(Json(app.store.set_config(key, body.value, now).await?))
}

pub(crate) async fn create_schedule(
    State(app): State<AppState>,
    key: Key,
    Body(body): Body<CreateSchedule>,
) -> Answer<ScheduleCreated> {
    let given = body.schedule;
    // Made again at the server's time: its creation and first occurrence.
    // A client's schedule: a schedule in code is declared by a worker (executor scope).
    let mut schedule = ScheduleRecord::new(
        given.name,
        given.definition,
        aiki_store::ScheduleOrigin::Client,
        1,
        app.time.now(),
    )?;
    // Checked against the catalog, its input hash the server's; a version no worker has
    // published is refused.
    schedule.definition = checked_schedule(&app, &schedule.name, schedule.definition).await?;
    let actor = actor(&key, body.actor);
    Ok(Json(app.store.create_schedule(schedule, actor).await?))
}

pub(crate) async fn act_on_schedule(
    State(app): State<AppState>,
    key: Key,
    Body(mut body): Body<ActOnSchedule>,
) -> Answer<ScheduleActed> {
    if let ScheduleAction::Redefine { definition, .. } = &mut body.action {
        // Checked as a new schedule's is.
        **definition = checked_schedule(&app, &body.name, (**definition).clone()).await?;
    }
    let now = app.time.now();
    let actor = actor(&key, body.actor);
    let acted = app
        .store
        .act_on_schedule(&body.name, body.action, actor, now)
        .await?;
    if !acted.runs.is_empty() {
        app.waiters.queued(RunStatus::Queued);
    }
    Ok(Json(acted))
}
