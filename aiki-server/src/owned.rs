//! What the store owns in a run a caller asks for, and the checks that keep it the store's: a
//! client starts a run `queued` or `scheduled`, with a fresh id, the hash of its input and no
//! link to another run (a child is started by its parent's executor, a fork through
//! `POST /forks`, a successor by its predecessor's continuation); a fork carries only what the
//! run it forks recorded.

use aiki_store::{CatalogEntry, History, NewFork, NewRun, RunStatus};
use axum::http::StatusCode;

use crate::error::ApiError;

fn refused(message: String) -> ApiError {
    ApiError::invalid(StatusCode::BAD_REQUEST, message)
}

/// Refuses a new run (at `at` in the body) whose id is nil or whose status is not one a run
/// starts in.
fn fresh(run: &NewRun, at: &str) -> Result<(), ApiError> {
    if run.id.as_uuid().is_nil() {
        return Err(refused(format!(
            "`{at}id` is the nil UUID: send a fresh run id (a random UUID)"
        )));
    }
    if !matches!(run.status, RunStatus::Queued | RunStatus::Scheduled) {
        return Err(refused(format!(
            "`{at}status` is `{}`: a run starts `queued` or `scheduled` (with `due_at`); the \
             store moves it on from there",
            run.status
        )));
    }
    if run.continued_from.is_some() {
        return Err(refused(format!(
            "`{at}continued_from` is set: only the store links a successor to the run that \
             continued as it"
        )));
    }
    Ok(())
}

/// Refuses a run whose input hash is not its input's (`entry`: the version's catalog entry, if
/// a worker published it).
pub(crate) fn hashed(
    entry: Option<&CatalogEntry>,
    input: &serde_json::Value,
    hash: &str,
    at: &str,
) -> Result<(), ApiError> {
    let accepted = aiki::input_hash_accepts(entry, input, hash)
        .map_err(|error| refused(format!("`{at}input` cannot be hashed: {error}")))?;
    if accepted {
        return Ok(());
    }
    let expected = match entry {
        Some(entry) => aiki::input_hash_json(entry, input),
        None => aiki::input_hash(input),
    }
    .unwrap_or_default();
    Err(refused(format!(
        "`{at}input_hash` is not the hash of `{at}input` (hex(sha256(canonical({{\"input\": \
         input}}))), which is {expected}): send the input's hash"
    )))
}

/// A run a client starts (`POST /runs`): fresh, and linked to no other run.
pub(crate) fn client_start(run: &NewRun) -> Result<(), ApiError> {
    fresh(run, "")?;
    if run.parent.is_some() {
        return Err(refused(
            "`parent` is set: a child run is started by its parent's executor \
             (`POST /runs/{id}/children`), not by a client"
                .to_owned(),
        ));
    }
    if run.lineage.is_some() {
        return Err(refused(
            "`lineage` is set: a fork is made with `POST /forks`, which checks it against the \
             run it forks"
                .to_owned(),
        ));
    }
    Ok(())
}

/// A child run an executor starts (`POST /runs/{id}/children`): fresh, and no fork or
/// successor (its parent link the server stamps: the path's run, at the entry's address).
pub(crate) fn child_start(child: &NewRun) -> Result<(), ApiError> {
    fresh(child, "child.")?;
    if child.lineage.is_some() {
        return Err(refused(
            "`child.lineage` is set: a child is no fork".to_owned(),
        ));
    }
    Ok(())
}

/// A fork (`POST /forks`) of the run `source` holds (its history): a new run of the same
/// workflow and input, with the lineage the store's fork has, carrying only records the source
/// recorded (each as it recorded it, on the fork's id).
pub(crate) fn fork_of(fork: &NewFork, source: &History) -> Result<(), ApiError> {
    let run = &fork.run;
    fresh(run, "run.")?;
    if run.parent.is_some() {
        return Err(refused(
            "`run.parent` is set: a fork is started by a client, and is no child".to_owned(),
        ));
    }
    let original = &source.run;
    if !original.status.is_terminal() {
        return Err(refused(format!(
            "run {} is `{}`: only an ended run is forked",
            original.id, original.status
        )));
    }
    let root = original.lineage.map_or(original.id, |lineage| lineage.root);
    if run.lineage.is_none_or(|lineage| lineage.root != root) {
        return Err(refused(format!(
            "`run.lineage.root` must be {root}, the first run of the lineage of run {}",
            original.id
        )));
    }
    if run.namespace.workflow != original.namespace.workflow {
        return Err(refused(format!(
            "`run.namespace.workflow` must be `{}`, the workflow of the run forked",
            original.namespace.workflow
        )));
    }
    if run.input != original.input || run.input_hash != original.input_hash {
        return Err(refused(format!(
            "`run.input` and `run.input_hash` must be those of run {}: a fork starts from the \
             input of the run it forks",
            original.id
        )));
    }
    let carried = |what: &str, index: usize| {
        refused(format!(
            "`{what}[{index}]` is not a record of run {} as it recorded it: a fork carries only \
             what the run it forks recorded",
            original.id
        ))
    };
    for (index, entry) in fork.entries.iter().enumerate() {
        let mut entry = entry.clone();
        entry.run_id = original.id;
        if !source.entries.contains(&entry) {
            return Err(carried("entries", index));
        }
    }
    for (index, sleep) in fork.sleeps.iter().enumerate() {
        let mut sleep = sleep.clone();
        sleep.run_id = original.id;
        if !source.sleeps.contains(&sleep) {
            return Err(carried("sleeps", index));
        }
    }
    for (index, event) in fork.events.iter().enumerate() {
        let mut event = event.clone();
        event.run_id = original.id;
        if !source.events.contains(&event) {
            return Err(carried("events", index));
        }
    }
    Ok(())
}
