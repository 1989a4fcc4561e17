//! The memory store's retention of ended runs (see [`crate::Sweeper::purge_runs`]).

use std::collections::BTreeMap;

use super::state::State;
use crate::{Millis, RunId, RunRecord};

/// Whether `run` ended before `cutoff`.
fn ended_before(run: &RunRecord, cutoff: Millis) -> bool {
    run.status.is_terminal() && run.updated_at < cutoff
}

impl State {
    /// Up to `limit` runs ended before `cutoff` whose parent is gone or ended before it too,
    /// the oldest first.
    pub(super) fn purgeable(&self, cutoff: Millis, limit: u32) -> Vec<RunId> {
        let mut ended: Vec<(Millis, RunId)> = self
            .runs
            .values()
            .filter(|run| ended_before(run, cutoff))
            .filter(|run| {
                run.parent.as_ref().is_none_or(|parent| {
                    self.runs
                        .get(&parent.run_id)
                        .is_none_or(|parent| ended_before(parent, cutoff))
                })
            })
            .map(|run| (run.updated_at, run.id))
            .collect();
        ended.sort_unstable();
        ended.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        ended.into_iter().map(|(_, id)| id).collect()
    }

    /// Forgets `ids` with everything recorded for them. (The change stream keeps its entries:
    /// its sequence numbers are their positions.)
    pub(super) fn purge(&mut self, ids: &[RunId]) {
        for id in ids {
            let Some(run) = self.runs.remove(id) else {
                continue;
            };
            if let Some(reference) = &run.reference_id {
                let key = (run.namespace.to_string(), reference.clone());
                if self.references.get(&key) == Some(id) {
                    self.references.remove(&key);
                }
            }
            drop_run(&mut self.entries, *id);
            drop_run(&mut self.sleeps, *id);
            drop_run(&mut self.events, *id);
            let revisions: Vec<u64> = self
                .timeline
                .range((*id, 0)..=(*id, u64::MAX))
                .map(|((_, revision), _)| *revision)
                .collect();
            for revision in revisions {
                self.timeline.remove(&(*id, revision));
            }
        }
    }
}

/// Removes the rows of `run` from a table keyed by run first.
fn drop_run<V>(table: &mut BTreeMap<(RunId, String, u32), V>, run: RunId) {
    let keys: Vec<_> = table
        .range((run, String::new(), 0)..)
        .take_while(|((run_id, _, _), _)| *run_id == run)
        .map(|(key, _)| key.clone())
        .collect();
    for key in keys {
        table.remove(&key);
    }
}
