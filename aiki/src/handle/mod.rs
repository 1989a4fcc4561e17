//! Handles on runs: status, results, events, and operator actions.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use aiki_store::{RunId, RunRecord, RunStatus};
use serde_json::Value;

use crate::client::Client;
use crate::error::ClientError;
use crate::workflow::{Event, Workflow};

mod any;
mod bulk;
mod fork;
mod recover;
mod release;

use aiki_store::RunAction;
pub use any::AnyRun;
pub use bulk::{BulkAction, BulkCheck, BulkOutcome};
pub use fork::ForkOptions;
pub use recover::{FailedChild, RetryOptions, RetryPlan};

/// Anything that names a run: its id, or a handle on it (typed or not), so that the calls
/// that only read a run take whichever the caller holds.
pub trait RunRef {
    /// The run's id.
    fn run_id(&self) -> RunId;
}

impl RunRef for RunId {
    fn run_id(&self) -> RunId {
        *self
    }
}

impl<W: Workflow> RunRef for &RunHandle<W> {
    fn run_id(&self) -> RunId {
        self.id()
    }
}

impl RunRef for &AnyRun {
    fn run_id(&self) -> RunId {
        self.id()
    }
}

/// A handle on one run of workflow version `W`.
pub struct RunHandle<W> {
    client: Client,
    id: RunId,
    _workflow: PhantomData<fn() -> W>,
}

impl<W> Clone for RunHandle<W> {
    fn clone(&self) -> Self {
        RunHandle {
            client: self.client.clone(),
            id: self.id,
            _workflow: PhantomData,
        }
    }
}

impl<W> fmt::Debug for RunHandle<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunHandle").field("id", &self.id).finish()
    }
}

/// The first change of `timeline` into `status` after revision `after`.
pub(crate) fn next_change(
    timeline: &[aiki_store::StatusChange],
    status: RunStatus,
    after: u64,
) -> Option<aiki_store::StatusChange> {
    timeline
        .iter()
        .find(|change| change.to == status && change.revision > after)
        .cloned()
}

impl<W: Workflow> RunHandle<W> {
    pub(crate) fn new(client: Client, id: RunId) -> Self {
        RunHandle {
            client,
            id,
            _workflow: PhantomData,
        }
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The run as stored now.
    pub async fn record(&self) -> Result<RunRecord, ClientError> {
        let run = self.client.store.get_run(self.id).await?;
        self.check(&run)?;
        Ok(run)
    }

    /// The run's status now.
    pub async fn status(&self) -> Result<RunStatus, ClientError> {
        Ok(self.record().await?.status)
    }

    /// Waits until the run reaches `status` (returning the run), or ends in another terminal
    /// status ([`ClientError::EndedInOtherStatus`]).
    ///
    /// A store that is briefly unreachable (a restarting database) does not end the wait: the
    /// run is looked at again at the next poll.
    pub async fn wait_for_status(&self, status: RunStatus) -> Result<RunRecord, ClientError> {
        let run = self
            .any()
            .poll_until(Some(&|run| self.check(run)), |run| {
                run.status == status || run.status.is_terminal()
            })
            .await?;
        if run.status != status {
            return Err(ClientError::EndedInOtherStatus {
                run_id: self.id,
                status: run.status,
                wanted: status,
                error: run.error,
            });
        }
        Ok(run)
    }

    /// Waits for the next time the run reaches `status` after revision `after` (a revision
    /// read from an earlier record: `handle.record().await?.revision`), and returns that change
    /// of its timeline. Read from the timeline, so a status the run reached and left again
    /// between two polls is not missed; a run already in `status` at `after` waits for the next
    /// time. Fails with [`ClientError::EndedInOtherStatus`] when the run ends otherwise first.
    ///
    /// ```no_run
    /// # async fn demo<W: aiki::Workflow>(run: aiki::RunHandle<W>) -> Result<(), aiki::ClientError> {
    /// let before = run.record().await?.revision;
    /// // ... send it an event that makes it sleep again ...
    /// let asleep = run.wait_for_status_after(aiki::RunStatus::Sleeping, before).await?;
    /// println!("asleep again at revision {}", asleep.revision);
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_status_after(
        &self,
        status: RunStatus,
        after: u64,
    ) -> Result<aiki_store::StatusChange, ClientError> {
        loop {
            let run = self.record().await?;
            let timeline = self.client.store.timeline(self.id).await?;
            if let Some(change) = next_change(&timeline, status, after) {
                return Ok(change);
            }
            // Ended (read before the timeline, so a change up to its end is in it).
            if run.status.is_terminal() {
                return Err(ClientError::EndedInOtherStatus {
                    run_id: self.id,
                    status: run.status,
                    wanted: status,
                    error: run.error,
                });
            }
            tokio::time::sleep(self.client.poll_interval).await;
        }
    }

    /// As [`wait_for_status`](RunHandle::wait_for_status), giving up after `timeout` (real
    /// time) with [`ClientError::Timeout`].
    pub async fn wait_for_status_timeout(
        &self,
        status: RunStatus,
        timeout: Duration,
    ) -> Result<RunRecord, ClientError> {
        tokio::time::timeout(timeout, self.wait_for_status(status))
            .await
            .map_err(|_| ClientError::Timeout(timeout))?
    }

    /// Waits for the run to complete and returns its output. A run that continued as new
    /// ([`Run::continue_as_new`](crate::Run::continue_as_new)) has the result of the last run
    /// of its chain: this waits for that one to end, and fails as it does.
    pub async fn result(&self) -> Result<W::Output, ClientError> {
        let mut run = self.wait_for_status(RunStatus::Completed).await?;
        while let Some(next) = run.continued() {
            run = AnyRun::new(self.client.clone(), next)
                .wait_until_ended()
                .await?;
            if run.status != RunStatus::Completed {
                return Err(ClientError::EndedInOtherStatus {
                    run_id: run.id,
                    status: run.status,
                    wanted: RunStatus::Completed,
                    error: run.error,
                });
            }
        }
        serde_json::from_value(run.output.unwrap_or(Value::Null)).map_err(|error| {
            ClientError::OutputMismatch {
                run_id: run.id,
                message: error.to_string(),
            }
        })
    }

    /// Sends a typed event to the run. Sent before the run waits for it, it is kept for the
    /// next wait of that name.
    pub async fn send<E: Event>(&self, payload: E::Payload) -> Result<(), ClientError> {
        self.send_typed::<E>(payload, None).await.map(|_| ())
    }

    /// Sends a typed event with an idempotency key: a second event with the same key (for
    /// this run and event name) is dropped, and this returns `false`.
    pub async fn send_once<E: Event>(
        &self,
        payload: E::Payload,
        reference_id: impl Into<String>,
    ) -> Result<bool, ClientError> {
        self.send_typed::<E>(payload, Some(reference_id.into()))
            .await
    }

    async fn send_typed<E: Event>(
        &self,
        payload: E::Payload,
        reference_id: Option<String>,
    ) -> Result<bool, ClientError> {
        let data = serde_json::to_value(&payload).map_err(|error| ClientError::InvalidInput {
            what: format!("event `{}`", E::NAME),
            message: error.to_string(),
        })?;
        self.send_json(E::NAME, data, reference_id).await
    }

    /// Sends an event as JSON, validated against the schema the workflow declares for it;
    /// `reference_id` makes the send idempotent.
    pub async fn send_json(
        &self,
        name: &str,
        data: Value,
        reference_id: Option<String>,
    ) -> Result<bool, ClientError> {
        crate::catalog::check_declared_event(&W::namespace(), &W::events(), name, &data)?;
        self.any().append_event(name, data, reference_id).await
    }

    /// Ends the run's current durable sleep early: the sleep returns `cancelled = true`.
    pub async fn wakeup(&self) -> Result<RunRecord, ClientError> {
        self.any()
            .act(RunAction::Wakeup, Some(&|run| self.check(run)))
            .await
    }

    /// Pauses the run; `resume` brings it back. A run that is not `running` is paused at
    /// once. A `running` run is asked to pause, without fencing its executor: the executor
    /// starts no new task, lets the tasks in flight record their results, and moves the run to
    /// `paused` itself (so no finished task is lost or run twice). Returns the run as it is
    /// now: `paused`, or `running` with [`pause_requested_at`](RunRecord::pause_requested_at)
    /// set.
    pub async fn pause(&self) -> Result<RunRecord, ClientError> {
        self.any()
            .act(RunAction::Pause, Some(&|run| self.check(run)))
            .await
    }

    /// Resumes a paused run.
    pub async fn resume(&self) -> Result<RunRecord, ClientError> {
        self.any()
            .act(RunAction::Resume, Some(&|run| self.check(run)))
            .await
    }

    /// Moves a `failed` run back to delivery after a fix: see [`AnyRun::retry`] for the rule
    /// and the refusals.
    pub async fn retry(&self, options: RetryOptions) -> Result<RunRecord, ClientError> {
        self.check(&self.any().record().await?)?;
        self.any().retry(options).await
    }

    /// Starts a new run of this version from this ended run, carrying what it may safely
    /// carry: see [`AnyRun::fork`].
    pub async fn fork(&self, options: ForkOptions) -> Result<RunHandle<W>, ClientError> {
        self.check(&self.any().record().await?)?;
        let fork = self.any().fork(options).await?;
        Ok(RunHandle::new(self.client.clone(), fork.id))
    }

    /// Puts a stalled run back into delivery, with a fresh `max_age` clock.
    pub async fn requeue(&self) -> Result<RunRecord, ClientError> {
        self.any()
            .act(RunAction::Requeue, Some(&|run| self.check(run)))
            .await
    }

    /// Cancels the run and every child run it started that has not ended. Cancelling a run
    /// that has already ended (`completed`, `failed` or `cancelled`) changes nothing and
    /// returns it as it is.
    pub async fn cancel(&self) -> Result<RunRecord, ClientError> {
        self.any()
            .cancel_checked(Some(&|run| self.check(run)))
            .await
    }

    /// The same run, without its workflow type.
    fn any(&self) -> AnyRun {
        AnyRun::new(self.client.clone(), self.id)
    }

    /// Refuses a run of another workflow version than `W`.
    fn check(&self, run: &RunRecord) -> Result<(), ClientError> {
        if run.namespace != W::namespace() {
            return Err(ClientError::WrongWorkflow {
                run_id: self.id,
                expected: W::namespace().to_string(),
                actual: run.namespace.to_string(),
            });
        }
        Ok(())
    }
}
