//! A handle on a run whatever its workflow: what an operator tool (the `aiki` CLI, later the
//! server) does to runs it has no code for. The typed [`RunHandle`](super::RunHandle) adds the
//! check that the run is of its workflow version, and its typed results and events.

use std::fmt;

use aiki_store::{AppendOutcome, NewEvent, RunAction, RunId, RunRecord, StoreError};
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

/// A typed handle's check of the run it acts on.
pub(super) type Check<'a> = dyn Fn(&RunRecord) -> Result<(), ClientError> + Sync + 'a;

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
        self.poll_until(None, |run| run.status.is_terminal()).await
    }

    /// Polls the run (at the client's poll interval) until `done` accepts it; `check` may
    /// refuse it. A transient store error is waited out, not returned.
    pub(super) async fn poll_until(
        &self,
        check: Option<&Check<'_>>,
        done: impl Fn(&RunRecord) -> bool,
    ) -> Result<RunRecord, ClientError> {
        loop {
            match self.record().await {
                Ok(run) => {
                    if let Some(check) = check {
                        check(&run)?;
                    }
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
        self.act(RunAction::Wakeup, None).await
    }

    /// Pauses the run (see [`RunHandle::pause`](super::RunHandle::pause)).
    pub async fn pause(&self) -> Result<RunRecord, ClientError> {
        self.act(RunAction::Pause, None).await
    }

    /// Resumes a paused run.
    pub async fn resume(&self) -> Result<RunRecord, ClientError> {
        self.act(RunAction::Resume, None).await
    }

    /// Puts a stalled run back into delivery.
    pub async fn requeue(&self) -> Result<RunRecord, ClientError> {
        self.act(RunAction::Requeue, None).await
    }

    /// Cancels the run and its children that have not ended (see
    /// [`RunHandle::cancel`](super::RunHandle::cancel)).
    pub async fn cancel(&self) -> Result<RunRecord, ClientError> {
        self.cancel_checked(None).await
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
        self.client
            .check_event_json(&run.namespace, name, &data)
            .await?;
        self.append_event(name, data, reference_id).await
    }

    /// Appends a validated event; `false` when its reference id was already used.
    pub(super) async fn append_event(
        &self,
        name: &str,
        data: Value,
        reference_id: Option<String>,
    ) -> Result<bool, ClientError> {
        let event = NewEvent::new(self.id, name, data, self.client.clock.now())
            .reference_id(reference_id)
            .by(self.client.actor.clone());
        let outcome = self
            .client
            .sent(|| self.client.store.append_event(event.clone()))
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
        check: Option<&Check<'_>>,
    ) -> Result<RunRecord, ClientError> {
        let run = match self.act(RunAction::Cancel, check).await {
            Err(ClientError::InvalidAction { status, .. }) if status.is_terminal() => {
                // Already over: the run as it ended (checked above, if asked).
                return self.record().await;
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
                    match child.act(RunAction::Cancel, None).await {
                        // It ended meanwhile: nothing left to cancel.
                        Ok(_) | Err(ClientError::InvalidAction { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        Ok(run)
    }

    /// Applies an operator action: one compare-and-set in the store ([`ClientStore::act`]),
    /// which checks the run's status and writes the action atomically. `check` (a typed
    /// handle's: the run is of its workflow version, which never changes) reads the run first.
    ///
    /// [`ClientStore::act`]: aiki_store::ClientStore::act
    pub(super) async fn act(
        &self,
        action: RunAction,
        check: Option<&Check<'_>>,
    ) -> Result<RunRecord, ClientError> {
        if let Some(check) = check {
            // Ridden out as the action is: the read is part of it.
            let run = self.client.sent(|| self.client.store.get_run(self.id));
            check(&run.await?)?;
        }
        let actor = self.client.actor.clone();
        let now = self.client.clock.now();
        let acted = self
            .client
            .sent(|| self.client.store.act(self.id, action, actor.clone(), now));
        match acted.await {
            Ok(run) => {
                crate::wake::work_available();
                Ok(run)
            }
            Err(StoreError::InvalidTransition { run_id, from, .. }) => {
                Err(ClientError::InvalidAction {
                    run_id,
                    action: action.name(),
                    status: from,
                    expected: action.applies_from(),
                })
            }
            Err(error) => Err(error.into()),
        }
    }
}
