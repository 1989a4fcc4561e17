//! A worker's start: the runs its first claim pass finds are executed before its housekeeping
//! begins (the catalog it publishes and its regular heartbeats, the daemons' first pass, the
//! reconciliation of its schedules); one heartbeat alone goes at once, so that operators see
//! who holds those runs. A worker restarted after a crash finishes the work it finds without
//! competing with its own start for the store's connections, its writer and the CPU: on the
//! 2-core development machine, that housekeeping made the first history load of a recovered
//! run two to three times slower. It waits at most [`GRACE`], so a first pass of long runs
//! does not hold the catalog and the daemons back.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// The longest the housekeeping waits for the first pass's runs.
pub(super) const GRACE: Duration = Duration::from_millis(500);

/// Where the worker's start stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The first claim pass has not answered yet.
    Starting,
    /// The first claim pass claimed runs that are still executing.
    Claimed,
    /// The first claim pass found nothing, or every run it claimed has ended its execution.
    Settled,
}

/// Whether the worker's start has settled: its first claim pass found nothing, or every run it
/// claimed has ended its execution.
#[derive(Clone)]
pub(super) struct Startup {
    phase: Arc<watch::Sender<Phase>>,
}

impl Startup {
    pub(super) fn new() -> Self {
        Startup {
            phase: Arc::new(watch::Sender::new(Phase::Starting)),
        }
    }

    /// Resolves once the start has settled, or [`GRACE`] after the call. Real time: how long a
    /// worker defers its housekeeping is not run timing.
    pub(super) async fn settled(&self) {
        self.reached(|phase| phase == Phase::Settled).await;
    }

    /// Resolves once the first claim pass has answered, or [`GRACE`] after the call: whether
    /// it claimed runs that are still executing (the worker's first heartbeat is recorded at
    /// once then, so that operators see who holds them).
    pub(super) async fn claimed(&self) -> bool {
        self.reached(|phase| phase != Phase::Starting).await == Some(Phase::Claimed)
    }

    /// Waits at most [`GRACE`] for a phase that `done` accepts; the phase then.
    async fn reached(&self, done: impl Fn(Phase) -> bool) -> Option<Phase> {
        let mut phase = self.phase.subscribe();
        tokio::time::timeout(GRACE, phase.wait_for(|phase| done(*phase)))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|phase| *phase)
    }

    /// The first claim pass claimed `runs` runs: the start settles at once for none, or when
    /// the last clone of the returned token (one held by each of their executions) is dropped.
    pub(super) fn first_pass(&self, runs: usize) -> Option<Arc<Settling>> {
        if runs == 0 {
            self.settle();
            return None;
        }
        self.phase.send_replace(Phase::Claimed);
        Some(Arc::new(Settling(self.clone())))
    }

    /// Settles the start now (the first pass failed, or ended with nothing to wait for).
    pub(super) fn settle(&self) {
        self.phase.send_replace(Phase::Settled);
    }
}

/// Held by the executions of the first pass's runs; the start settles when the last is dropped.
pub(super) struct Settling(Startup);

impl Drop for Settling {
    fn drop(&mut self) {
        self.0.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_settled(startup: &Startup) -> bool {
        *startup.phase.borrow() == Phase::Settled
    }

    #[tokio::test]
    async fn the_start_settles_when_the_first_pass_s_runs_have_ended_or_after_the_grace() {
        // Nothing claimed: settled at once.
        let startup = Startup::new();
        assert!(startup.first_pass(0).is_none());
        assert!(is_settled(&startup));
        assert!(!startup.claimed().await);
        startup.settled().await;

        // Two runs claimed: settled when the second execution ends, not the first.
        let startup = Startup::new();
        let token = startup.first_pass(2).expect("a token for two runs");
        assert!(startup.claimed().await, "claimed runs are executing");
        let (first, second) = (token.clone(), token);
        let waiting = tokio::spawn({
            let startup = startup.clone();
            async move { startup.settled().await }
        });
        drop(first);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!is_settled(&startup), "one run is still executing");
        assert!(!waiting.is_finished());
        drop(second);
        waiting.await.expect("settled");
        assert!(is_settled(&startup), "settled by the runs, not the grace");

        // A run that outlasts the grace holds the housekeeping up no longer than it.
        let startup = Startup::new();
        let _long = startup.first_pass(1);
        let clock = std::time::Instant::now();
        startup.settled().await;
        assert!(clock.elapsed() >= GRACE);
        assert!(!is_settled(&startup));
    }
}
