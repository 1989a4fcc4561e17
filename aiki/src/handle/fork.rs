//! Forking an ended run: a new run of the same version that starts with what the ended one
//! recorded and may safely carry.
//!
//! Carried: completed task entries; child starts whose child has ended (the fork reads the
//! child's outcome) with their waits' records (the outcome the parent observed, a timeout);
//! sleeps with their original wake times; received events with their reference ids, and
//! recorded event-wait timeouts. Not carried: failed and unfinished task entries (they run
//! again), child starts whose child has not ended or that a fork drops (the fork starts the
//! child again), and their waits' records, so the new child's wait neither times out at once nor
//! replays the old outcome. A dropped child start that names a reference id is refused: its
//! start in the fork would find the same child run by that id. The fork records its lineage;
//! its tasks' idempotency keys derive from the lineage's first run, so a call the fork runs
//! again hands an outside system the original's key.

use std::collections::HashSet;

use aiki_store::{
    CreateOutcome, EntryKind, EntryStatus, History, Lineage, NewFork, NewRun, Queue, RunRecord,
    RunStatus,
};
use serde::Serialize;

use super::any::AnyRun;
use crate::address::{canonical_json, sha256_hex};
use crate::error::ClientError;

/// What a [`fork`](AnyRun::fork) leaves behind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ForkOptions {
    /// Addresses whose entries are not carried: they run again in the fork.
    pub drop: Vec<String>,
    /// An address whose entries, and everything recorded at or after the first of them, are
    /// not carried.
    pub drop_from: Option<String>,
}

impl ForkOptions {
    /// Runs the entries at `address` again in the fork.
    pub fn drop(mut self, address: impl Into<String>) -> Self {
        self.drop.push(address.into());
        self
    }

    /// Runs the entries at `address`, and everything recorded from the first of them on, again
    /// in the fork.
    pub fn drop_from(mut self, address: impl Into<String>) -> Self {
        self.drop_from = Some(address.into());
        self
    }
}

/// The statuses a fork applies to: the ended ones.
const ENDED: [RunStatus; 3] = [
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
];

impl AnyRun {
    /// Starts a new run of the same workflow version from this ended run, carrying what it
    /// recorded and may safely carry, minus what `options` drop: completed task entries, child
    /// starts whose child has ended, sleeps with their original wake times, received events
    /// with their reference ids, recorded event-wait timeouts. Failed and unfinished task
    /// entries run again, and a child that has not ended is started again. The fork records
    /// its lineage ([`RunRecord::lineage`]); its tasks' idempotency keys derive from the
    /// lineage's first run, so a call it runs again hands an outside system the original's
    /// key. Returns the fork, `queued`. Forking twice with the same options returns the same
    /// fork.
    /// To fork onto another version, [`aiki::impact::fork_onto`](crate::impact::fork_onto)
    /// first checks that the carried entries replay on it.
    ///
    /// Refused: a run that has not ended ([`ClientError::InvalidAction`]); an address to drop
    /// that the run has not recorded ([`ClientError::UnknownAddress`]); a dropped child start
    /// that names a reference id, whose start in the fork would find the same child run
    /// ([`ClientError::SharedChildDropped`]). Nothing is written then.
    pub async fn fork(&self, options: ForkOptions) -> Result<RunRecord, ClientError> {
        let (_, fork) = self.prepare_fork(&options, None).await?;
        self.create_fork(fork).await
    }

    /// The fork of this run `options` describe, onto `version` (`None`: its own), with the
    /// source's history; checked, not written.
    pub(crate) async fn prepare_fork(
        &self,
        options: &ForkOptions,
        version: Option<&str>,
    ) -> Result<(History, NewFork), ClientError> {
        let history = self.client().store.load_history(self.id()).await?;
        let source = &history.run;
        if !ENDED.contains(&source.status) {
            return Err(ClientError::InvalidAction {
                run_id: source.id,
                action: "fork",
                status: source.status,
                expected: ENDED.to_vec(),
            });
        }
        let recorded: HashSet<&str> = history.entries.iter().map(|e| e.address.as_str()).collect();
        for address in options.drop.iter().chain(&options.drop_from) {
            if !recorded.contains(address.as_str()) {
                return Err(ClientError::UnknownAddress {
                    run_id: source.id,
                    address: address.clone(),
                });
            }
        }
        // Onto another version, the version is part of what makes the fork the same fork.
        let hashed = match version {
            None => canonical_json(options),
            Some(version) => canonical_json(&(options, version)),
        };
        let options_hash = sha256_hex(hashed.expect("BUG: fork options serialize").as_bytes());
        let mut namespace = source.namespace.clone();
        if let Some(version) = version {
            namespace.version = version.to_owned();
        }
        let lineage = Lineage {
            forked_from: source.id,
            root: source.lineage.map_or(source.id, |lineage| lineage.root),
        };
        let run = NewRun::new(
            namespace,
            source.input.clone(),
            source.input_hash.clone(),
            self.client().clock.now(),
        )
        .reference_id(Some(format!("fork:{}:{}", source.id, &options_hash[..16])))
        .pool(source.pool.clone())
        .traceparent(source.traceparent.clone())
        .lineage(lineage)
        .by(self.client().actor.clone());
        let fork = carried(&history, options, run)?;
        Ok((history, fork))
    }

    /// Writes a fork [`prepare_fork`](AnyRun::prepare_fork) made.
    pub(crate) async fn create_fork(&self, fork: NewFork) -> Result<RunRecord, ClientError> {
        let client = self.client();
        let run = match client.sent(|| client.store.fork_run(fork.clone())).await? {
            CreateOutcome::Created(run) => {
                crate::metrics::run_started(&run.namespace);
                crate::wake::work_available();
                run
            }
            CreateOutcome::Existing(run) => run,
        };
        Ok(run)
    }
}

/// The fork of `history` as `run`: what it carries. A dropped child start that names a
/// reference id is refused.
fn carried(history: &History, options: &ForkOptions, run: NewRun) -> Result<NewFork, ClientError> {
    let id = run.id;
    // Everything recorded at or after the first entry at `drop_from` stays behind.
    let cutoff = options.drop_from.as_ref().and_then(|address| {
        history
            .entries
            .iter()
            .filter(|entry| &entry.address == address)
            .map(|entry| entry.updated_at)
            .min()
    });
    let before_cutoff = |at: i64| cutoff.is_none_or(|cutoff| at < cutoff);
    let child_of = |entry: &aiki_store::EntryRecord| {
        entry
            .output
            .as_ref()
            .and_then(|output| output.as_str())
            .and_then(|child| child.parse::<aiki_store::RunId>().ok())
            .and_then(|child| history.children.iter().find(|run| run.id == child))
    };
    let dropped = |entry: &aiki_store::EntryRecord| {
        options.drop.contains(&entry.address) || !before_cutoff(entry.updated_at)
    };
    let mut entries = Vec::new();
    // The child starts the fork starts again: their waits' records stay behind too.
    let mut restarted: HashSet<Queue> = HashSet::new();
    for entry in &history.entries {
        if entry.status != EntryStatus::Completed {
            continue;
        }
        if entry.kind == EntryKind::Child {
            let child = child_of(entry);
            if dropped(entry) {
                if let Some(reference_id) = child.and_then(|child| child.reference_id.clone()) {
                    return Err(ClientError::SharedChildDropped {
                        run_id: history.run.id,
                        address: entry.address.clone(),
                        reference_id,
                    });
                }
                restarted.insert(Queue::ChildWait(entry.address.clone()));
                continue;
            }
            if !child.is_some_and(|child| child.status.is_terminal()) {
                restarted.insert(Queue::ChildWait(entry.address.clone()));
                continue;
            }
        } else if dropped(entry) {
            continue;
        }
        let mut entry = entry.clone();
        entry.run_id = id;
        entries.push(entry);
    }
    let sleeps = history
        .sleeps
        .iter()
        .filter(|sleep| before_cutoff(sleep.wake_at.saturating_sub(sleep.duration_ms)))
        .filter(|sleep| !restarted.contains(&sleep.queue()))
        .map(|sleep| {
            let mut sleep = sleep.clone();
            sleep.run_id = id;
            sleep
        })
        .collect();
    let events = history
        .events
        .iter()
        .filter(|event| before_cutoff(event.received_at))
        .filter(|event| !restarted.contains(&event.queue()))
        .map(|event| {
            let mut event = event.clone();
            event.run_id = id;
            event
        })
        .collect();
    Ok(NewFork::new(run, entries, sleeps, events))
}
