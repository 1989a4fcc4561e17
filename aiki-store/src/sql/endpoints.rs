//! Push endpoints on both SQL databases: one row per workflow version, its secrets a JSON
//! array (see [`EndpointStore`]).

use async_trait::async_trait;

use super::dialect::Row;
use super::{Dialect, On, SqlStore, params};
use crate::model::written_meanwhile;
use crate::{EndpointRecord, EndpointSecret, EndpointStore, Namespace, StoreError};

const COLUMNS: &str =
    "workflow, version, url, budget_ms, secrets, revision, created_at, updated_at";

impl<D: Dialect> SqlStore<D> {
    /// `sql` for this dialect, or the refusal of a schema without endpoints.
    fn endpoint_statement(&self, sql: &str) -> Result<String, StoreError> {
        if !self.level.endpoints {
            return Err(StoreError::Invalid {
                message: "push endpoints need the endpoint table of this release's schema; \
                          migrate the store first (`aiki migrate`)"
                    .to_owned(),
            });
        }
        Ok((D::DRIVER.render)(sql))
    }
}

fn decode(row: &Row) -> Result<EndpointRecord, StoreError> {
    let secrets: Vec<EndpointSecret> = serde_json::from_str(&row.text(4)?.unwrap_or_default())
        .map_err(|error| StoreError::Corrupt {
            message: format!("the secrets of a push endpoint cannot be read: {error}"),
        })?;
    Ok(EndpointRecord {
        namespace: Namespace::new(
            row.text(0)?.unwrap_or_default(),
            row.text(1)?.unwrap_or_default(),
        ),
        url: row.text(2)?.unwrap_or_default(),
        budget_ms: row.int(3)?.unwrap_or_default(),
        secrets,
        revision: u64::try_from(row.int(5)?.unwrap_or_default()).unwrap_or_default(),
        created_at: row.int(6)?.unwrap_or_default(),
        updated_at: row.int(7)?.unwrap_or_default(),
    })
}

#[async_trait]
impl<D: Dialect> EndpointStore for SqlStore<D> {
    async fn put_endpoint(
        &self,
        mut endpoint: EndpointRecord,
        expected: Option<u64>,
    ) -> Result<EndpointRecord, StoreError> {
        let secrets =
            serde_json::to_string(&endpoint.secrets).map_err(|error| StoreError::Invalid {
                message: format!("the secrets of a push endpoint cannot be written: {error}"),
            })?;
        let revision = expected.map_or(1, |revision| revision + 1);
        let revision_param = i64::try_from(revision).unwrap_or(i64::MAX);
        let ns = &endpoint.namespace;
        let written = match expected {
            None => {
                let sql = self.endpoint_statement(&format!(
                    "INSERT INTO aiki_endpoints ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                     ON CONFLICT (workflow, version) DO NOTHING"
                ))?;
                let params = params![
                    ns.workflow.as_str(),
                    ns.version.as_str(),
                    endpoint.url.as_str(),
                    endpoint.budget_ms,
                    secrets,
                    revision_param,
                    endpoint.created_at,
                    endpoint.updated_at,
                ];
                self.execute(On::Write, &sql, &params).await?
            }
            Some(held) => {
                let sql = self.endpoint_statement(
                    "UPDATE aiki_endpoints SET url = $3, budget_ms = $4, secrets = $5, \
                     revision = $6, updated_at = $7 \
                     WHERE workflow = $1 AND version = $2 AND revision = $8",
                )?;
                let params = params![
                    ns.workflow.as_str(),
                    ns.version.as_str(),
                    endpoint.url.as_str(),
                    endpoint.budget_ms,
                    secrets,
                    revision_param,
                    endpoint.updated_at,
                    i64::try_from(held).unwrap_or(i64::MAX),
                ];
                self.execute(On::Write, &sql, &params).await?
            }
        };
        if written == 0 {
            return Err(written_meanwhile(ns, expected));
        }
        endpoint.revision = revision;
        Ok(endpoint)
    }

    async fn endpoints(&self) -> Result<Vec<EndpointRecord>, StoreError> {
        if !self.level.endpoints {
            return Ok(Vec::new());
        }
        let sql = self.endpoint_statement(&format!(
            "SELECT {COLUMNS} FROM aiki_endpoints ORDER BY workflow, version"
        ))?;
        self.fetch(On::Read, &sql, &[])
            .await?
            .iter()
            .map(decode)
            .collect()
    }

    async fn remove_endpoint(&self, namespace: &Namespace) -> Result<EndpointRecord, StoreError> {
        let sql = self.endpoint_statement(&format!(
            "DELETE FROM aiki_endpoints WHERE workflow = $1 AND version = $2 RETURNING {COLUMNS}"
        ))?;
        let params = params![namespace.workflow.as_str(), namespace.version.as_str()];
        match self.fetch_optional(On::Write, &sql, &params).await? {
            Some(row) => decode(&row),
            None => Err(StoreError::NotFound {
                what: format!("a push endpoint of {namespace}"),
            }),
        }
    }
}
