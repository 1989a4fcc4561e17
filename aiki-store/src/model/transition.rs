//! Requests that move runs: transitions with what a suspension waits on, and claims.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CallRef, Failure, Millis, Namespace, RunId, RunRecord, SlotRef, WaitSpec};
use crate::RunStatus;

/// A change of a run's status, applied atomically with the revision check and increment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Transition {
    /// The new status. The store refuses moves that [`RunStatus::can_move_to`] forbids.
    pub to: RunStatus,
    /// The new due time (a wake time, a retry time, a scheduled start); `None` clears it.
    pub due_at: Option<Millis>,
    /// The output, when completing.
    pub output: Option<Value>,
    /// The output schema's fingerprint, when completing.
    pub output_fingerprint: Option<String>,
    /// The error, when failing (or scheduling a workflow retry).
    pub error: Option<Failure>,
    /// A new attempt count, when a workflow retry is scheduled.
    pub attempts: Option<u32>,
    /// For suspensions: if any of these already happened, the run is queued at
    /// once instead, so a wake-up that raced the suspension is never lost.
    pub wait: Option<WaitSpec>,
    /// Mark every sleep of the run still pending at `now` as cancelled (`wakeup()`).
    pub cancel_sleeps: bool,
    /// Task entries to run again (a retry): each becomes `awaiting_retry` with no attempt
    /// made, due at the transition's due time (else at `now`). An address the run has not
    /// recorded is left alone.
    pub rerun: Vec<CallRef>,
    /// Event records to delete (a retry clearing a child outcome the run observed, so that its
    /// replay waits for the retried child instead of replaying the old outcome).
    pub forget: Vec<SlotRef>,
    /// The operator making the change (recorded as the timeline's actor); `None` for an
    /// executor's own moves and for callers that give no name.
    pub actor: Option<String>,
    /// Time of the transition.
    pub now: Millis,
}

impl Transition {
    /// A bare move to `to` at `now`: no due time, output or error.
    pub fn to(to: RunStatus, now: Millis) -> Self {
        Transition {
            to,
            due_at: None,
            output: None,
            output_fingerprint: None,
            error: None,
            attempts: None,
            wait: None,
            cancel_sleeps: false,
            rerun: Vec::new(),
            forget: Vec::new(),
            actor: None,
            now,
        }
    }

    /// Moves the transition onto the clock of a store that reads `now` at this moment (its
    /// own clock, see [`ExecutorStore::put_sleep`](crate::ExecutorStore::put_sleep)): `now`
    /// becomes the store's, and a due time set without a wait set (a workflow retry, counted
    /// from the transition) keeps its distance from it, so it is the duration the writer
    /// meant whatever its clock says. A suspension's times are those of its records (its
    /// sleeps, stored by the store's clock) and stay as they are.
    pub fn rebase(&mut self, now: Millis) {
        if self.wait.is_none()
            && let Some(due) = &mut self.due_at
        {
            *due = due.saturating_add(now.saturating_sub(self.now));
        }
        self.now = now;
    }

    /// Whether it is a suspension waiting on a task retry: one whose times the store takes
    /// from its records ([`retry_times_from`](Transition::retry_times_from)).
    pub fn awaits_retries(&self) -> bool {
        self.wait
            .as_ref()
            .is_some_and(|wait| !wait.retries.is_empty())
    }

    /// A suspension waiting on task retries takes their times from `recorded`, the store's
    /// entries awaiting a retry as `(address, attempts made, retry time)` (the store's time,
    /// see [`ExecutorStore::put_entry`](crate::ExecutorStore::put_entry)), and is then due at
    /// the earliest time of its wait set. A retry with no such entry keeps its time.
    pub fn retry_times_from(&mut self, recorded: &[(String, u32, Millis)]) {
        let Some(wait) = &mut self.wait else {
            return;
        };
        let mut changed = false;
        for retry in &mut wait.retries {
            let attempts = retry.attempt.saturating_sub(1);
            let at = recorded
                .iter()
                .filter(|(address, made, _)| *address == retry.address && *made == attempts)
                .map(|(_, _, at)| *at)
                .min();
            if let Some(at) = at
                && at != retry.at
            {
                retry.at = at;
                changed = true;
            }
        }
        if changed {
            self.due_at = wait.earliest();
        }
    }

    /// Sets the due time.
    pub fn due_at(mut self, due_at: Millis) -> Self {
        self.due_at = Some(due_at);
        self
    }

    /// Sets the error.
    pub fn error(mut self, error: Failure) -> Self {
        self.error = Some(error);
        self
    }

    /// Sets the output of a completing run and the fingerprint of its schema.
    pub fn output(mut self, output: Value, fingerprint: impl Into<String>) -> Self {
        self.output = Some(output);
        self.output_fingerprint = Some(fingerprint.into());
        self
    }

    /// Sets the attempt count (a workflow retry).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// Sets what a suspension waits on.
    pub fn wait(mut self, wait: WaitSpec) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Marks the run's pending sleeps cancelled (`wakeup()`).
    pub fn cancel_sleeps(mut self) -> Self {
        self.cancel_sleeps = true;
        self
    }

    /// Records who makes the change (an operator's name: the timeline's actor).
    pub fn by(mut self, actor: Option<String>) -> Self {
        self.actor = actor;
        self
    }

    /// Deletes these event records (see [`Transition::forget`]).
    pub fn forget(mut self, slots: Vec<SlotRef>) -> Self {
        self.forget = slots;
        self
    }

    /// Runs these task entries again (see [`Transition::rerun`]).
    pub fn rerun(mut self, calls: Vec<CallRef>) -> Self {
        self.rerun = calls;
        self
    }
}

/// One transition of [`ClientStore::transition_all`](crate::ClientStore::transition_all): a run, the
/// revision the caller last saw, and the change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Move {
    /// The run.
    pub id: RunId,
    /// The revision the caller expects it to have.
    pub expected: u64,
    /// The change.
    pub transition: Transition,
}

impl Move {
    /// Moves run `id`, expected at revision `expected`, by `transition`.
    pub fn new(id: RunId, expected: u64, transition: Transition) -> Self {
        Move {
            id,
            expected,
            transition,
        }
    }
}

/// What a claim refresh learns of the run it keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClaimState {
    /// An operator asked to pause the run: its executor starts no new task, lets those in
    /// flight record their results, and moves it to `paused`.
    pub pause_requested: bool,
}

/// How claim recovery judges claims (see
/// [`Sweeper::release_stale_claims`](crate::Sweeper::release_stale_claims)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClaimTiming {
    /// A claim unrefreshed this long (ms) is released, once confirmed.
    pub idle_timeout_ms: i64,
    /// A claim unrefreshed this long (ms) is marked stale, and a mark this old confirms it:
    /// one refresh interval plus a margin, within which a live executor refreshes as soon as
    /// the store answers it.
    pub confirm_ms: i64,
    /// Since when the sweeper has held its lease without a break (the store answering it at
    /// least every few seconds), if it knows: a mark made since then is trusted however old,
    /// for the store answered the marked claim's executor throughout too. Without it, a mark
    /// older than two windows proves nothing (no sweep ran between, the store was maybe out
    /// of reach) and is made anew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks_trusted_since: Option<Millis>,
}

impl ClaimTiming {
    /// The timing of executors that refresh every `refresh_interval_ms` and whose claims
    /// expire after `idle_timeout_ms`: the confirmation window is one refresh interval plus a
    /// quarter of one (at least a second).
    pub fn new(idle_timeout_ms: i64, refresh_interval_ms: i64) -> Self {
        let margin = (refresh_interval_ms / 4).max(1_000);
        ClaimTiming {
            idle_timeout_ms,
            confirm_ms: refresh_interval_ms.saturating_add(margin),
            marks_trusted_since: None,
        }
    }

    /// The timing of a sweeper that has held its lease without a break since `since` (see
    /// [`marks_trusted_since`](ClaimTiming::marks_trusted_since)).
    pub fn leading_since(mut self, since: Option<Millis>) -> Self {
        self.marks_trusted_since = since;
        self
    }

    /// Whether a claim marked stale at `mark` is still judged by its mark at `now`: made
    /// within two windows, or since the sweeper has led without a break.
    pub fn mark_holds(&self, mark: Millis, now: Millis) -> bool {
        mark > now - 2 * self.confirm_ms
            || self.marks_trusted_since.is_some_and(|since| mark >= since)
    }
}

/// What a claim took, and what the store tells its executor with it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Claimed {
    /// The runs claimed, now `running` under the claimer (the oldest queued first).
    pub runs: Vec<RunRecord>,
    /// The claim idle timeout in force when they were claimed
    /// ([`ConfigKey::ClaimIdleTimeout`](crate::ConfigKey::ClaimIdleTimeout)): claim recovery
    /// releases a run whose claim was not refreshed for this long. `None` when nothing was
    /// claimed.
    pub claim_idle_timeout_ms: Option<Millis>,
    /// Whether this may be the answer an earlier send of the same claim got, and lost (see
    /// `HttpStore`: a claimer's next claim sends the one that got no answer again, and a
    /// server answers it with its first answer): its runs were then claimed at that earlier
    /// send, so their heartbeats say nothing of the store's time now ([`now`](Claimed::now) is
    /// not a reading of the store's clock). Set by the caller's side, never sent.
    #[serde(skip)]
    pub repeated: bool,
}

impl Claimed {
    /// `runs`, claimed under the idle timeout `claim_idle_timeout_ms` (`None` when `runs` is
    /// empty).
    pub fn new(runs: Vec<RunRecord>, claim_idle_timeout_ms: Millis) -> Self {
        let claim_idle_timeout_ms = (!runs.is_empty()).then_some(claim_idle_timeout_ms);
        Claimed {
            runs,
            claim_idle_timeout_ms,
            repeated: false,
        }
    }

    /// The store's time of the claim (the runs' first heartbeat), by the clock it times
    /// claims with; `None` when nothing was claimed.
    pub fn now(&self) -> Option<Millis> {
        self.runs.iter().filter_map(|run| run.heartbeat_at).max()
    }
}

/// A worker asking for runs to execute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ClaimRequest {
    /// The executor's identity, recorded as the owner.
    pub owner: String,
    /// The workflow versions it serves.
    pub namespaces: Vec<Namespace>,
    /// The pool it serves.
    pub pool: String,
    /// At most this many runs.
    pub limit: u32,
    /// Runs not to claim now (this executor released them and backs off from them).
    pub skip: Vec<RunId>,
    /// Claim time (also the first heartbeat).
    pub now: Millis,
}

impl ClaimRequest {
    /// A request by `owner` for up to `limit` runs of `namespaces` in `pool`, at `now`.
    pub fn new(
        owner: impl Into<String>,
        namespaces: Vec<Namespace>,
        pool: impl Into<String>,
        limit: u32,
        now: Millis,
    ) -> Self {
        ClaimRequest {
            owner: owner.into(),
            namespaces,
            pool: pool.into(),
            limit,
            skip: Vec::new(),
            now,
        }
    }

    /// Leaves these runs unclaimed (a run this executor cannot read, left for another).
    pub fn skip(mut self, runs: Vec<RunId>) -> Self {
        self.skip = runs;
        self
    }
}
