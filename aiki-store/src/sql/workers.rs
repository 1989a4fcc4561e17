//! What workers publish: their heartbeats and the catalog of the versions they register.

use crate::{CatalogEntry, Millis, Namespace, StoreError, WorkerRecord};

use super::SqlStore;
use super::decode;
use super::dialect::{Dialect, On, params};

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
        now: Millis,
        older_than_ms: i64,
    ) -> Result<u64, StoreError> {
        self.execute(
            On::Write,
            &self.sql.prune_workers,
            &params![now, older_than_ms],
        )
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
        // The entry of this build, and (for releases that read only it) the latest per version,
        // together.
        let mut tx = self.begin().await?;
        let published = self
            .fetch_optional(On::Tx(&mut tx), &self.sql.publish_catalog, &params)
            .await?;
        if let Some(build) = &self.sql.publish_build {
            self.execute(On::Tx(&mut tx), build, &params).await?;
        }
        self.commit(tx).await?;
        entry.published_at = published
            .map(|row| row.int(0))
            .transpose()?
            .flatten()
            .unwrap_or(now);
        Ok(entry)
    }

    pub(crate) async fn catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        let rows = self.fetch(On::Read, &self.sql.catalog, &[]).await?;
        rows.into_iter()
            .map(|row| {
                let json = row.text(0)?.unwrap_or_default();
                let mut entry: CatalogEntry =
                    serde_json::from_str(&json).map_err(|error| StoreError::Corrupt {
                        message: format!("a catalog entry: {error}"),
                    })?;
                entry.published_by = row.text(1)?.unwrap_or_default();
                entry.published_at = row.int(2)?.unwrap_or_default();
                Ok(entry)
            })
            .collect()
    }
}
