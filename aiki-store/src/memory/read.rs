//! The memory store's reads.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::MemoryStore;
use super::state::{self};
use crate::ReadStore;
use crate::{
    CatalogEntry, EntryKind, History, ListRuns, MAX_PAGE, Millis, RunCounts, RunId, RunPage,
    RunRecord, RunStatus, StatusChange, StoreError, WorkerRecord,
};

#[async_trait]
impl ReadStore for MemoryStore {
    async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        let state = self.lock();
        let run = state.run(id)?.clone();
        let in_run = |key: &(RunId, String, u32)| key.0 == id;
        Ok(History {
            entries: state
                .entries
                .iter()
                .filter(|(key, _)| in_run(key))
                .map(|(_, entry)| entry.clone())
                .collect(),
            sleeps: state
                .sleeps
                .iter()
                .filter(|(key, _)| in_run(key))
                .map(|(_, sleep)| sleep.clone())
                .collect(),
            events: state
                .events
                .iter()
                .filter(|(key, _)| in_run(key))
                .map(|(_, event)| event.clone())
                .collect(),
            children: state
                .entries
                .values()
                .filter(|entry| entry.run_id == id && entry.kind == EntryKind::Child)
                .filter_map(|entry| entry.output.as_ref()?.as_str()?.parse::<RunId>().ok())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter_map(|child| state.runs.get(&child))
                .map(|child| RunRecord {
                    input: serde_json::Value::Null,
                    ..child.clone()
                })
                .collect(),
            run,
        })
    }

    fn backend(&self) -> &'static str {
        "memory"
    }

    async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        self.lock().run(id).cloned()
    }

    async fn list_runs(&self, request: ListRuns) -> Result<RunPage, StoreError> {
        let limit = request.limit.min(MAX_PAGE);
        let state = self.lock();
        let mut runs: Vec<&RunRecord> = state
            .runs
            .values()
            .filter(|run| request.filter.matches(run))
            .filter(|run| {
                request.filter.schedule.as_deref().is_none_or(|name| {
                    state
                        .schedule_log
                        .iter()
                        .any(|row| row.schedule == name && row.run_id == Some(run.id))
                })
            })
            .filter(|run| {
                request
                    .after
                    .is_none_or(|cursor| (run.created_at, run.id) < (cursor.created_at, cursor.id))
            })
            .collect();
        runs.sort_by_key(|run| std::cmp::Reverse((run.created_at, run.id)));
        let page = runs.into_iter().take(limit as usize + 1).cloned().collect();
        Ok(RunPage::of(page, limit))
    }

    async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError> {
        let state = self.lock();
        let mut counts: BTreeMap<(&str, &str), RunCounts> = BTreeMap::new();
        for run in state.runs.values() {
            let key = (
                run.namespace.workflow.as_str(),
                run.namespace.version.as_str(),
            );
            let entry = counts
                .entry(key)
                .or_insert_with(|| RunCounts::new(run.namespace.clone()));
            entry.record(run.status, 1);
            if run.status == RunStatus::Queued {
                let since = run.queued_at.unwrap_or(run.created_at);
                let oldest = entry.oldest_queued_at.map_or(since, |at| at.min(since));
                entry.oldest_queued_at = Some(oldest);
            }
        }
        Ok(counts.into_values().collect())
    }

    async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError> {
        let state = self.lock();
        state.run(id)?;
        Ok(state
            .timeline
            .range((id, 0)..=(id, u64::MAX))
            .map(|(_, change)| change.worded())
            .collect())
    }

    async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        let state = self.lock();
        let mut entries: Vec<CatalogEntry> = state
            .catalog
            .values()
            .map(|entry| state::with_called_tasks(entry.clone(), &state.catalog_tasks))
            .collect();
        entries.sort_by(|a, b| {
            (&a.namespace, a.published_at, &a.fingerprint).cmp(&(
                &b.namespace,
                b.published_at,
                &b.fingerprint,
            ))
        });
        Ok(entries)
    }

    async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError> {
        let since = now.saturating_sub(within_ms);
        Ok(self
            .lock()
            .workers
            .values()
            .filter(|worker| worker.last_seen_at >= since)
            .cloned()
            .collect())
    }

    async fn changes_since(
        &self,
        cursor: &crate::ChangeCursor,
        limit: u32,
    ) -> Result<crate::ChangePage, StoreError> {
        let after: usize = match cursor.as_str() {
            "" => 0,
            text => text.parse().map_err(|_| StoreError::bad_cursor(cursor))?,
        };
        let state = self.lock();
        let limit = limit.min(MAX_PAGE) as usize;
        let (changes, next) = if limit == 0 {
            (Vec::new(), state.stream.len().max(after))
        } else {
            let changes: Vec<crate::Change> = state
                .stream
                .iter()
                .skip(after)
                .take(limit)
                .cloned()
                .collect();
            let next = after + changes.len();
            (changes, next)
        };
        Ok(crate::ChangePage {
            changes,
            next: crate::ChangeCursor::new(next.to_string()),
        })
    }

    async fn runtime_config(&self) -> Result<crate::RuntimeConfig, StoreError> {
        Ok(self.lock().config)
    }

    async fn schedules(&self) -> Result<Vec<crate::ScheduleRecord>, StoreError> {
        Ok(self.lock().schedules.values().cloned().collect())
    }

    async fn schedule(&self, name: &str) -> Result<crate::ScheduleRecord, StoreError> {
        self.lock()
            .schedules
            .get(name)
            .cloned()
            .ok_or_else(|| crate::schedule::not_found(name))
    }

    async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<crate::ScheduleLogEntry>, StoreError> {
        self.schedule_log_of(name, limit)
    }
}
