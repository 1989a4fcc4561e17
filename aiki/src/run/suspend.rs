//! Suspension: the durable waits a workflow blocks on, and how a run waiting only on them
//! suspends.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use aiki_store::{Millis, RunId, RunStatus, WaitSpec};

use super::Run;

/// A durable wait: what a suspended run waits for.
///
/// Ordered by kind, then by field, so that a suspension lists its waits in one order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Block {
    Sleep {
        wake_at: Millis,
        name: String,
    },
    Retry {
        at: Millis,
        address: String,
        attempt: u32,
    },
    Event {
        name: String,
        index: u32,
        deadline: Option<Millis>,
    },
    Child {
        id: RunId,
        deadline: Option<Millis>,
    },
    /// All of these children (`run.join_children(..)`): the run wakes once they have all
    /// ended, or at the first that did not complete.
    Join {
        ids: Vec<RunId>,
    },
}

/// How a run suspends: computed from its blocks.
#[derive(Debug, PartialEq)]
pub(crate) struct Suspension {
    pub(crate) status: RunStatus,
    pub(crate) due_at: Option<Millis>,
    pub(crate) wait: WaitSpec,
}

impl Run {
    /// Blocks the workflow on a durable wait, forever: the executor drops the workflow future
    /// when only such waits remain, and re-executes the workflow when one is satisfied.
    pub(super) fn block(&self, block: Block) -> Blocked<'_> {
        let mut replay = self.replay();
        let id = replay.next_block;
        replay.next_block += 1;
        replay.blocks.insert(id, block);
        Blocked { run: self, id }
    }

    /// `Some` when the workflow waits only on durable things: suspend it.
    pub(crate) fn suspension(&self) -> Option<Suspension> {
        let replay = self.replay();
        if replay.in_flight > 0 || replay.blocks.is_empty() {
            return None;
        }
        let mut status = RunStatus::Sleeping;
        let mut due_at: Option<Millis> = None;
        let mut wait = WaitSpec::default();
        let mut earliest = |at: Millis| due_at = Some(due_at.map_or(at, |due| due.min(at)));
        let rank = |status: RunStatus| match status {
            RunStatus::AwaitingChildWorkflow => 3,
            RunStatus::AwaitingEvent => 2,
            RunStatus::AwaitingRetry => 1,
            _ => 0,
        };
        let mut blocks: Vec<&Block> = replay.blocks.values().collect();
        blocks.sort_unstable();
        // One join and nothing else on children: an all-of wait. Otherwise any child's end
        // wakes the run (two joins at once would otherwise wait for both).
        let joins = blocks
            .iter()
            .filter(|block| matches!(block, Block::Join { .. }))
            .count();
        let singles = blocks
            .iter()
            .filter(|block| matches!(block, Block::Child { .. }))
            .count();
        wait = wait.all_children(joins == 1 && singles == 0);
        // Each child once, whether it is awaited alone, in a join, or both (a set: a join of
        // 1,000 children would otherwise compare each with all before it).
        let mut awaited = std::collections::HashSet::new();
        for block in blocks {
            let block_status = match block {
                Block::Sleep { wake_at, name } => {
                    earliest(*wake_at);
                    wait = wait.sleep(name.clone(), *wake_at);
                    RunStatus::Sleeping
                }
                Block::Retry {
                    at,
                    address,
                    attempt,
                } => {
                    earliest(*at);
                    wait = wait.retry(address.clone(), *attempt, *at);
                    RunStatus::AwaitingRetry
                }
                Block::Event {
                    name,
                    index,
                    deadline,
                } => {
                    deadline.map(&mut earliest);
                    wait = wait.event_until(name.clone(), *index, *deadline);
                    RunStatus::AwaitingEvent
                }
                Block::Child { id, deadline } => {
                    deadline.map(&mut earliest);
                    if awaited.insert(*id) {
                        wait = wait.child_until(*id, *deadline);
                    }
                    RunStatus::AwaitingChildWorkflow
                }
                Block::Join { ids } => {
                    for id in ids {
                        if awaited.insert(*id) {
                            wait = wait.child(*id);
                        }
                    }
                    RunStatus::AwaitingChildWorkflow
                }
            };
            if rank(block_status) > rank(status) {
                status = block_status;
            }
        }
        Some(Suspension {
            status,
            due_at,
            wait,
        })
    }
}

/// A durable wait that never completes in this execution; dropping it unregisters it.
pub(super) struct Blocked<'r> {
    run: &'r Run,
    id: u64,
}

impl Future for Blocked<'_> {
    type Output = std::convert::Infallible;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

impl Drop for Blocked<'_> {
    fn drop(&mut self) {
        if let Ok(mut replay) = self.run.inner.replay.lock() {
            replay.blocks.remove(&self.id);
        }
    }
}
