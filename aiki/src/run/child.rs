//! Child workflows: starts recorded as manifest entries, and waits on their outcomes.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use aiki_store::{
    CallRef, EntryKind, EntryRecord, EntryStatus, Namespace, NewRun, ParentLink, RunId, RunRecord,
    RunStatus, StoreError,
};
use serde_json::Value;

use super::manifest::Slot;
use super::outcome::Outcome;
use super::sleep::{SleepState, check_duration};
use super::suspend::Block;
use super::{Drain, Found, Run};
use crate::ConflictPolicy;
use crate::address::{child_address, input_hash};
use crate::error::WorkflowError;
use crate::schema::Schema;
use crate::workflow::Workflow;

impl Run {
    /// Starts a child workflow run (a manifest entry, addressed
    /// `name:version:reference-id-or-input-hash`).
    pub fn child<W: Workflow>(&self, input: W::Input) -> ChildStart<'_, W> {
        ChildStart {
            run: self,
            input,
            reference_id: None,
            conflict_policy: ConflictPolicy::Error,
            pool: None,
            _workflow: PhantomData,
        }
    }

    async fn start_child<W: Workflow>(
        &self,
        input: W::Input,
        reference_id: Option<String>,
        policy: ConflictPolicy,
        pool: Option<String>,
    ) -> Result<ChildRun<'_, W>, WorkflowError> {
        self.check_fatal()?;
        let hash = input_hash(&input)?;
        let key = reference_id.clone().unwrap_or_else(|| hash.clone());
        let address = child_address(W::NAME, W::VERSION, &key);
        let slot;
        let child = match self.take_slot(&address, None)? {
            Slot::Recorded(entry) => {
                slot = entry.index;
                let id = entry
                    .output
                    .as_ref()
                    .and_then(Value::as_str)
                    .and_then(|id| id.parse::<RunId>().ok())
                    .ok_or_else(|| {
                        self.fail_fatally(WorkflowError::OutputSchemaMismatch {
                            what: format!("child workflow `{}`", W::namespace()),
                            address: address.clone(),
                            mismatch: "the recorded child start holds no run id".to_owned(),
                        })
                    })?;
                self.child_record(id).await?
            }
            Slot::Fresh(index) => {
                slot = index;
                let found = || Found::NewChild {
                    namespace: W::namespace().to_string(),
                    address: address.clone(),
                };
                if self.note(found) {
                    self.stop_here().await
                }
                // No new child while the run drains.
                if self.draining().is_some() {
                    match self.hold().await {}
                }
                let now = self.now();
                let input = serde_json::to_value(&input).map_err(|error| {
                    WorkflowError::InputNotSerializable {
                        what: format!("input of child workflow `{}`", W::namespace()),
                        message: error.to_string(),
                    }
                })?;
                // A fresh start only: a recorded one replays whatever its schema says now.
                Schema::of::<W::Input>()
                    .validate(&input)
                    .map_err(|message| WorkflowError::InvalidChildInput {
                        namespace: W::namespace().to_string(),
                        message,
                    })?;
                if !self.inner.served.contains(&W::namespace()) {
                    warn_unserved(W::namespace());
                }
                let pool = pool.unwrap_or_else(|| self.inner.pool.clone());
                let new = NewRun::new(W::namespace(), input, hash.clone(), now)
                    .reference_id(reference_id.clone())
                    .pool(pool)
                    .parent(ParentLink::new(self.inner.id, address.clone()))
                    .traceparent(self.inner.traceparent.clone());
                let entry = EntryRecord::new(
                    self.inner.id,
                    address.clone(),
                    index,
                    EntryKind::Child,
                    EntryStatus::Completed,
                    now,
                )
                .attempts(1);
                let revision = self.inner.revision;
                self.probe_fence()?;
                let started = self
                    .store_op_raw(move |store| {
                        let (entry, new) = (entry.clone(), new.clone());
                        async move { store.start_child(revision, entry, new).await }
                    })
                    .await;
                let child = match started {
                    Ok(child) => child,
                    // A pause was requested: no child starts, and the run drains.
                    Err(StoreError::PauseRequested { .. }) => {
                        self.drain(Drain::Pause);
                        match self.hold().await {}
                    }
                    // Nothing was written, and the same input is refused again: the
                    // workflow's to handle, never retried.
                    Err(StoreError::TooLarge { what, bytes, limit }) => {
                        return Err(WorkflowError::TooLarge { what, bytes, limit });
                    }
                    Err(error) => return Err(self.lost(error)),
                };
                crate::wake::work_available();
                // Not a child another run started first under the same reference id.
                let ours = child.parent.as_ref().map(|parent| parent.run_id) == Some(self.inner.id);
                if ours && child.created_at == now {
                    crate::metrics::run_started(&child.namespace);
                }
                self.replay().children.insert(child.id, child.clone());
                child
            }
        };
        if let (Some(reference_id), ConflictPolicy::Error) = (reference_id, policy)
            && child.input_hash != hash
        {
            return Err(WorkflowError::ChildConflict {
                namespace: W::namespace().to_string(),
                reference_id,
            });
        }
        Ok(ChildRun {
            run: self,
            id: child.id,
            start: CallRef::new(address, slot),
            _workflow: PhantomData,
        })
    }

    /// A child's record: from the history, or (for a child started elsewhere and shared by
    /// reference id) from the store.
    pub(super) async fn child_record(&self, id: RunId) -> Result<RunRecord, WorkflowError> {
        if let Some(child) = self.replay().children.get(&id).cloned() {
            return Ok(child);
        }
        let child = self
            .read(move |store| async move { store.get_run(id).await })
            .await?;
        self.replay().children.insert(id, child.clone());
        Ok(child)
    }

    /// The record of the last run of the chain child `id` starts: the child's own, unless it
    /// continued as new (then its successor's, and so on).
    pub(super) async fn child_chain_end(&self, id: RunId) -> Result<RunRecord, WorkflowError> {
        let mut child = self.child_record(id).await?;
        while let Some(next) = child.continued() {
            child = self.child_record(next).await?;
        }
        Ok(child)
    }

    async fn wait_child<W: Workflow>(
        &self,
        id: RunId,
        start: &CallRef,
        timeout: Option<Duration>,
    ) -> Result<Option<W::Output>, WorkflowError> {
        let address = start.address.as_str();
        self.check_fatal()?;
        if let Some(timeout) = timeout {
            check_duration(
                || format!("timeout of the wait for child `{address}`"),
                timeout,
            )?;
        }
        let timer = super::outcome::queue(address);
        let (index, recorded) = self.next_event_slot(&timer);
        if timeout.is_some() && recorded.as_ref().is_some_and(|record| record.timed_out) {
            return Ok(None);
        }
        if let Some(outcome) = self.observe_child(id, address, index, recorded).await? {
            return self.child_outcome::<W>(outcome, start).map(Some);
        }
        let deadline = match timeout {
            Some(timeout) => match self.sleep_until(&timer, timeout).await? {
                SleepState::Until(deadline) => Some(deadline),
                SleepState::Done { .. } => {
                    if !self.probing() {
                        self.record_timeout(&timer, index).await?;
                    }
                    return Ok(None);
                }
            },
            None => None,
        };
        if let Some(outcome) = self.assume_child::<W>(id) {
            return self.child_outcome::<W>(outcome, start).map(Some);
        }
        // A child that continued as new is waited on as the last run of its chain.
        let id = self.child_chain_end(id).await?.id;
        match self.block(Block::Child { id, deadline }).await {}
    }
}

impl Run {
    /// Looking ahead (the impact check), child `id` assumed completed with a value of its
    /// output type.
    fn assume_child<W: Workflow>(&self, id: RunId) -> Option<Outcome> {
        if !self.looking_ahead() {
            return None;
        }
        let what = format!("child {} (run {id}) completes", W::namespace());
        self.assume_value(what, crate::schema::example::<W::Output>())
            .map(|output| Outcome::assumed(id, output))
    }

    /// An ended child's outcome: its output (validated like a task's), or
    /// [`WorkflowError::ChildFailed`].
    fn child_outcome<W: Workflow>(
        &self,
        child: Outcome,
        start: &CallRef,
    ) -> Result<W::Output, WorkflowError> {
        let address = start.address.as_str();
        match child.status {
            RunStatus::Completed => self.decode_recorded::<W::Output>(
                format!("child workflow `{}`", W::namespace()),
                address,
                child.output.unwrap_or(Value::Null),
                child.fingerprint.as_deref(),
            ),
            status => Err(WorkflowError::ChildFailed {
                namespace: W::namespace().to_string(),
                run_id: child.run_id,
                start: start.clone(),
                status,
                message: child
                    .error
                    .map(|failure| failure.message)
                    .unwrap_or_else(|| "cancelled".to_owned()),
            }),
        }
    }

    /// Waits for all of `children` to end: their outputs, in order, once every one has
    /// completed; or, as soon as one has failed or was cancelled,
    /// [`WorkflowError::ChildFailed`] for the first such in order (the others keep running).
    ///
    /// The run suspends once on all of them, and is woken once: when the last one ends, or at
    /// the first that does not complete. Awaiting each child's [`wait`](ChildRun::wait) in
    /// turn (or all of them with `join_all`) wakes, and replays, the run at every child's end.
    ///
    /// ```
    /// # use aiki::{Run, WorkflowError};
    /// #[aiki::workflow(name = "square", version = "1")]
    /// async fn square(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    ///     Ok(n * n)
    /// }
    ///
    /// #[aiki::workflow(name = "sum-of-squares", version = "2")]
    /// async fn sum_of_squares(run: &Run, n: u64) -> Result<u64, WorkflowError> {
    ///     let mut children = Vec::new();
    ///     for i in 1..=n {
    ///         children.push(run.child::<Square>(i).reference_id(format!("square-{i}")).await?);
    ///     }
    ///     Ok(run.join_children(&children).await?.into_iter().sum())
    /// }
    /// ```
    pub async fn join_children<W: Workflow>(
        &self,
        children: &[ChildRun<'_, W>],
    ) -> Result<Vec<W::Output>, WorkflowError> {
        self.check_fatal()?;
        let mut outputs = Vec::with_capacity(children.len());
        let mut pending = Vec::new();
        for child in children {
            let address = &child.start.address;
            let (index, recorded) = self.next_event_slot(&super::outcome::queue(address));
            match self
                .observe_child(child.id, address, index, recorded)
                .await?
            {
                Some(outcome) => outputs.push(self.child_outcome::<W>(outcome, &child.start)?),
                None => match self.assume_child::<W>(child.id) {
                    Some(outcome) => {
                        outputs.push(self.child_outcome::<W>(outcome, &child.start)?);
                    }
                    None => pending.push(self.child_chain_end(child.id).await?.id),
                },
            }
        }
        if pending.is_empty() {
            return Ok(outputs);
        }
        match self.block(Block::Join { ids: pending }).await {}
    }
}

/// Warns, once per process and version, that a child is started for a workflow version this
/// worker does not register: another service may serve it, but if none does, the child (and its
/// parent) wait until it stalls.
fn warn_unserved(namespace: Namespace) {
    static WARNED: std::sync::Mutex<Option<std::collections::HashSet<Namespace>>> =
        std::sync::Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned
        .get_or_insert_with(Default::default)
        .insert(namespace.clone())
    {
        tracing::warn!(
            child = %namespace,
            "starting a child of a workflow version this worker does not register; it runs \
             only if another worker serves it (register it with `Worker::builder(..).register(..)` \
             if this service should)"
        );
    }
}

/// A child-workflow start being configured; `.await` it (or call [`start`](ChildStart::start)).
///
/// ```
/// # use aiki::{Run, WorkflowError};
/// #[aiki::workflow(name = "square", version = "1")]
/// async fn square(run: &Run, n: u64) -> Result<u64, WorkflowError> {
///     Ok(n * n)
/// }
///
/// #[aiki::workflow(name = "sum-of-squares", version = "1")]
/// async fn sum_of_squares(run: &Run, n: u64) -> Result<u64, WorkflowError> {
///     let mut children = Vec::new();
///     for i in 1..=n {
///         children.push(run.child::<Square>(i).reference_id(format!("square-{i}")).await?);
///     }
///     let mut sum = 0;
///     for child in &children {
///         sum += child.wait().await?;
///     }
///     Ok(sum)
/// }
/// ```
#[derive(Debug)]
pub struct ChildStart<'r, W: Workflow> {
    run: &'r Run,
    input: W::Input,
    reference_id: Option<String>,
    conflict_policy: ConflictPolicy,
    pool: Option<String>,
    _workflow: PhantomData<fn() -> W>,
}

impl<'r, W: Workflow> ChildStart<'r, W> {
    /// Addresses the child by this id instead of its input hash.
    pub fn reference_id(mut self, reference_id: impl Into<String>) -> Self {
        self.reference_id = Some(reference_id.into());
        self
    }

    /// What to do when the reference id already names a run with another input.
    pub fn conflict_policy(mut self, policy: ConflictPolicy) -> Self {
        self.conflict_policy = policy;
        self
    }

    /// Routes the child to another worker pool than its parent's (a child runs in its
    /// parent's pool unless told otherwise).
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = Some(pool.into());
        self
    }

    /// Starts the child (or finds the one recorded).
    pub async fn start(self) -> Result<ChildRun<'r, W>, WorkflowError> {
        self.run
            .start_child::<W>(
                self.input,
                self.reference_id,
                self.conflict_policy,
                self.pool,
            )
            .await
    }
}

impl<'r, W: Workflow> std::future::IntoFuture for ChildStart<'r, W> {
    type Output = Result<ChildRun<'r, W>, WorkflowError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'r>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.start())
    }
}

/// A child run started from a workflow. It borrows the parent's [`Run`], so it cannot outlive
/// the parent's execution either.
#[derive(Debug)]
pub struct ChildRun<'r, W: Workflow> {
    run: &'r Run,
    id: RunId,
    /// Where the parent recorded the start.
    start: CallRef,
    _workflow: PhantomData<fn() -> W>,
}

impl<W: Workflow> ChildRun<'_, W> {
    /// The child's run id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// Waits for the child to end: its output (validated like a task's), or
    /// [`WorkflowError::ChildFailed`] when it failed or was cancelled.
    pub async fn wait(&self) -> Result<W::Output, WorkflowError> {
        let output = self.run.wait_child::<W>(self.id, &self.start, None).await?;
        Ok(output.expect("BUG: a child wait without timeout returned a timeout"))
    }

    /// As [`wait`](ChildRun::wait), giving up after `timeout` with `Ok(None)` (recorded, so
    /// replay returns it again). A timeout longer than ten years is refused with
    /// [`WorkflowError::DurationTooLong`].
    pub async fn wait_timeout(
        &self,
        timeout: Duration,
    ) -> Result<Option<W::Output>, WorkflowError> {
        self.run
            .wait_child::<W>(self.id, &self.start, Some(timeout))
            .await
    }
}
