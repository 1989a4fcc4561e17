//! API keys on both SQL databases: one row per key (see [`KeyStore`]).

use async_trait::async_trait;

use super::dialect::Row;
use super::{Dialect, On, SqlStore, params};
use crate::{ApiKeyRecord, KeyStore, Millis, StoreError};

const COLUMNS: &str = "id, name, secret_sha256, scopes, created_at, revoked_at";

impl<D: Dialect> SqlStore<D> {
    /// `sql` for this dialect, or the refusal of a schema without keys.
    fn key_statement(&self, sql: &str) -> Result<String, StoreError> {
        if !self.level.keys {
            return Err(StoreError::Invalid {
                message: "API keys need the key table of this release's schema; migrate the \
                          store first (`aiki migrate`)"
                    .to_owned(),
            });
        }
        Ok((D::DRIVER.render)(sql))
    }
}

fn decode(row: &Row) -> Result<ApiKeyRecord, StoreError> {
    let mut key = ApiKeyRecord::new(
        row.text(0)?.unwrap_or_default(),
        row.text(1)?.unwrap_or_default(),
        row.text(2)?.unwrap_or_default(),
        ApiKeyRecord::parse_scopes(&row.text(3)?.unwrap_or_default())?,
        row.int(4)?.unwrap_or_default(),
    );
    key.revoked_at = row.int(5)?;
    Ok(key)
}

#[async_trait]
impl<D: Dialect> KeyStore for SqlStore<D> {
    async fn create_key(&self, key: ApiKeyRecord) -> Result<(), StoreError> {
        let sql = self.key_statement(&format!(
            "INSERT INTO aiki_api_keys ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (id) DO NOTHING"
        ))?;
        let params = params![
            key.id.as_str(),
            key.name.as_str(),
            key.secret_sha256.as_str(),
            key.scope_list(),
            key.created_at,
            key.revoked_at,
        ];
        if self.execute(On::Write, &sql, &params).await? == 0 {
            return Err(StoreError::AlreadyExists {
                what: format!("API key {}", key.id),
            });
        }
        Ok(())
    }

    async fn key(&self, id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        if !self.level.keys {
            return Ok(None);
        }
        let sql = self.key_statement(&format!(
            "SELECT {COLUMNS} FROM aiki_api_keys WHERE id = $1"
        ))?;
        self.fetch_optional(On::Read, &sql, &params![id])
            .await?
            .as_ref()
            .map(decode)
            .transpose()
    }

    async fn keys(&self) -> Result<Vec<ApiKeyRecord>, StoreError> {
        if !self.level.keys {
            return Ok(Vec::new());
        }
        let sql = self.key_statement(&format!(
            "SELECT {COLUMNS} FROM aiki_api_keys ORDER BY created_at, id"
        ))?;
        self.fetch(On::Read, &sql, &[])
            .await?
            .iter()
            .map(decode)
            .collect()
    }

    async fn revoke_key(&self, id: &str, now: Millis) -> Result<ApiKeyRecord, StoreError> {
        let sql = self.key_statement(&format!(
            "UPDATE aiki_api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 \
             RETURNING {COLUMNS}"
        ))?;
        match self
            .fetch_optional(On::Write, &sql, &params![id, now])
            .await?
        {
            Some(row) => decode(&row),
            None => Err(StoreError::NotFound {
                what: format!("API key {id}"),
            }),
        }
    }
}
