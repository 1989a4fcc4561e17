//! The runtime configuration on both SQL databases: one row per key set, the defaults for the
//! rest (see [`RuntimeConfig`]).

use super::{Dialect, On, SqlStore, params};
use crate::{ConfigKey, Millis, RuntimeConfig, StoreError};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn runtime_config(&self) -> Result<RuntimeConfig, StoreError> {
        let Some(read) = &self.sql.config else {
            return Ok(RuntimeConfig::default());
        };
        let rows = self.fetch(On::Read, read, &[]).await?;
        let stored = rows
            .iter()
            .map(|row| {
                Ok((
                    row.text(0)?.unwrap_or_default(),
                    row.int(1)?.unwrap_or_default(),
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(RuntimeConfig::from_stored(
            stored.iter().map(|(key, value)| (key.as_str(), *value)),
        ))
    }

    pub(crate) async fn set_config(
        &self,
        key: ConfigKey,
        value: i64,
        now: Millis,
    ) -> Result<RuntimeConfig, StoreError> {
        let Some(set) = &self.sql.set_config else {
            return Err(StoreError::Invalid {
                message: format!(
                    "setting `{key}` needs the configuration table of this release's schema; \
                     migrate the store first (`aiki migrate`)"
                ),
            });
        };
        key.check(value)?;
        self.execute(On::Write, set, &params![key.as_str(), value, now])
            .await?;
        self.runtime_config().await
    }
}
