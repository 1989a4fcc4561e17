//! What workers publish: their heartbeats and the catalog of the versions they register.

use crate::{CatalogEntry, Millis, Namespace, StoreError, TaskDeclaration, WorkerRecord};

use super::SqlStore;
use super::decode;
use super::dialect::{Dialect, On, Row, params};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn record_worker(
        &self,
        mut worker: WorkerRecord,
        now: Millis,
    ) -> Result<WorkerRecord, StoreError> {
        let namespaces =
            serde_json::to_string(&worker.namespaces).expect("BUG: namespaces serialize");
        let fingerprints =
            serde_json::to_string(&worker.fingerprints).expect("BUG: fingerprints serialize");
        let seen = self
            .fetch_optional(
                On::Write,
                &self.sql.record_worker,
                &params![
                    worker.id.as_str(),
                    worker.host.as_str(),
                    i64::from(worker.pid),
                    namespaces,
                    worker.pool.as_str(),
                    worker.started_at,
                    now,
                    fingerprints,
                    worker.stopped_at,
                    worker.claim_refresh_ms,
                    worker.claim_idle_timeout_ms
                ],
            )
            .await?;
        if let Some(seen) = seen.map(|row| row.int(0)).transpose()?.flatten() {
            worker.last_seen_at = seen;
        }
        Ok(worker)
    }

    pub(crate) async fn list_workers(
        &self,
        now: Millis,
        within_ms: i64,
    ) -> Result<Vec<WorkerRecord>, StoreError> {
        let rows = self
            .fetch(On::Read, &self.sql.list_workers, &params![now, within_ms])
            .await?;
        rows.into_iter()
            .map(|row| {
                let id = row.text(0)?.unwrap_or_default();
                let namespaces: Vec<Namespace> =
                    serde_json::from_str(&row.text(3)?.unwrap_or_default()).map_err(|error| {
                        StoreError::Corrupt {
                            message: format!("the namespaces of worker `{id}`: {error}"),
                        }
                    })?;
                let fingerprints = match row.text(7)? {
                    Some(text) => {
                        serde_json::from_str(&text).map_err(|error| StoreError::Corrupt {
                            message: format!("the fingerprints of worker `{id}`: {error}"),
                        })?
                    }
                    None => Default::default(),
                };
                Ok(WorkerRecord {
                    host: row.text(1)?.unwrap_or_default(),
                    pid: decode::unsigned(row.int(2)?.unwrap_or_default(), "pid")?,
                    namespaces,
                    pool: row.text(4)?.unwrap_or_default(),
                    started_at: row.int(5)?.unwrap_or_default(),
                    last_seen_at: row.int(6)?.unwrap_or_default(),
                    fingerprints,
                    stopped_at: row.int(8)?,
                    claim_refresh_ms: row.int(9)?,
                    claim_idle_timeout_ms: row.int(10)?,
                    id,
                })
            })
            .collect()
    }

    pub(crate) async fn prune_workers(
        &self,
        lease: &crate::Lease,
        now: Millis,
        older_than_ms: i64,
    ) -> Result<u64, StoreError> {
        let params = self.fenced(&params![now, older_than_ms], lease);
        self.execute(On::Write, &self.sql.prune_workers, &params)
            .await
    }

    pub(crate) async fn publish_catalog(
        &self,
        mut entry: CatalogEntry,
        now: Millis,
    ) -> Result<CatalogEntry, StoreError> {
        let json = serde_json::to_string(&entry).expect("BUG: a catalog entry serializes");
        let params = params![
            entry.namespace.workflow.as_str(),
            entry.namespace.version.as_str(),
            entry.fingerprint.as_str(),
            json,
            entry.published_by.as_str(),
            now
        ];
        let (Some(build), Some(stored)) = (&self.sql.publish_build, &self.sql.catalog_build) else {
            // A schema before the operations migration keeps one entry per version.
            let published = self
                .fetch_optional(On::Write, &self.sql.publish_catalog, &params)
                .await?;
            entry.published_at = published
                .map(|row| row.int(0))
                .transpose()?
                .flatten()
                .unwrap_or(now);
            return Ok(entry);
        };
        // The build's entry, first publication winning; a new build is also the latest entry of
        // its version, which releases that read only `aiki_catalog` see.
        let mut tx = self.begin().await?;
        if self.execute(On::Tx(&mut tx), build, &params).await? > 0 {
            self.execute(On::Tx(&mut tx), &self.sql.publish_catalog, &params)
                .await?;
        }
        let row = self
            .fetch_optional(On::Tx(&mut tx), stored, &params[..3])
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                message: format!(
                    "the catalog entry of {} build {} vanished as it was published",
                    entry.namespace, entry.fingerprint
                ),
            })?;
        self.commit(tx).await?;
        let mut stored = catalog_entry(&row)?;
        stored.add_called(
            self.called_tasks(&stored.namespace, &stored.fingerprint)
                .await?,
        );
        Ok(stored)
    }

    pub(crate) async fn add_catalog_tasks(
        &self,
        namespace: &Namespace,
        fingerprint: &str,
        tasks: Vec<TaskDeclaration>,
    ) -> Result<(), StoreError> {
        let Some(add) = &self.sql.add_catalog_task else {
            return Ok(());
        };
        let mut tx = self.begin().await?;
        for task in &tasks {
            let declaration =
                serde_json::to_string(task).expect("BUG: a task declaration serializes");
            let params = params![
                namespace.workflow.as_str(),
                namespace.version.as_str(),
                fingerprint,
                task.name.as_str(),
                declaration
            ];
            self.execute(On::Tx(&mut tx), add, &params).await?;
        }
        self.commit(tx).await
    }

    pub(crate) async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        let rows = self.fetch(On::Read, &self.sql.catalog, &[]).await?;
        let mut entries = rows
            .iter()
            .map(catalog_entry)
            .collect::<Result<Vec<_>, _>>()?;
        for (namespace, fingerprint, task) in self.all_called_tasks().await? {
            if let Some(entry) = entries
                .iter_mut()
                .find(|entry| entry.namespace == namespace && entry.fingerprint == fingerprint)
            {
                entry.add_called([task]);
            }
        }
        Ok(entries)
    }

    /// The tasks the runs of one build were seen calling.
    async fn called_tasks(
        &self,
        namespace: &Namespace,
        fingerprint: &str,
    ) -> Result<Vec<TaskDeclaration>, StoreError> {
        Ok(self
            .all_called_tasks()
            .await?
            .into_iter()
            .filter(|(of, print, _)| of == namespace && print == fingerprint)
            .map(|(_, _, task)| task)
            .collect())
    }

    /// Every task runs were seen calling, with the version and fingerprint of their build.
    async fn all_called_tasks(
        &self,
    ) -> Result<Vec<(Namespace, String, TaskDeclaration)>, StoreError> {
        let Some(select) = &self.sql.catalog_tasks else {
            return Ok(Vec::new());
        };
        let rows = self.fetch(On::Read, select, &[]).await?;
        rows.iter()
            .map(|row| {
                let text = |at| row.text(at).map(Option::unwrap_or_default);
                let namespace = Namespace::new(text(0)?, text(1)?);
                let task =
                    serde_json::from_str(&text(3)?).map_err(|error| StoreError::Corrupt {
                        message: format!("a called task of the catalog: {error}"),
                    })?;
                Ok((namespace, text(2)?, task))
            })
            .collect()
    }
}

/// A catalog entry from its row: JSON, publisher, publication time.
fn catalog_entry(row: &Row) -> Result<CatalogEntry, StoreError> {
    let json = row.text(0)?.unwrap_or_default();
    let mut entry: CatalogEntry =
        serde_json::from_str(&json).map_err(|error| StoreError::Corrupt {
            message: format!("a catalog entry: {error}"),
        })?;
    entry.published_by = row.text(1)?.unwrap_or_default();
    entry.published_at = row.int(2)?.unwrap_or_default();
    Ok(entry)
}
