//! Runs: the one to create, the one stored, and the whole history of one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{EntryRecord, EventRecord, Failure, Millis, Namespace, RunId, SleepRecord, WaitSpec};
use crate::RunStatus;

/// The run that started a child run, and the manifest address of that start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ParentLink {
    /// The parent run.
    pub run_id: RunId,
    /// The child-start address in the parent's manifest.
    pub address: String,
}

impl ParentLink {
    /// The link from a child run to the parent that started it at `address`.
    pub fn new(run_id: RunId, address: impl Into<String>) -> Self {
        ParentLink {
            run_id,
            address: address.into(),
        }
    }
}

/// A run to create.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NewRun {
    /// The new run's id.
    pub id: RunId,
    /// The workflow version it is pinned to.
    pub namespace: Namespace,
    /// The input, as JSON.
    pub input: Value,
    /// `hex(sha256(canonical({"input": input})))`.
    pub input_hash: String,
    /// The caller's idempotency key, unique per namespace.
    pub reference_id: Option<String>,
    /// The worker pool that may run it (`default` unless routed elsewhere).
    pub pool: String,
    /// `queued` (deliver now) or `scheduled` (deliver at `due_at`).
    pub status: RunStatus,
    /// When a `scheduled` run becomes deliverable.
    pub due_at: Option<Millis>,
    /// The parent run, for a child run.
    pub parent: Option<ParentLink>,
    /// The W3C `traceparent` of the trace the run belongs to (see
    /// [`RunRecord::traceparent`]).
    pub traceparent: Option<String>,
    /// For a fork: the run it was forked from and its lineage's first run.
    #[serde(default)]
    pub lineage: Option<Lineage>,
    /// Who started it (an operator's name, recorded on the timeline); `None` when not said.
    #[serde(default)]
    pub actor: Option<String>,
    /// For a successor: the run that continued as this one (see
    /// [`ExecutorStore::continue_run`](crate::ExecutorStore::continue_run)), set by the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_from: Option<RunId>,
    /// Creation time.
    pub now: Millis,
}

/// Where a forked run comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lineage {
    /// The run it was forked from.
    pub forked_from: RunId,
    /// The first run of the lineage (the run forked from, unless that was a fork itself):
    /// task idempotency keys derive from it, so a call a fork runs again hands an outside
    /// system the original's key.
    pub root: RunId,
}

impl NewRun {
    /// A run to deliver now (`queued`) in the `default` pool, with a fresh id, no reference id
    /// and no parent; the setters below change each.
    pub fn new(
        namespace: Namespace,
        input: Value,
        input_hash: impl Into<String>,
        now: Millis,
    ) -> Self {
        NewRun {
            id: RunId::new(),
            namespace,
            input,
            input_hash: input_hash.into(),
            reference_id: None,
            pool: "default".to_owned(),
            status: RunStatus::Queued,
            due_at: None,
            parent: None,
            traceparent: None,
            lineage: None,
            actor: None,
            continued_from: None,
            now,
        }
    }

    /// Sets the id.
    pub fn id(mut self, id: RunId) -> Self {
        self.id = id;
        self
    }

    /// Sets the caller's idempotency key.
    pub fn reference_id(mut self, reference_id: Option<String>) -> Self {
        self.reference_id = reference_id;
        self
    }

    /// Routes the run to a worker pool.
    pub fn pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = pool.into();
        self
    }

    /// Sets the initial status (the store accepts `queued` and `scheduled`; tests of a backend
    /// may seed others).
    pub fn status(mut self, status: RunStatus) -> Self {
        self.status = status;
        self
    }

    /// Makes the run `scheduled`, deliverable at `due_at`.
    pub fn scheduled_at(mut self, due_at: Millis) -> Self {
        self.status = RunStatus::Scheduled;
        self.due_at = Some(due_at);
        self
    }

    /// Sets the due time without changing the status.
    pub fn due_at(mut self, due_at: Option<Millis>) -> Self {
        self.due_at = due_at;
        self
    }

    /// Makes it a child run of `parent`.
    pub fn parent(mut self, parent: ParentLink) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Sets the W3C `traceparent` the run's executions link to.
    pub fn traceparent(mut self, traceparent: Option<String>) -> Self {
        self.traceparent = traceparent;
        self
    }

    /// Records who starts it (the timeline's actor).
    pub fn by(mut self, actor: Option<String>) -> Self {
        self.actor = actor;
        self
    }

    /// Makes it a fork.
    pub fn lineage(mut self, lineage: Lineage) -> Self {
        self.lineage = Some(lineage);
        self
    }

    /// The run as [`ClientStore::create_run`](crate::ClientStore::create_run) stores it: revision 1,
    /// attempt 1, `queued_at` set for a queued run, created and updated at `now`.
    pub fn into_record(self) -> RunRecord {
        RunRecord {
            id: self.id,
            namespace: self.namespace,
            input: self.input,
            input_hash: self.input_hash,
            reference_id: self.reference_id,
            pool: self.pool,
            status: self.status,
            revision: 1,
            attempts: 1,
            owner: None,
            heartbeat_at: None,
            due_at: self.due_at,
            queued_at: (self.status == RunStatus::Queued).then_some(self.now),
            output: None,
            output_fingerprint: None,
            error: None,
            parent: self.parent,
            traceparent: self.traceparent,
            wait: None,
            lineage: self.lineage,
            pause_requested_at: None,
            pause_requested_by: None,
            claim_stale_since: None,
            continued_as: None,
            continued_from: self.continued_from,
            created_at: self.now,
            updated_at: self.now,
        }
    }
}

/// What [`ClientStore::create_run`](crate::ClientStore::create_run) did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "run", rename_all = "snake_case")]
pub enum CreateOutcome {
    /// The run was created.
    Created(RunRecord),
    /// A run with the same namespace and reference id already exists; nothing was written. The
    /// caller compares input hashes and applies its conflict policy.
    Existing(RunRecord),
}

impl CreateOutcome {
    /// The run, new or existing.
    pub fn run(&self) -> &RunRecord {
        match self {
            CreateOutcome::Created(run) | CreateOutcome::Existing(run) => run,
        }
    }
}

/// A run as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunRecord {
    /// Its id.
    pub id: RunId,
    /// The workflow version it is pinned to.
    pub namespace: Namespace,
    /// Its input.
    pub input: Value,
    /// The hash of its input (see [`NewRun::input_hash`]).
    pub input_hash: String,
    /// The caller's idempotency key.
    pub reference_id: Option<String>,
    /// The worker pool it is routed to.
    pub pool: String,
    /// Its status.
    pub status: RunStatus,
    /// Incremented by every transition; every executor write names the revision it expects.
    pub revision: u64,
    /// Workflow attempts so far (1 for the first).
    pub attempts: u32,
    /// The executor holding the claim while `running`.
    pub owner: Option<String>,
    /// The last claim refresh while `running`.
    pub heartbeat_at: Option<Millis>,
    /// When a suspended or scheduled run is due (its timer).
    pub due_at: Option<Millis>,
    /// When the run last became `queued` (the clock the maximum age, `daemons.stallUndeliverableRuns.maxAgeMs`, runs against).
    pub queued_at: Option<Millis>,
    /// The output of a completed run.
    pub output: Option<Value>,
    /// The fingerprint of the output schema that produced `output`.
    pub output_fingerprint: Option<String>,
    /// Why the run (or its last attempt) failed.
    pub error: Option<Failure>,
    /// The parent, for a child run.
    pub parent: Option<ParentLink>,
    /// The W3C `traceparent` current when the run was started (a child's is its parent's):
    /// every execution of the run links to it, so a run that resumes days later on another
    /// machine stays one story in a tracing backend. `None` for runs started outside a trace
    /// (and before this was stored).
    #[serde(default)]
    pub traceparent: Option<String>,
    /// While the run is suspended: what it waits on, as its suspension stored it. `None`
    /// otherwise, and for a run suspended by a release that did not store wait sets (such a
    /// run wakes on any event, or any child's end).
    #[serde(default)]
    pub wait: Option<WaitSpec>,
    /// For a fork: the run it was forked from and its lineage's first run.
    #[serde(default)]
    pub lineage: Option<Lineage>,
    /// While `running`: when an operator asked to pause it. Its executor starts no new task,
    /// lets those in flight record their results, and moves it to `paused` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_requested_at: Option<Millis>,
    /// Who asked to pause it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_requested_by: Option<String>,
    /// While `running`: when claim recovery found its claim stale (by the claim clock). The
    /// claim is released only if still unrefreshed a refresh interval (and a margin) after
    /// that, so an executor that merely could not reach the store keeps its run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_stale_since: Option<Millis>,
    /// For a run that continued as a new one (`run.continue_as_new(..)`): its successor. The
    /// run is `completed` without an output of its own; its result is the last run's of the
    /// chain (see [`RunRecord::continued`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_as: Option<RunId>,
    /// For a successor: the run that continued as this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continued_from: Option<RunId>,
    /// Creation time.
    pub created_at: Millis,
    /// Time of the last transition.
    pub updated_at: Millis,
}

impl RunRecord {
    /// The run this one continued as, if it did: a run that ended by continuing as new counts
    /// as ended for nothing that waits on it; whoever waits follows the chain to its last run.
    pub fn continued(&self) -> Option<RunId> {
        self.continued_as
            .filter(|_| self.status == RunStatus::Completed)
    }
}

/// Everything a run has recorded, loaded in one call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct History {
    /// The run itself.
    pub run: RunRecord,
    /// Manifest entries, ordered by address then index.
    pub entries: Vec<EntryRecord>,
    /// Sleeps, ordered by name then index.
    pub sleeps: Vec<SleepRecord>,
    /// Events and recorded timeouts, ordered by name then index.
    pub events: Vec<EventRecord>,
    /// The child runs its manifest's child starts name (a child shared by reference id
    /// included), without their inputs: `input` is `null`.
    pub children: Vec<RunRecord>,
}

impl History {
    /// The history of a run that has recorded nothing yet.
    pub fn new(run: RunRecord) -> Self {
        History {
            run,
            entries: Vec::new(),
            sleeps: Vec::new(),
            events: Vec::new(),
            children: Vec::new(),
        }
    }
}
