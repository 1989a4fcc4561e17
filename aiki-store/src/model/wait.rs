//! The wait set: what a suspended run waits on, stored with its suspension.

use serde::{Deserialize, Serialize};

use super::{Millis, RunId};
use crate::RunStatus;

/// What a suspended run waits on, written with its suspension and returned with the run
/// ([`RunRecord::wait`](crate::RunRecord::wait)).
///
/// The store uses it twice. In the suspension's own statement: a run whose awaited event is
/// already there, or whose awaited children already ended, is queued at once
/// instead, so a wake-up that raced the suspension is never lost. And afterwards, to decide
/// what wakes the run, whatever its status label says (a run awaiting a child and an event at
/// once is stored as `awaiting_child_workflow`): a child it awaits ending (with
/// [`all_children`](WaitSpec::all_children): the last one, or the first that did not
/// complete), and any event if it awaits one ([`woken_by_event`](WaitSpec::woken_by_event)):
/// code deployed since the suspension may wait on another name first, and that event may never
/// come again. Timers (sleeps, retries, timeouts) wake it through its due time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WaitSpec {
    /// Sleeps it waits out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sleeps: Vec<AwaitedSleep>,
    /// Events it waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<AwaitedEvent>,
    /// Child runs it waits to end.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<AwaitedChild>,
    /// `true`: it waits for *all* of `children` to end, and wakes early only when one of them
    /// fails or is cancelled (`run.join_children(..)`); `false`: any one ending wakes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_children: bool,
    /// Task retries it waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retries: Vec<AwaitedRetry>,
}

/// A sleep a run waits out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AwaitedSleep {
    /// The sleep's name.
    pub name: String,
    /// When it ends.
    pub wake_at: Millis,
}

/// An event a run waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AwaitedEvent {
    /// The event's name.
    pub name: String,
    /// Which event of that name: the run has consumed `index` before it.
    pub index: u32,
    /// When the wait times out, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_at: Option<Millis>,
}

/// A child run a run waits to end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AwaitedChild {
    /// The child run.
    pub id: RunId,
    /// When the wait times out, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_at: Option<Millis>,
}

impl AwaitedChild {
    /// The statuses the wait is for: the terminal ones.
    pub fn until(&self) -> impl Iterator<Item = RunStatus> {
        RunStatus::ALL
            .into_iter()
            .filter(|status| status.is_terminal())
    }
}

/// A task retry a run waits for (`awaiting_retry`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AwaitedRetry {
    /// The task's manifest address.
    pub address: String,
    /// The number of the attempt that runs next (2 for the first retry).
    pub attempt: u32,
    /// When it runs.
    pub at: Millis,
}

impl WaitSpec {
    /// Also waits out the sleep `name`, until `wake_at`.
    pub fn sleep(mut self, name: impl Into<String>, wake_at: Millis) -> Self {
        self.sleeps.push(AwaitedSleep {
            name: name.into(),
            wake_at,
        });
        self
    }

    /// Also waits for the `index`-th event named `name`, without a timeout.
    pub fn event(self, name: impl Into<String>, index: u32) -> Self {
        self.event_until(name, index, None)
    }

    /// Also waits for the `index`-th event named `name`, timing out at `timeout_at`.
    pub fn event_until(
        mut self,
        name: impl Into<String>,
        index: u32,
        timeout_at: Option<Millis>,
    ) -> Self {
        self.events.push(AwaitedEvent {
            name: name.into(),
            index,
            timeout_at,
        });
        self
    }

    /// Also waits for a child run to end, without a timeout.
    pub fn child(self, child: RunId) -> Self {
        self.child_until(child, None)
    }

    /// Also waits for a child run to end, timing out at `timeout_at`.
    pub fn child_until(mut self, child: RunId, timeout_at: Option<Millis>) -> Self {
        self.children.push(AwaitedChild {
            id: child,
            timeout_at,
        });
        self
    }

    /// Waits for all of its children to end (or the first to fail), instead of any one.
    pub fn all_children(mut self, all: bool) -> Self {
        self.all_children = all;
        self
    }

    /// Also waits for attempt `attempt` of the task at `address`, due at `at`.
    pub fn retry(mut self, address: impl Into<String>, attempt: u32, at: Millis) -> Self {
        self.retries.push(AwaitedRetry {
            address: address.into(),
            attempt,
            at,
        });
        self
    }

    /// Whether an event arriving wakes a run in `status` with this wait set (`None`: a run
    /// suspended by a release that stored none): a suspended run whose wait set awaits any
    /// event, or a run `awaiting_event` without a wait set.
    pub fn woken_by_event(status: RunStatus, wait: Option<&WaitSpec>) -> bool {
        match wait {
            Some(wait) => status.is_suspended() && !wait.events.is_empty(),
            None => status == RunStatus::AwaitingEvent,
        }
    }

    /// Whether it waits for something other runs or callers bring (an event, a child's end),
    /// rather than only for time.
    pub fn awaits_others(&self) -> bool {
        !self.events.is_empty() || !self.children.is_empty()
    }

    /// The earliest of its times (sleeps' ends, timeouts, retries): when a run suspended
    /// with it is due, if it waits on a time at all.
    pub fn earliest(&self) -> Option<Millis> {
        let sleeps = self.sleeps.iter().map(|sleep| sleep.wake_at);
        let events = self.events.iter().filter_map(|event| event.timeout_at);
        let children = self.children.iter().filter_map(|child| child.timeout_at);
        let retries = self.retries.iter().map(|retry| retry.at);
        sleeps.chain(events).chain(children).chain(retries).min()
    }

    /// The stored form: JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("BUG: a wait set serializes")
    }
}
