//! Leases on both SQL databases: taking, renewing and giving them up, and the parameters that
//! fence a sweep by one (see [`statements`](super::statements)' `fence`).

use super::{Dialect, On, Param, SqlStore, params};
use crate::{Lease, Millis, StoreError};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl_ms: i64,
        now: Millis,
    ) -> Result<Lease, StoreError> {
        let (Some(acquire), Some(read)) = (&self.sql.acquire_lease, &self.sql.lease) else {
            // A schema without leases: every process sweeps unfenced, as they all did then.
            return Ok(Lease {
                name: name.to_owned(),
                holder: holder.to_owned(),
                token: 0,
                expires_at: now.saturating_add(ttl_ms),
            });
        };
        let taken = self
            .fetch_optional(On::Write, acquire, &params![name, holder, ttl_ms, now])
            .await?;
        let row = match taken {
            Some(row) => row,
            None => self
                .fetch_optional(On::Write, read, &params![name])
                .await?
                .ok_or_else(|| StoreError::Corrupt {
                    message: format!("lease `{name}` is neither free nor held"),
                })?,
        };
        Ok(Lease {
            name: name.to_owned(),
            holder: row.text(0)?.unwrap_or_default(),
            token: row.int(1)?.unwrap_or_default(),
            expires_at: row.int(2)?.unwrap_or_default(),
        })
    }

    pub(crate) async fn release_lease(&self, lease: &Lease, now: Millis) -> Result<(), StoreError> {
        if let Some(release) = &self.sql.release_lease {
            let params = params![lease.name.as_str(), lease.holder.as_str(), lease.token, now];
            self.execute(On::Write, release, &params).await?;
        }
        Ok(())
    }

    /// `params` followed by the parameters that fence a sweep by `lease` (none on a schema
    /// without leases, whose sweeps are unfenced).
    pub(crate) fn fenced<'a>(&self, params: &[Param<'a>], lease: &'a Lease) -> Vec<Param<'a>> {
        let mut all = params.to_vec();
        if self.level.leases {
            all.extend(params![
                lease.name.as_str(),
                lease.holder.as_str(),
                lease.token
            ]);
        }
        all
    }
}
