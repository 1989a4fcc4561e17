//! Checking one run: its history replayed by a probing [`Run`], and the verdict read off what
//! the probe saw.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use aiki_store::{EntryStatus, History, Millis, Queue, RunRecord, RunStatus, StoreError};

use super::report::{NewWork, RunImpact, SleepChange, Verdict};
use crate::client::Client;
use crate::direct::{DirectCalls, poll_workflow_code};
use crate::error::{ClientError, WorkflowError};
use crate::registry::{Registered, Registry};
use crate::run::{Found, Probe, Run};
use crate::task::StateMap;

/// How long one run's replay may take (real time) before the check gives up on it (a store
/// read that never answers). Workflow code that awaits something not durable (a tokio sleep,
/// a channel) is read as waiting there: the replay settles once nothing it started is under
/// way.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The impact of this build on `run`; `None` when the run is gone.
pub(super) async fn check_run(
    registry: &Registry,
    client: &Client,
    run: &RunRecord,
    now: Millis,
) -> Result<Option<RunImpact>, ClientError> {
    let impact = |verdict| RunImpact {
        revision: run.revision,
        verdict,
        ..RunImpact::new(run.id, run.namespace.clone(), run.status)
    };
    let Some(workflow) = registry.workflow(&run.namespace) else {
        let mut versions: Vec<String> = registry
            .namespaces()
            .filter(|ns| ns.workflow == run.namespace.workflow)
            .map(|ns| ns.version.clone())
            .collect();
        versions.sort();
        let reason = format!(
            "version {} of `{}` is not in this build (it registers {}); keep registering it \
             until its runs end, or cancel or fork them",
            run.namespace.version,
            run.namespace.workflow,
            versions.join(", ")
        );
        return Ok(Some(impact(Verdict::Stranded { reason })));
    };
    let mut history = match client.store.load_history(run.id).await {
        Ok(history) => history,
        Err(StoreError::NotFound { .. }) => return Ok(None),
        Err(StoreError::Incompatible { message }) => {
            let reason = format!("its history holds a record of a newer release ({message})");
            return Ok(Some(impact(Verdict::Stranded { reason })));
        }
        Err(StoreError::Corrupt { message }) => {
            return Ok(Some(impact(Verdict::Broken {
                error_kind: "corrupt_history".to_owned(),
                message,
                after: Vec::new(),
            })));
        }
        Err(error) => return Err(error.into()),
    };
    if history.run.status == RunStatus::Failed {
        as_retried(&mut history);
    }
    let mut impact = impact(Verdict::Safe);
    impact.revision = history.run.revision;
    impact.status = history.run.status;
    replay(registry, client, &**workflow, history, &mut impact, now).await?;
    Ok(Some(impact))
}

/// Replays `history` with `workflow`'s code, writing nothing, and fills in `impact`: what the
/// probe saw, and the verdict.
pub(super) async fn replay(
    registry: &Registry,
    client: &Client,
    workflow: &dyn Registered,
    history: History,
    impact: &mut RunImpact,
    now: Millis,
) -> Result<(), ClientError> {
    let input = history.run.input.clone();
    let probe = Run::from_history(
        history,
        crate::run::RunStore::Reader(client.store.clone()),
        client.clock.clone(),
        Arc::new(StateMap::default()),
        registry.served().clone(),
    )
    .into_probe(Probe::default());
    let direct = Arc::new(DirectCalls::default());
    let ended = {
        let mut future = workflow.execute(&probe, input);
        let driven = poll_fn(
            |cx| match poll_workflow_code(future.as_mut(), &direct, cx) {
                Poll::Ready(result) => Poll::Ready(Some(result.map(|_| ()))),
                Poll::Pending if probe.settled() => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        );
        tokio::time::timeout(SETTLE_TIMEOUT, driven).await
    };
    let fatal = probe.take_fatal();
    let seen = probe.take_probe();
    read_findings(impact, &seen, now);
    let after = seen.fatal_after.clone();
    impact.verdict = match (fatal, ended) {
        (Some(WorkflowError::Lost(error)), _) if error.is_transient() => return Err(error.into()),
        (Some(WorkflowError::Lost(error)), _) => Verdict::Broken {
            error_kind: "unreadable".to_owned(),
            message: format!("a record it reads could not be read: {error}"),
            after,
        },
        (Some(error), _) => verdict_of(error, after),
        // Continuing as new ends the run as completing would.
        (None, Ok(Some(Err(WorkflowError::ContinueAsNew(_))))) if !impact.new_work.is_empty() => {
            Verdict::NewWork
        }
        (None, Ok(Some(Err(WorkflowError::ContinueAsNew(_))))) => Verdict::Safe,
        (None, Ok(Some(Err(error)))) => verdict_of(error, seen.assumed.clone()),
        (None, Err(_)) => Verdict::Broken {
            error_kind: "unsettled".to_owned(),
            message: format!(
                "its replay did not settle within {SETTLE_TIMEOUT:?}: the workflow code waits on \
                 something that is not durable (a tokio sleep, a channel, a lock); wait with \
                 `run.sleep` or an event instead"
            ),
            after: seen.assumed.clone(),
        },
        (None, Ok(_)) if !impact.new_work.is_empty() => Verdict::NewWork,
        (None, Ok(_)) => Verdict::Safe,
    };
    Ok(())
}

/// A failed run as a retry would leave it: the call whose failure failed it is due again.
fn as_retried(history: &mut History) {
    // A child's failure points at the child's start, which a retry keeps.
    let Some(call) = history
        .run
        .error
        .as_ref()
        .filter(|error| error.kind != "child_failed")
        .and_then(|error| error.call.clone())
    else {
        return;
    };
    if let Some(entry) = history
        .entries
        .iter_mut()
        .find(|entry| entry.address == call.address && entry.index == call.index)
    {
        entry.status = EntryStatus::AwaitingRetry;
        entry.retry_at = None;
    }
}

/// The probe's findings, into the report's fields.
fn read_findings(impact: &mut RunImpact, seen: &Probe, now: Millis) {
    impact.waits = seen.assumed.clone();
    for finding in &seen.findings {
        let after = finding.after.clone();
        match &finding.what {
            Found::NewTask {
                task,
                address,
                call_site,
            } => impact.new_work.push(NewWork {
                kind: "task",
                name: (*task).to_owned(),
                address: address.clone(),
                call_site: call_site.clone(),
                after,
            }),
            Found::NewChild { namespace, address } => impact.new_work.push(NewWork {
                kind: "child",
                name: namespace.clone(),
                address: address.clone(),
                call_site: None,
                after,
            }),
            Found::Resume { address } => impact.resumes.push(address.clone()),
            Found::SleepChanged {
                name,
                recorded_ms,
                wanted_ms,
                new_end,
                ..
            } => impact.sleeps.push(SleepChange {
                name: sleep_name(name),
                recorded_ms: *recorded_ms,
                new_ms: *wanted_ms,
                extended_by_ms: wanted_ms - recorded_ms,
                ends_at: *new_end,
                already_satisfied: *new_end <= now,
            }),
            Found::Blind { wait } => {
                impact.blind.get_or_insert_with(|| wait.clone());
            }
        }
    }
}

/// A sleep's name for people: the timers of waits have names of their own.
fn sleep_name(name: &str) -> String {
    match Queue::parse(name) {
        Queue::EventTimeout(event) => format!("timeout of event `{event}`"),
        Queue::ChildWait(child) => format!("timeout of the wait for child `{child}`"),
        other => other.to_string(),
    }
}

/// The verdict an error the replay ended with gives.
fn verdict_of(error: WorkflowError, after: Vec<String>) -> Verdict {
    let kind = error.kind().to_owned();
    match error {
        WorkflowError::NonDeterminism {
            new_address,
            unconsumed,
            call_site,
        } => Verdict::Diverges {
            new_address,
            call_site,
            unconsumed,
            after,
        },
        WorkflowError::OutputSchemaMismatch {
            what,
            address,
            mismatch,
        } => Verdict::Mismatch {
            what,
            address: Some(address),
            mismatch,
            after,
        },
        WorkflowError::InputSchemaMismatch { mismatch, .. } => Verdict::Mismatch {
            what: "input of the run".to_owned(),
            address: None,
            mismatch,
            after,
        },
        WorkflowError::EventPayloadMismatch { event, message } => Verdict::Mismatch {
            what: format!("payload of event `{event}`"),
            address: None,
            mismatch: message,
            after,
        },
        WorkflowError::TaskFailed { .. }
        | WorkflowError::ChildFailed { .. }
        | WorkflowError::Failed { .. } => Verdict::Ends {
            outcome: kind,
            message: Some(error.to_string()),
            after,
        },
        other => Verdict::Broken {
            error_kind: kind,
            message: other.to_string(),
            after,
        },
    }
}
