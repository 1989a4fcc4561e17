//! The impact check's read-only replay: a `Run` that never writes and runs no task, and notes
//! what its next execution would do instead.
//!
//! A probing run replays its history exactly as an execution would (the same manifest, the
//! same rule, the same schema checks), but where an execution would write (a fresh task, a
//! child start, a sleep longer than recorded, a recorded timeout or child outcome) it notes
//! what it would do and, for work, stops there. Looking ahead, it also goes past the waits the
//! run is suspended on, assuming each is satisfied (a sleep ends, an event arrives with the
//! smallest payload its type allows, a child completes with the smallest output), so that work
//! appended after the wait, or a divergence behind it, is seen before the deploy; every note
//! made past such an assumption says which.

use aiki_store::Millis;
use serde_json::Value;

use super::Run;

/// How many waits a probing run assumes satisfied at most.
pub(crate) const MAX_ASSUMED: usize = 100;

/// What a probing run saw.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    /// The waits assumed satisfied so far, in the order they were reached.
    pub(crate) assumed: Vec<String>,
    /// What the next execution would do, in the order the code reached it.
    pub(crate) findings: Vec<Finding>,
    /// The waits assumed satisfied when the run's fatal error was raised.
    pub(crate) fatal_after: Vec<String>,
}

/// One thing a probing run would do, with the waits assumed satisfied before it (`after`:
/// empty when it happens in the run's next execution as it stands).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Finding {
    pub(crate) what: Found,
    pub(crate) after: Vec<String>,
}

/// What a probing run would do.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    /// Run a task call with nothing recorded at its address.
    NewTask {
        task: &'static str,
        address: String,
        call_site: Option<String>,
    },
    /// Start a child with nothing recorded at its address.
    NewChild { namespace: String, address: String },
    /// Run again a recorded call whose last attempt was interrupted or is due a retry.
    Resume { address: String },
    /// Sleep for another duration than the one recorded.
    SleepChanged {
        name: String,
        recorded_ms: Millis,
        wanted_ms: Millis,
        /// When the sleep ends with the new duration.
        new_end: Millis,
    },
    /// Wait where the check cannot make up a value to look past (no value of the type).
    Blind { wait: String },
}

impl Run {
    /// `true` when this run is the impact check's: it never writes, and runs no task.
    pub(crate) fn probing(&self) -> bool {
        self.replay().probe.is_some()
    }

    /// What the probing run saw (nothing for an executing one).
    pub(crate) fn take_probe(&self) -> Probe {
        self.replay().probe.take().unwrap_or_default()
    }

    /// Whether nothing the run started is still under way (a store read): a probing run that
    /// is pending then waits only on what it will never get.
    pub(crate) fn settled(&self) -> bool {
        self.replay().in_flight == 0
    }

    /// Notes what the probing run would do here; `false` (and nothing noted) when executing.
    pub(super) fn note(&self, what: impl FnOnce() -> Found) -> bool {
        let mut replay = self.replay();
        let Some(probe) = replay.probe.as_mut() else {
            return false;
        };
        let after = probe.assumed.clone();
        probe.findings.push(Finding {
            what: what(),
            after,
        });
        true
    }

    /// Where a probing run would start work: it stops here, forever (the check reads what it
    /// noted once nothing else moves).
    pub(super) async fn stop_here(&self) -> ! {
        match std::future::pending::<std::convert::Infallible>().await {}
    }

    /// `true` when a probing run looks past the waits it reaches, assuming them satisfied.
    ///
    /// It looks at most [`MAX_ASSUMED`] waits ahead: an assumed wait returns at once and the
    /// probe's clock never moves, so a loop of waits would never stop. At the limit it notes
    /// that it looked no further, and blocks there.
    pub(super) fn looking_ahead(&self) -> bool {
        let mut replay = self.replay();
        let Some(probe) = replay.probe.as_mut() else {
            return false;
        };
        if probe.assumed.len() < MAX_ASSUMED {
            return true;
        }
        let noted = probe
            .findings
            .iter()
            .any(|finding| matches!(finding.what, Found::Blind { .. }));
        if !noted {
            let after = probe.assumed.clone();
            probe.findings.push(Finding {
                what: Found::Blind {
                    wait: format!("the waits after the first {MAX_ASSUMED} (looked no further)"),
                },
                after,
            });
        }
        false
    }

    /// Looking ahead: the wait `what` is assumed satisfied from here on.
    pub(super) fn assume(&self, what: String) {
        if let Some(probe) = self.replay().probe.as_mut() {
            probe.assumed.push(what);
        }
    }

    /// Looking ahead, assumes a wait satisfied by a value of its type, made from the type's
    /// schema; notes that the check cannot see past it when the type accepts no such value.
    pub(super) fn assume_value(&self, what: String, value: Option<Value>) -> Option<Value> {
        match value {
            Some(value) => {
                self.assume(what);
                Some(value)
            }
            None => {
                self.note(|| Found::Blind { wait: what });
                None
            }
        }
    }
}
