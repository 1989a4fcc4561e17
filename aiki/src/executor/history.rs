//! Loading a claimed run's history: read again for as long as the store is unreachable, with
//! the claim kept fresh meanwhile, so that a store outage or a server's restart never leaves a
//! live executor's run to claim recovery.

use std::time::Duration;

use aiki_store::{History, RunRecord, StoreError};

use super::Parts;
use super::budget::Budget;

/// The history of `claimed`, read again while the store answers with transient errors, the
/// claim refreshed every refresh interval meanwhile. Gives up, with the last error, only when
/// holding on would not help: the claim is lost (its refresh refused), the worker shuts down,
/// or the execution's budget is spent (the platform is ending the request). Any other error is
/// returned at once.
pub(super) async fn load_claimed(
    executor: &Parts,
    claimed: &RunRecord,
    budget: Option<Budget>,
) -> Result<History, StoreError> {
    let id = claimed.id;
    let mut draining = executor.draining.subscribe();
    // Real time: the store's recovery and the refresh cadence are not run timing.
    let mut refreshed = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(50);
    let mut attempt: u64 = 1;
    loop {
        let error = match executor.store.load_history(id).await {
            Ok(history) => return Ok(history),
            Err(error) if error.is_transient() => error,
            Err(error) => return Err(error),
        };
        crate::metrics::store_error("load_history", &error);
        if attempt == 1 || attempt.is_power_of_two() {
            tracing::warn!(
                run_id = %id,
                %error,
                attempt,
                "could not load the claimed run's history; trying again, the claim kept"
            );
        }
        let spent = budget.is_some_and(|budget| tokio::time::Instant::now() >= budget.drain_at);
        if *draining.borrow_and_update() || spent {
            return Err(error);
        }
        if refreshed.elapsed() >= executor.claim_refresh_interval {
            let now = executor.clock.now();
            match executor
                .store
                .refresh_claim(id, &executor.id, claimed.revision, now)
                .await
            {
                Ok(_) => refreshed = tokio::time::Instant::now(),
                Err(refused) if !refused.is_transient() => return Err(refused),
                Err(_) => {}
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = draining.changed() => {}
        }
        delay = (delay * 2).min(Duration::from_secs(2));
        attempt += 1;
    }
}
