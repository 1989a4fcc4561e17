//! Holding one run's claim while it executes: refreshed every interval on the executor's
//! clock, with the subscriber's own heartbeat for the run beside it.

use aiki_store::StoreError;

use super::Parts;
use super::budget::Budget;
use crate::clock::millis;
use crate::run::{Drain, Run};

/// Refreshes the claim every interval on the workers' clock (and, separately, the subscriber's
/// own heartbeat for the run); drains the run when a refresh says a pause was requested, or the
/// worker shuts down gracefully; returns when the run is lost.
///
/// A refresh that fails for want of the store is tried again soon, not an interval later, and
/// none waits longer than a bound: claim recovery confirms a stale claim one refresh interval
/// (and a margin) after the store answers again, so a live executor must refresh within that
/// window, however long its calls hung during the outage.
pub(super) async fn refresh_claim(executor: &Parts, run: &Run, budget: Option<Budget>) {
    let id = run.id();
    let interval = millis(executor.claim_refresh_interval);
    // Real time: these bound calls to the store, they are not run timing.
    let bound = (executor.claim_refresh_interval / 4).clamp(
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(5),
    );
    let mut draining = executor.draining.subscribe();
    let mut shutting_down = false;
    // Real time: the budget is the platform's request timeout.
    let drain_at = budget.map(|budget| budget.drain_at);
    let mut budget_spent = false;
    let mut sleep = executor
        .clock
        .sleep_until(executor.clock.now().saturating_add(interval));
    loop {
        if !shutting_down && *draining.borrow_and_update() {
            shutting_down = true;
            run.drain(Drain::Shutdown);
        }
        // The sleep is held while refreshing, so a manual clock does not move past its
        // deadline before the refresh is written.
        tokio::select! {
            () = sleep.as_mut() => {}
            Ok(()) = draining.changed(), if !shutting_down => continue,
            () = tokio::time::sleep_until(drain_at.unwrap_or_else(tokio::time::Instant::now)),
                if drain_at.is_some() && !budget_spent =>
            {
                budget_spent = true;
                tracing::debug!(run_id = %id, "execution budget nearly spent; draining");
                run.drain(Drain::Budget);
                continue;
            }
        }
        let refresh =
            executor
                .store
                .refresh_claim(id, &executor.id, run.revision(), executor.clock.now());
        let result = match tokio::time::timeout(bound, refresh).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable {
                message: format!("the claim refresh took longer than {bound:?}"),
                source: None,
            }),
        };
        if let Some(subscriber) = &executor.subscriber {
            subscriber.heartbeat(id).await;
        }
        if let Err(error) = &result {
            crate::metrics::store_error("refresh_claim", error);
        }
        match result {
            Ok(state) => {
                if state.pause_requested {
                    run.drain(Drain::Pause);
                }
            }
            Err(error) if error.is_transient() => {
                tracing::warn!(run_id = %id, %error, "claim refresh failed; trying again soon");
                // Soon: the store may answer again any moment, and the executor must refresh
                // within the confirmation window when it does.
                tokio::time::sleep(bound).await;
                sleep = executor.clock.sleep_until(executor.clock.now());
                continue;
            }
            Err(error) => {
                tracing::warn!(run_id = %id, %error, "claim lost");
                return;
            }
        }
        // The next sleep is taken before the last one is dropped.
        sleep = executor
            .clock
            .sleep_until(executor.clock.now().saturating_add(interval));
    }
}
