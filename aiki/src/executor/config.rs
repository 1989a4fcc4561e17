//! An executor against the store's runtime configuration: its claim refresh interval must stay
//! below half of the store's claim idle timeout, checked before it executes (see
//! [`Executor::verify`]) and whenever a claim tells it the timeout in force.

use std::sync::atomic::Ordering;
use std::time::Duration;

use aiki_store::{Millis, RuntimeConfig};

use super::{Executor, Parts};
use crate::error::ClientError;

impl Parts {
    /// Takes the claim idle timeout the store told: an error (once per value) when this
    /// executor's refresh interval is not below half of it, for its claims may then be taken
    /// from it while it lives.
    pub(super) fn check_idle_timeout(&self, idle_ms: Millis) {
        let before = self.claim_idle_timeout_ms.swap(idle_ms, Ordering::Relaxed);
        if before != idle_ms
            && let Err(error) = refresh_fits(self.claim_refresh_interval, idle_ms)
        {
            tracing::error!(%error, "the store's claim idle timeout is too short for this executor");
        }
    }
}

impl Executor {
    /// Checks this executor against the store's runtime configuration: its claim refresh
    /// interval must be below half of the store's claim idle timeout
    /// ([`ConfigKey::ClaimIdleTimeout`](aiki_store::ConfigKey::ClaimIdleTimeout)), else
    /// [`ClientError::Config`] naming both. Returns the configuration in force.
    pub async fn verify(&self) -> Result<RuntimeConfig, ClientError> {
        let parts = self.parts();
        let config = parts.store.runtime_config().await?;
        refresh_fits(parts.claim_refresh_interval, config.claim_idle_timeout_ms)?;
        parts
            .claim_idle_timeout_ms
            .store(config.claim_idle_timeout_ms, Ordering::Relaxed);
        Ok(config)
    }
}

/// Whether claims refreshed every `refresh` are safe under the idle timeout `idle_ms`: the
/// refresh interval must be below half of it, or an error naming both.
fn refresh_fits(refresh: Duration, idle_ms: Millis) -> Result<(), ClientError> {
    if aiki_store::claim_refresh_fits(crate::clock::millis(refresh), idle_ms) {
        return Ok(());
    }
    Err(ClientError::Config(format!(
        "the claim refresh interval ({refresh:?}) must be below half of the store's claim idle \
         timeout (`{}` = {idle_ms} ms), or claim recovery may take runs from a live worker; \
         shorten the interval (`WorkerBuilder::claim_refresh_interval`) or raise the timeout \
         (`aiki config set {} <ms>`)",
        aiki_store::ConfigKey::ClaimIdleTimeout,
        aiki_store::ConfigKey::ClaimIdleTimeout,
    )))
}
