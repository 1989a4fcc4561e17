//! A worker against the store's runtime configuration: it starts claiming only once its
//! executor's claim refresh interval fits the store's claim idle timeout.

use std::time::Duration;

use aiki_store::RuntimeConfig;
use tokio::sync::watch;

use super::{Stop, Worker};
use crate::error::ClientError;

impl Worker {
    /// Checks this worker against the store's runtime configuration, as starting it does
    /// first: its claim refresh interval must be below half of the store's claim idle timeout
    /// ([`ConfigKey::ClaimIdleTimeout`](aiki_store::ConfigKey::ClaimIdleTimeout)), else
    /// [`ClientError::Config`] naming both. Returns the configuration in force.
    pub async fn verify(&self) -> Result<RuntimeConfig, ClientError> {
        self.shared.executor.verify().await
    }

    /// Waits until this worker fits the store's runtime configuration (see
    /// [`verify`](Self::verify)), checking every 5 s and logging each new refusal; `false`
    /// when it is stopped first. A configuration that cannot be read does not hold it back.
    pub(super) async fn admitted(&self, stop: &mut watch::Receiver<Stop>) -> bool {
        if self.registry().namespaces().next().is_none() {
            // It serves no version (a server's daemons): it claims nothing, so no claim
            // timing can be wrong for it.
            return true;
        }
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
