//! Whether a worker is alive, as its heartbeats say: what `aiki workers`, `aiki runs show` and
//! the catalog's choice of builds read.

use aiki_store::{ClaimTiming, Millis, RunRecord, RunStatus, WorkerRecord};
use serde::Serialize;

/// The claim-refresh interval of a worker that did not say its own (the default).
const DEFAULT_REFRESH_MS: i64 = 30_000;

/// The claim idle timeout of a worker that did not say its own (the default).
pub(crate) const DEFAULT_IDLE_TIMEOUT_MS: i64 =
    aiki_store::ConfigKey::ClaimIdleTimeout.default_value();

/// Whether a worker is alive, from its heartbeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Liveness {
    /// It beats as it should.
    Live,
    /// It said it stopped (a graceful shutdown), at `at`.
    Stopped {
        /// When.
        at: Millis,
    },
    /// It stopped beating without saying so (killed, frozen, cut off): its last beat was at
    /// `since`, more than two of its refresh intervals ago.
    Gone {
        /// Its last heartbeat.
        since: Millis,
    },
}

impl Liveness {
    /// How `worker` stands at `now` (by the clock its heartbeats are timed by).
    pub fn of(worker: &WorkerRecord, now: Millis) -> Liveness {
        if let Some(at) = worker.stopped_at {
            return Liveness::Stopped { at };
        }
        let refresh = worker.claim_refresh_ms.unwrap_or(DEFAULT_REFRESH_MS);
        // Two missed beats, and a margin for a slow store.
        let silent = refresh.saturating_mul(2).saturating_add(5_000);
        if now.saturating_sub(worker.last_seen_at) > silent {
            Liveness::Gone {
                since: worker.last_seen_at,
            }
        } else {
            Liveness::Live
        }
    }

    /// `true` for a live worker.
    pub fn is_live(self) -> bool {
        self == Liveness::Live
    }
}

/// A `running` run's claim as an operator sees it: who holds it, whether that worker is alive,
/// and when claim recovery releases it at the latest if its executor stays silent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ClaimView {
    /// The executor holding the claim.
    pub owner: String,
    /// How its worker stands (`None`: no heartbeat of it is known).
    pub worker: Option<Liveness>,
    /// When claim recovery releases the run at the latest, if its executor refreshes no more
    /// (a sweep interval later, at most).
    pub release_due: Option<Millis>,
    /// How claim recovery judges this claim: its owner's timing, else the defaults.
    #[serde(skip)]
    pub timing: ClaimTiming,
}

impl ClaimView {
    /// The claim of `run` if it is `running`, judged with what `workers` say of its owner, at
    /// `now`.
    pub fn of(run: &RunRecord, workers: &[WorkerRecord], now: Millis) -> Option<ClaimView> {
        if run.status != RunStatus::Running {
            return None;
        }
        let owner = run.owner.clone()?;
        let worker = workers.iter().find(|worker| worker.id == owner);
        let timing = ClaimTiming::new(
            worker
                .and_then(|w| w.claim_idle_timeout_ms)
                .unwrap_or(DEFAULT_IDLE_TIMEOUT_MS),
            worker
                .and_then(|w| w.claim_refresh_ms)
                .unwrap_or(DEFAULT_REFRESH_MS),
        );
        let release_due = run.heartbeat_at.map(|beat| {
            let marked = run
                .claim_stale_since
                .unwrap_or(beat.saturating_add(timing.confirm_ms));
            beat.saturating_add(timing.idle_timeout_ms)
                .max(marked.saturating_add(timing.confirm_ms))
        });
        Some(ClaimView {
            owner,
            worker: worker.map(|worker| Liveness::of(worker, now)),
            release_due,
            timing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_live_while_it_beats_then_stopped_or_gone() {
        let worker =
            WorkerRecord::new("w", "h", 1, Vec::new(), "default", 0).claim_timing(1_000, 3_000);
        let mut seen = worker.clone();
        seen.last_seen_at = 10_000;
        assert_eq!(Liveness::of(&seen, 10_500), Liveness::Live);
        assert_eq!(Liveness::of(&seen, 16_999), Liveness::Live);
        assert_eq!(
            Liveness::of(&seen, 17_001),
            Liveness::Gone { since: 10_000 }
        );
        assert_eq!(
            Liveness::of(&seen.clone().stopped(12_000), 12_500),
            Liveness::Stopped { at: 12_000 }
        );
        let mut silent = WorkerRecord::new("w", "h", 1, Vec::new(), "default", 0);
        silent.last_seen_at = 0;
        assert_eq!(
            Liveness::of(&silent, 60_000),
            Liveness::Live,
            "30 s default refresh"
        );
        assert!(!Liveness::of(&silent, 70_000).is_live());
    }
}
