//! A handle on a run whatever its workflow: what an operator tool (the `aiki` CLI, later the
//! server) does to runs it has no code for. The typed [`RunHandle`](super::RunHandle) adds the
//! check that the run is of its workflow version, and its typed results and events.

use std::fmt;

use aiki_store::{AppendOutcome, NewEvent, RunId, RunRecord, RunStatus, StoreError, Transition};
use serde_json::Value;

use crate::client::Client;
use crate::error::ClientError;

/// A handle on one run of any workflow: its record and the operator actions.
#[derive(Clone)]
pub struct AnyRun {
    client: Client,
    id: RunId,
}

impl fmt::Debug for AnyRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyRun").field("id", &self.id).finish()
    }
}

/// An operator action that moves a run from some statuses to another.
#[derive(Clone, Copy, Debug)]
pub(super) enum Action {
    Wakeup,
    Pause,
    Resume,
    Requeue,
    Cancel,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Wakeup => "wake up",
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Requeue => "requeue",
            Action::Cancel => "cancel",
        }
    }

    /// The statuses the action applies to.
    pub(super) fn from(self) -> Vec<RunStatus> {
        match self {
            Action::Wakeup => vec![RunStatus::Sleeping],
            Action::Pause => RunStatus::ALL
                .into_iter()
                .filter(|status| status.can_move_to(RunStatus::Paused))
                .collect(),
            Action::Resume => vec![RunStatus::Paused],
            Action::Requeue => vec![RunStatus::Stalled],
            Action::Cancel => RunStatus::ALL
                .into_iter()
                .filter(|status| !status.is_terminal())
                .collect(),
        }
    }

    fn transition(self) -> Transition {
        match self {
            Action::Wakeup => Transition::to(RunStatus::Queued, 0).cancel_sleeps(),
            Action::Pause => Transition::to(RunStatus::Paused, 0),
            Action::Resume => Transition::to(RunStatus::Queued, 0),
            Action::Requeue => Transition::to(RunStatus::Queued, 0),
            Action::Cancel => Transition::to(RunStatus::Cancelled, 0),
        }
    }
}

/// No check: any workflow's run.
fn any_workflow(_: &RunRecord) -> Result<(), ClientError> {
    Ok(())
}

impl AnyRun {
    pub(crate) fn new(client: Client, id: RunId) -> Self {
        AnyRun { client, id }
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// The run as stored now.
    pub async fn record(&self) -> Result<RunRecord, ClientError> {
        Ok(self.client.store.get_run(self.id).await?)
    }

    /// Waits until the run has ended (`completed`, `failed` or `cancelled`) and returns it.
    /// A store that is briefly unreachable does not end the wait.
    pub async fn wait_until_ended(&self) -> Result<RunRecord, ClientError> {
        self.poll_until(&any_workflow, |run| run.status.is_terminal())
            .await
    }

    /// Polls the run (at the client's poll interval) until `done` accepts it; `check` may
    /// refuse it. A transient store error is waited out, not returned.
    pub(super) async fn poll_until(
        &self,
        check: &(dyn Fn(&RunRecord) -> Result<(), ClientError> + Sync),
        done: impl Fn(&RunRecord) -> bool,
    ) -> Result<RunRecord, ClientError> {
        loop {
            match self.record().await {
                Ok(run) => {
                    check(&run)?;
                    if done(&run) {
                        return Ok(run);
                    }
                }
                Err(ClientError::Store(error)) if error.is_transient() => {
                    tracing::debug!(run_id = %self.id, %error, "store unavailable; waiting on");
                }
                Err(error) => return Err(error),
            }
            tokio::time::sleep(self.client.poll_interval).await;
        }
    }

    /// Ends the run's current durable sleep early (see [`RunHandle::wakeup`](super::RunHandle::wakeup)).
    pub async fn wakeup(&self) -> Result<RunRecord, ClientError> {
        self.act(Action::Wakeup, &any_workflow).await
    }

    /// Pauses the run (see [`RunHandle::pause`](super::RunHandle::pause)).
    pub async fn pause(&self) -> Result<RunRecord, ClientError> {
        self.act(Action::Pause, &any_workflow).await
    }

    /// Resumes a paused run.
    pub async fn resume(&self) -> Result<RunRecord, ClientError> {
        self.act(Action::Resume, &any_workflow).await
    }

    /// Puts a stalled run back into delivery.
    pub async fn requeue(&self) -> Result<RunRecord, ClientError> {
        self.act(Action::Requeue, &any_workflow).await
    }

    /// Cancels the run and its children that have not ended (see
    /// [`RunHandle::cancel`](super::RunHandle::cancel)).
    pub async fn cancel(&self) -> Result<RunRecord, ClientError> {
        self.cancel_checked(&any_workflow).await
    }

    /// Sends an event as JSON, validated against the schema that the run's workflow version
    /// declares for it in the [catalog](Client::catalog), with the same errors as
    /// [`RunHandle::send_json`](super::RunHandle::send_json): [`ClientError::UnknownEvent`],
    /// [`ClientError::InvalidInput`]; [`ClientError::NotInCatalog`] when no worker has
    /// published the version. `reference_id` makes the send idempotent: a second send with it
    /// returns `false`.
    pub async fn send_json(
        &self,
        name: &str,
        data: Value,
        reference_id: Option<String>,
    ) -> Result<bool, ClientError> {
        let run = self.record().await?;
        let entries = self.client.catalog_entries(&run.namespace).await?;
        crate::catalog::accepted_by_one(&entries, |entry| {
            crate::catalog::check_catalog_event(entry, name, &data)
        })?;
        self.append_event(name, data, reference_id).await
    }

    /// Appends a validated event; `false` when its reference id was already used.
    pub(super) async fn append_event(
        &self,
        name: &str,
        data: Value,
        reference_id: Option<String>,
    ) -> Result<bool, ClientError> {
        let outcome = self
            .client
            .store
            .append_event(
                NewEvent::new(self.id, name, data, self.client.clock.now())
                    .reference_id(reference_id)
                    .by(self.client.actor.clone()),
            )
            .await
            .map_err(|error| match error {
                StoreError::InvalidTransition { run_id, from, .. } if from.is_terminal() => {
                    ClientError::RunEnded {
                        run_id,
                        status: from,
                    }
                }
                other => other.into(),
            })?;
        match outcome {
            AppendOutcome::Appended { woke, .. } => {
                if woke {
                    crate::wake::work_available();
                }
                Ok(true)
            }
            AppendOutcome::Duplicate => Ok(false),
        }
    }

    /// Cancels the run if `check` accepts it, then its children that have not ended.
    pub(super) async fn cancel_checked(
        &self,
        check: &(dyn Fn(&RunRecord) -> Result<(), ClientError> + Sync),
    ) -> Result<RunRecord, ClientError> {
        let run = match self.act(Action::Cancel, check).await {
            Err(ClientError::InvalidAction { status, .. }) if status.is_terminal() => {
                let run = self.record().await?;
                check(&run)?;
                return Ok(run);
            }
            other => other?,
        };
        let mut pending = vec![self.id];
        while let Some(parent) = pending.pop() {
            let history = self.client.store.load_history(parent).await?;
            // Its own children only: one shared by reference id belongs to the run that
            // started it.
            let own = history
                .children
                .into_iter()
                .filter(|child| child.parent.as_ref().map(|link| link.run_id) == Some(parent));
            for child in own {
                pending.push(child.id);
                if !child.status.is_terminal() {
                    let child = AnyRun::new(self.client.clone(), child.id);
                    match child.act(Action::Cancel, &any_workflow).await {
                        // It ended meanwhile: nothing left to cancel.
                        Ok(_) | Err(ClientError::InvalidAction { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        Ok(run)
    }

    /// Applies an operator action with a compare-and-set loop on the revision; the run must be
    /// in one of the action's statuses, and `check` may refuse it.
    pub(super) async fn act(
        &self,
        action: Action,
        check: &(dyn Fn(&RunRecord) -> Result<(), ClientError> + Sync),
    ) -> Result<RunRecord, ClientError> {
        let from = action.from();
        loop {
            let run = self.client.store.get_run(self.id).await?;
            check(&run)?;
            if !from.contains(&run.status) {
                return Err(ClientError::InvalidAction {
                    run_id: self.id,
                    action: action.name(),
                    status: run.status,
                    expected: from,
                });
            }
            if let (Action::Pause, RunStatus::Running) = (action, run.status) {
                // Never fence a task in flight: the executor pauses the run at its next durable
                // point (an older schema knows no request: the pause moves the run at once).
                let now = self.client.clock.now();
                let actor = self.client.actor.clone();
                match self.client.store.request_pause(self.id, actor, now).await {
                    Ok(Some(requested)) => return Ok(requested),
                    // It left `running` meanwhile: pause it where it is now.
                    Ok(None) => continue,
                    Err(StoreError::Schema { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            let mut change = action.transition().by(self.client.actor.clone());
            change.now = self.client.clock.now();
            match self
                .client
                .store
                .transition(self.id, run.revision, change)
                .await
            {
                Ok(run) => {
                    crate::wake::work_available();
                    return Ok(run);
                }
                Err(StoreError::RevisionConflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
    }
}
