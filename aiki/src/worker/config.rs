//! A worker against the store's runtime configuration: its claim refresh interval must stay
//! below half of the store's claim idle timeout, checked as it starts (it waits until the
//! configuration fits) and whenever a claim tells it the timeout in force.

use std::time::Duration;

use aiki_store::{Millis, RuntimeConfig};
use tokio::sync::watch;

use super::{Shared, Stop, Worker};
use crate::error::ClientError;

impl Shared {
    /// Takes the claim idle timeout the store told: an error (once per value) when this
    /// worker's refresh interval is not below half of it, for its claims may then be taken
    /// from it while it lives.
    pub(super) fn check_idle_timeout(&self, idle_ms: Millis) {
        use std::sync::atomic::Ordering;
        let before = self.claim_idle_timeout_ms.swap(idle_ms, Ordering::Relaxed);
        if before != idle_ms
            && let Err(error) = refresh_fits(self.claim_refresh_interval, idle_ms)
        {
            tracing::error!(%error, "the store's claim idle timeout is too short for this worker");
        }
    }
}

impl Worker {
    /// Checks this worker against the store's runtime configuration, as starting it does
    /// first: its claim refresh interval must be below half of the store's claim idle timeout
    /// ([`ConfigKey::ClaimIdleTimeout`](aiki_store::ConfigKey::ClaimIdleTimeout)), else
    /// [`ClientError::Config`] naming both. Returns the configuration in force.
    pub async fn verify(&self) -> Result<RuntimeConfig, ClientError> {
        let config = self.shared.store.runtime_config().await?;
        refresh_fits(
            self.shared.claim_refresh_interval,
            config.claim_idle_timeout_ms,
        )?;
        self.shared.claim_idle_timeout_ms.store(
            config.claim_idle_timeout_ms,
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(config)
    }

    /// Waits until this worker fits the store's runtime configuration (see
    /// [`verify`](Self::verify)), checking every 5 s and logging each new refusal; `false`
    /// when it is stopped first. A configuration that cannot be read does not hold it back.
    pub(super) async fn admitted(&self, stop: &mut watch::Receiver<Stop>) -> bool {
        let mut refused: Option<String> = None;
        loop {
            match self.verify().await {
                Ok(_) => {
                    if refused.is_some() {
                        tracing::info!("the store's claim idle timeout fits now: starting");
                    }
                    return true;
                }
                Err(ClientError::Config(message)) => {
                    if refused.as_ref() != Some(&message) {
                        tracing::error!(%message, "the worker claims nothing until this is fixed");
                        refused = Some(message);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the runtime configuration could not be read; starting");
                    return true;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(5)) => {}
                _ = stop.changed() => return false,
            }
        }
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
