//! What the impact check found: per run, per workflow version, and what fails the gate.

use std::collections::BTreeMap;
use std::fmt;

use aiki_store::{Millis, Namespace, RunId, RunRecord, RunStatus};
use serde::Serialize;

/// What the check found, for every run it covered.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// When the check ran (the worker's clock).
    pub checked_at: Millis,
    /// One line per workflow version, in name and version order.
    pub summary: Vec<VersionSummary>,
    /// The runs of workflows this build registers, in the order they were listed (newest
    /// first).
    pub runs: Vec<RunImpact>,
    /// Runs of workflows this build does not register at all (another service's): not
    /// replayed, and not failing the gate unless [`Gate::other_services`] asks.
    pub other_services: Vec<OtherRun>,
}

/// A run of a workflow this build does not register.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct OtherRun {
    /// The run.
    pub run_id: RunId,
    /// Its workflow version.
    pub namespace: Namespace,
    /// Its status.
    pub status: RunStatus,
}

/// What one run's next executions would do under this build.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct RunImpact {
    /// The run.
    pub run_id: RunId,
    /// Its workflow version.
    pub namespace: Namespace,
    /// Its status now.
    pub status: RunStatus,
    /// Its revision when it was read.
    pub revision: u64,
    /// The verdict.
    pub verdict: Verdict,
    /// Work it would start with nothing recorded for it (tasks appended after its recorded
    /// entries, children), in the order the code reached it.
    pub new_work: Vec<NewWork>,
    /// Recorded calls it would run again: an attempt interrupted by a crash, a retry due, or
    /// (for a failed run) the call a retry resets.
    pub resumes: Vec<String>,
    /// Sleeps asked for with another duration than recorded.
    pub sleeps: Vec<SleepChange>,
    /// The waits the check assumed satisfied to look further, in order: the first is where
    /// the run waits now.
    pub waits: Vec<String>,
    /// A wait the check could not look past (no value of its type could be made), if any.
    pub blind: Option<String>,
}

/// Work with nothing recorded for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NewWork {
    /// `task` or `child`.
    pub kind: &'static str,
    /// The task's name, or the child's workflow version.
    pub name: String,
    /// The content address.
    pub address: String,
    /// Where the code makes the call, when known.
    pub call_site: Option<String>,
    /// The waits assumed satisfied before it (empty: in the run's next execution as it is).
    pub after: Vec<String>,
}

/// A sleep asked for with another duration than recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SleepChange {
    /// The sleep's name (a wait's timeout: `timeout of event \`name\``).
    pub name: String,
    /// The recorded duration, in milliseconds.
    pub recorded_ms: Millis,
    /// The new duration, in milliseconds.
    pub new_ms: Millis,
    /// How much longer the sleep is than recorded (negative: shorter): a sleep already over
    /// sleeps this much more, from when the run wakes.
    pub extended_by_ms: Millis,
    /// When the sleep ends with the new duration, as far as the check can tell now.
    pub ends_at: Millis,
    /// `true` when, with the new duration, the sleep is already over.
    pub already_satisfied: bool,
}

/// What a run's next executions would do under this build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Every call resolves from its record, up to where it waits (and past, as far as the
    /// check could see): nothing new runs.
    Safe,
    /// It resolves its record, then runs work with nothing recorded ([`RunImpact::new_work`]).
    NewWork,
    /// It reaches a new address while recorded entries remain unconsumed: its next execution
    /// fails with a non-determinism error, before the new call runs.
    Diverges {
        /// The new address.
        new_address: String,
        /// Where the code calls it, when known.
        call_site: Option<String>,
        /// The recorded entries not consumed, one address per entry.
        unconsumed: Vec<String>,
        /// The waits assumed satisfied before it.
        after: Vec<String>,
    },
    /// A recorded value no longer matches its type in this build: the run fails with a schema
    /// error.
    Mismatch {
        /// What recorded it: `task \`fetch-user\``, `child workflow \`x@1\``, an event, the
        /// run's input.
        what: String,
        /// The address of the call, when it is one.
        address: Option<String>,
        /// What does not match (the field, and how).
        mismatch: String,
        /// The waits assumed satisfied before it.
        after: Vec<String>,
    },
    /// This build cannot run it: its workflow version is not registered.
    Stranded {
        /// Why, and what to do.
        reason: String,
    },
    /// The new code fails it for a reason of its own: a `#[task]` function called directly,
    /// a panic, a duration over the maximum.
    Broken {
        /// The error's kind (`direct_task_call`, `panicked`, ...).
        error_kind: String,
        /// The error.
        message: String,
        /// The waits assumed satisfied before it.
        after: Vec<String>,
    },
    /// It ends the way its record leads (the workflow returns its own error, or a recorded
    /// failure): the same path as before the change.
    Ends {
        /// The error's kind (`task_failed`, `child_failed`, `failed`, `interrupted`).
        outcome: String,
        /// The error, if it fails.
        message: Option<String>,
        /// The waits assumed satisfied before it.
        after: Vec<String>,
    },
}

impl Verdict {
    /// The verdict's short name: `safe`, `new_work`, `diverges`, `mismatch`, `stranded`,
    /// `broken`, `ends`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::NewWork => "new_work",
            Verdict::Diverges { .. } => "diverges",
            Verdict::Mismatch { .. } => "mismatch",
            Verdict::Stranded { .. } => "stranded",
            Verdict::Broken { .. } => "broken",
            Verdict::Ends { .. } => "ends",
        }
    }

    /// `true` for the verdicts that fail the gate whatever it asks: diverges, mismatch,
    /// stranded, broken.
    pub fn is_unsafe(&self) -> bool {
        matches!(
            self,
            Verdict::Diverges { .. }
                | Verdict::Mismatch { .. }
                | Verdict::Stranded { .. }
                | Verdict::Broken { .. }
        )
    }
}

/// `" (after event `x` arrives)"`, or nothing.
fn after(after: &[String]) -> String {
    if after.is_empty() {
        String::new()
    } else {
        format!(" (after {})", after.join(", then "))
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Safe => f.write_str("safe: every call replays from its record"),
            Verdict::NewWork => f.write_str("runs new work after its recorded entries"),
            Verdict::Diverges {
                new_address,
                call_site,
                unconsumed,
                after: assumed,
            } => {
                write!(f, "diverges{}: new address `{new_address}`", after(assumed))?;
                if let Some(at) = call_site {
                    write!(f, " (called at {at})")?;
                }
                write!(f, " while recorded {} unconsumed", unconsumed.join(", "))
            }
            Verdict::Mismatch {
                what,
                address,
                mismatch,
                after: assumed,
            } => {
                write!(f, "mismatch{}: recorded {what}", after(assumed))?;
                if let Some(address) = address {
                    write!(f, " at `{address}`")?;
                }
                write!(f, " no longer matches its type: {mismatch}")
            }
            Verdict::Stranded { reason } => write!(f, "stranded: {reason}"),
            Verdict::Broken {
                message,
                after: assumed,
                ..
            } => write!(f, "broken{}: {message}", after(assumed)),
            Verdict::Ends {
                outcome,
                message,
                after: assumed,
            } => {
                write!(f, "ends {outcome}{}", after(assumed))?;
                match message {
                    Some(message) => write!(f, ": {message}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// What fails the gate beyond the unsafe verdicts (diverges, mismatch, stranded, broken),
/// which always do. All `false` by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gate {
    /// A run that would start new work.
    pub new_work: bool,
    /// A changed sleep.
    pub sleep_changes: bool,
    /// A wait the check could not look past.
    pub blind: bool,
    /// Runs of workflows this build does not register (another service's).
    pub other_services: bool,
}

impl Gate {
    /// A run that would start new work fails the gate too.
    pub fn deny_new_work(mut self) -> Self {
        self.new_work = true;
        self
    }

    /// A changed sleep fails the gate too.
    pub fn deny_sleep_changes(mut self) -> Self {
        self.sleep_changes = true;
        self
    }

    /// A wait the check could not look past fails the gate too.
    pub fn deny_blind(mut self) -> Self {
        self.blind = true;
        self
    }

    /// A run of a workflow this build does not register fails the gate too.
    pub fn deny_other_services(mut self) -> Self {
        self.other_services = true;
        self
    }
}

impl RunImpact {
    /// A run not checked yet: safe until the check says otherwise.
    pub(super) fn new(run_id: RunId, namespace: Namespace, status: RunStatus) -> Self {
        RunImpact {
            run_id,
            namespace,
            status,
            revision: 0,
            verdict: Verdict::Safe,
            new_work: Vec::new(),
            resumes: Vec::new(),
            sleeps: Vec::new(),
            waits: Vec::new(),
            blind: None,
        }
    }

    /// Whether this run fails `gate`.
    pub fn fails(&self, gate: &Gate) -> bool {
        self.verdict.is_unsafe()
            || (gate.new_work && !self.new_work.is_empty())
            || (gate.sleep_changes && !self.sleeps.is_empty())
            || (gate.blind && self.blind.is_some())
    }
}

/// One workflow version's runs, by verdict.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct VersionSummary {
    /// The version.
    pub namespace: Namespace,
    /// Runs checked.
    pub runs: usize,
    /// Runs by verdict name.
    pub by_verdict: BTreeMap<&'static str, usize>,
    /// Runs with a changed sleep.
    pub sleep_changes: usize,
}

impl Report {
    pub(super) fn new(checked_at: Millis, runs: Vec<RunImpact>, others: Vec<RunRecord>) -> Self {
        let mut summary: BTreeMap<Namespace, VersionSummary> = BTreeMap::new();
        for run in &runs {
            let line = summary
                .entry(run.namespace.clone())
                .or_insert_with(|| VersionSummary {
                    namespace: run.namespace.clone(),
                    runs: 0,
                    by_verdict: BTreeMap::new(),
                    sleep_changes: 0,
                });
            line.runs += 1;
            *line.by_verdict.entry(run.verdict.name()).or_default() += 1;
            line.sleep_changes += usize::from(!run.sleeps.is_empty());
        }
        Report {
            checked_at,
            summary: summary.into_values().collect(),
            runs,
            other_services: others
                .into_iter()
                .map(|run| OtherRun {
                    run_id: run.id,
                    namespace: run.namespace,
                    status: run.status,
                })
                .collect(),
        }
    }

    /// The runs that fail `gate`.
    pub fn failing<'r>(&'r self, gate: &'r Gate) -> impl Iterator<Item = &'r RunImpact> + 'r {
        self.runs.iter().filter(move |run| run.fails(gate))
    }

    /// `true` when no run fails `gate` (and, if the gate asks, no other service's run was
    /// found).
    pub fn passes(&self, gate: &Gate) -> bool {
        let others_fail = gate.other_services && !self.other_services.is_empty();
        !others_fail && self.failing(gate).next().is_none()
    }
}
