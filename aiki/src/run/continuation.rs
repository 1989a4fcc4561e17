//! Continue-as-new, and the limits that keep a run's history from growing without end.

use std::collections::BTreeMap;

use aiki_store::{Continuation, Continued, Namespace, NewRun, StoreError};
use serde_json::Value;

use super::{Replay, Run};
use crate::address::input_hash;
use crate::error::WorkflowError;
use crate::schema::Schema;
use crate::workflow::Workflow;

/// The successor a run continues as: returned inside
/// [`WorkflowError::ContinueAsNew`] by [`Run::continue_as_new`].
#[derive(Debug)]
pub struct ContinueAsNew {
    pub(crate) namespace: Namespace,
    input: Value,
    input_hash: String,
}

impl ContinueAsNew {
    /// The workflow version the successor runs.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The successor's input, as JSON.
    pub fn input(&self) -> &Value {
        &self.input
    }
}

/// How large a run's history may grow: past `warn` entries (tasks and child starts) each
/// execution logs a warning; at `limit` no new task or child starts and the run fails with
/// [`WorkflowError::HistoryTooLarge`]. Every execution replays the whole history, so a
/// workflow that loops for ever (an event loop, a monthly renewal) continues as new
/// ([`Run::continue_as_new`]) well before either.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    /// Entries past which each execution warns (default 10,000).
    pub warn: usize,
    /// Entries at which the run fails (default 50,000).
    pub limit: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits {
            warn: 10_000,
            limit: 50_000,
        }
    }
}

impl HistoryLimits {
    /// Warns past `warn` entries, fails at `limit`.
    pub fn new(warn: usize, limit: usize) -> Self {
        HistoryLimits { warn, limit }
    }

    /// Whether the limits make sense: both above zero, the warning below the limit.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.warn == 0 || self.limit == 0 || self.warn >= self.limit {
            return Err(format!(
                "history limits must be above zero with the warning below the limit; got warn \
                 {} and limit {}",
                self.warn, self.limit
            ));
        }
        Ok(())
    }
}

impl Run {
    /// Ends this run and continues it as a new run of `W` with `input`, so that a workflow
    /// that loops for ever (an event loop, a monthly renewal) does not replay an ever-growing
    /// history. Return what it gives as the workflow's error:
    ///
    /// ```
    /// # use aiki::{Run, WorkflowError};
    /// # #[aiki::workflow(name = "renewal", version = "1")]
    /// async fn renewal(run: &Run, month: u32) -> Result<(), WorkflowError> {
    ///     // ... this month's work ...
    ///     Err(run.continue_as_new::<Renewal>(month + 1))
    /// }
    /// ```
    ///
    /// Once the workflow returns it, the run is `completed` without an output of its own,
    /// its [`continued_as`](aiki_store::RunRecord::continued_as) naming the successor, which
    /// starts with an empty history. In the same store operation the successor takes over:
    ///
    /// * the run's reference id, pool, parent and trace;
    /// * the events the run received and did not consume, in order;
    /// * whatever waits on the run: a parent's child wait, a
    ///   [`RunHandle::result`](crate::RunHandle::result), a schedule's overlap policy all
    ///   follow the chain to its last run.
    ///
    /// `W` is a version of this run's own workflow, chosen as for a new start: this version,
    /// or a newer one to move the chain onto (its input is then `W`'s). Anything else, or an
    /// input that does not serialize, is returned as the error to fail the run with.
    pub fn continue_as_new<W: Workflow>(&self, input: W::Input) -> WorkflowError {
        if let Err(error) = self.check_fatal() {
            return error;
        }
        if W::NAME != self.inner.namespace.workflow {
            return WorkflowError::failed(format!(
                "run {} of {} cannot continue as {}: a run continues as a version of its own \
                 workflow; start another workflow as a child instead",
                self.inner.id,
                self.inner.namespace,
                W::namespace()
            ));
        }
        let hash = match input_hash(&input) {
            Ok(hash) => hash,
            Err(error) => return error,
        };
        let input = match serde_json::to_value(&input) {
            Ok(input) => input,
            Err(error) => {
                return WorkflowError::InputNotSerializable {
                    what: format!("input of the successor, {}", W::namespace()),
                    message: error.to_string(),
                };
            }
        };
        if let Err(message) = Schema::of::<W::Input>().validate(&input) {
            return WorkflowError::InvalidChildInput {
                namespace: W::namespace().to_string(),
                message,
            };
        }
        WorkflowError::ContinueAsNew(ContinueAsNew {
            namespace: W::namespace(),
            input,
            input_hash: hash,
        })
    }

    /// How many events of each name this execution consumed (read, or timed out on).
    fn consumed_events(&self) -> BTreeMap<String, u32> {
        self.replay()
            .events
            .iter()
            .map(|(name, queue)| (name.clone(), u32::try_from(queue.next).unwrap_or(u32::MAX)))
            .collect()
    }

    /// Writes the continuation the workflow returned: the run completes and `next` starts.
    /// A refusal that a retry would meet again (an input over the size limit, a reference id
    /// the successor's version holds) comes back as the error to fail the run with; any other
    /// loses the run, as with every write.
    pub(crate) async fn continue_with(
        &self,
        next: ContinueAsNew,
    ) -> Result<Continued, WorkflowError> {
        self.probe_fence()?;
        let now = self.now();
        let successor = NewRun::new(next.namespace, next.input, next.input_hash, now);
        let continuation = Continuation::new(successor, self.consumed_events(), now);
        let (id, revision) = (self.inner.id, self.inner.revision);
        let written = self
            .store_op_raw(move |store| {
                let continuation = continuation.clone();
                async move { store.continue_run(id, revision, continuation).await }
            })
            .await;
        written.map_err(|error| match error {
            StoreError::TooLarge { what, bytes, limit } => {
                WorkflowError::TooLarge { what, bytes, limit }
            }
            StoreError::AlreadyExists { what } => {
                WorkflowError::failed(format!("the run cannot continue as new: {what}"))
            }
            error => self.lost(error),
        })
    }

    /// Checks the history's size before a new entry (a task or child start): a warning past
    /// the executor's warning size, once per execution, and the run's failure at its limit.
    pub(super) fn check_history_size(&self, replay: &mut Replay) -> Result<(), WorkflowError> {
        let limits = self.inner.history_limits;
        let entries = replay.manifest.len();
        if entries >= limits.limit {
            let error = WorkflowError::HistoryTooLarge {
                entries,
                limit: limits.limit,
            };
            return Err(self.record_fatal(replay, error));
        }
        if entries >= limits.warn && !replay.warned_size {
            replay.warned_size = true;
            tracing::warn!(
                run_id = %self.inner.id,
                entries,
                limit = limits.limit,
                "the run's history is large: every execution replays all of it; continue the \
                 run as new (`run.continue_as_new`) before it reaches the limit"
            );
        }
        Ok(())
    }
}
