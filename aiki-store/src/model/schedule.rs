//! Schedules: durable records that start runs of a workflow version on a cron expression or an
//! interval, and the log of what each occurrence became (see [`crate::schedule`] for the
//! rules that decide it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Millis, Namespace, NewRun, RunId};

/// The time zone of a cron schedule that names none.
pub const UTC: &str = "UTC";

/// The longest catch-up window a schedule may have: 7 days.
pub const MAX_CATCHUP_WINDOW_MS: Millis = 7 * 24 * 3_600_000;

/// The longest jitter a schedule may have: 1 hour.
pub const MAX_JITTER_MS: Millis = 3_600_000;

/// When a schedule's occurrences are: a cron expression read in a time zone, or a fixed
/// interval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ScheduleSpec {
    /// A cron expression of 5 fields (minute, hour, day of month, month, day of week) or 6
    /// (seconds first), read in an IANA time zone (`UTC` by default).
    Cron {
        /// The expression, e.g. `0 9 * * MON-FRI`.
        expression: String,
        /// The IANA time zone it is read in, e.g. `Europe/Berlin`.
        #[serde(default = "utc")]
        timezone: String,
    },
    /// Every `every_ms` milliseconds, counted from the schedule's creation.
    Every {
        /// The interval, in ms (at least 1 s).
        every_ms: Millis,
    },
}

fn utc() -> String {
    UTC.to_owned()
}

impl ScheduleSpec {
    /// A cron expression read in UTC.
    pub fn cron(expression: impl Into<String>) -> Self {
        Self::cron_in(expression, UTC)
    }

    /// A cron expression read in an IANA time zone (`Europe/Berlin`).
    pub fn cron_in(expression: impl Into<String>, timezone: impl Into<String>) -> Self {
        ScheduleSpec::Cron {
            expression: expression.into(),
            timezone: timezone.into(),
        }
    }

    /// Every `interval` (whole milliseconds, at least 1 s), counted from the schedule's
    /// creation.
    pub fn every(interval: std::time::Duration) -> Self {
        ScheduleSpec::Every {
            every_ms: Millis::try_from(interval.as_millis()).unwrap_or(Millis::MAX),
        }
    }
}

impl std::fmt::Display for ScheduleSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleSpec::Cron {
                expression,
                timezone,
            } => write!(f, "cron `{expression}` ({timezone})"),
            ScheduleSpec::Every { every_ms } => {
                write!(f, "every {}", crate::schedule::words(*every_ms))
            }
        }
    }
}

/// What an occurrence does while the run of the previous one has not ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverlapPolicy {
    /// No new run: the occurrence is recorded as skipped (the default).
    #[default]
    Skip,
    /// A new run beside the previous one.
    Allow,
    /// The previous run is cancelled and a new one started.
    CancelPrevious,
    /// The occurrence waits until the previous run ends, then starts; at most one waits, the
    /// ones after it are skipped.
    BufferOne,
}

impl OverlapPolicy {
    /// The policy's name, as written (`skip`, `allow`, `cancel_previous`, `buffer_one`).
    pub fn as_str(self) -> &'static str {
        match self {
            OverlapPolicy::Skip => "skip",
            OverlapPolicy::Allow => "allow",
            OverlapPolicy::CancelPrevious => "cancel_previous",
            OverlapPolicy::BufferOne => "buffer_one",
        }
    }
}

impl std::str::FromStr for OverlapPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.replace('-', "_").as_str() {
            "skip" => Ok(OverlapPolicy::Skip),
            "allow" => Ok(OverlapPolicy::Allow),
            "cancel_previous" => Ok(OverlapPolicy::CancelPrevious),
            "buffer_one" => Ok(OverlapPolicy::BufferOne),
            _ => Err(format!(
                "`{s}` is not an overlap policy: use skip, allow, cancel_previous or buffer_one"
            )),
        }
    }
}

/// Whether a schedule fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleStatus {
    /// Its occurrences fire.
    Active,
    /// Paused by an operator: nothing fires until it is resumed, and the occurrences meanwhile
    /// are not caught up.
    Paused,
    /// Declared in code once and no longer (whether it was active or paused then): kept and
    /// listed, never fired, never resumed; only a declaration or a redefinition revives it.
    Inactive,
}

impl ScheduleStatus {
    /// The status's name, as written.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleStatus::Active => "active",
            ScheduleStatus::Paused => "paused",
            ScheduleStatus::Inactive => "inactive",
        }
    }
}

/// Where a schedule comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleOrigin {
    /// Created through a client (or `aiki schedules create`).
    Client,
    /// Declared in a worker's code, reconciled at its start.
    Code,
}

/// What a schedule starts, when and how: everything an operator or the code decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDefinition {
    /// When its occurrences are.
    pub spec: ScheduleSpec,
    /// The workflow version its runs are started in.
    pub namespace: Namespace,
    /// The runs' input.
    pub input: Value,
    /// The input's hash (see [`NewRun::input_hash`]).
    pub input_hash: String,
    /// The worker pool of its runs.
    #[serde(default = "default_pool")]
    pub pool: String,
    /// What an occurrence does while the previous run has not ended.
    #[serde(default)]
    pub overlap: OverlapPolicy,
    /// How late an occurrence may still start (ms after its time); `None`: one interval (see
    /// [`crate::schedule::catchup_window`]). Older ones are recorded as missed.
    #[serde(default)]
    pub catchup_window_ms: Option<Millis>,
    /// The most an occurrence's start is moved later (ms), by an offset fixed per schedule;
    /// the occurrence keeps its time as its identity. 0: none.
    #[serde(default)]
    pub jitter_ms: Millis,
}

fn default_pool() -> String {
    "default".to_owned()
}

/// A schedule as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleRecord {
    /// Its name: unique in the store (the declared name of a schedule in code, the reference
    /// a client created it with).
    pub name: String,
    /// This schedule's own id, made at its creation: a schedule deleted and created again
    /// under its name is another one, and no write read from the first applies to it.
    pub id: String,
    /// What it starts, when and how.
    pub definition: ScheduleDefinition,
    /// Who made it.
    pub origin: ScheduleOrigin,
    /// The generation of its definition: only moves up (a schedule in code carries it; one
    /// made by a client starts at 1).
    pub generation: i64,
    /// Whether it fires.
    pub status: ScheduleStatus,
    /// An inactive schedule in code that was paused when its declaration went away: declared
    /// again, it comes back paused (the operator's pause stands) instead of active.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub was_paused: bool,
    /// The time of the next occurrence not decided yet; `None` when it has none left.
    pub next_at: Option<Millis>,
    /// The time of the latest occurrence decided (fired, skipped, buffered or missed): no
    /// occurrence at or before it is decided again, whatever the clock of a later write.
    #[serde(default)]
    pub decided_to: Option<Millis>,
    /// The time of the occurrence waiting for the previous run to end (policy `buffer_one`).
    pub buffered_at: Option<Millis>,
    /// The run of the latest occurrence fired, triggered or backfilled.
    pub last_run: Option<RunId>,
    /// Grows with every write (compare-and-set).
    pub revision: u64,
    /// When it was made.
    pub created_at: Millis,
    /// When it was last written.
    pub updated_at: Millis,
}

impl ScheduleRecord {
    /// A new active schedule `name`, its first occurrence the first after `now`.
    /// [`StoreError::Invalid`](crate::StoreError::Invalid) for a definition that is not valid
    /// (see [`crate::schedule::check`]).
    pub fn new(
        name: impl Into<String>,
        definition: ScheduleDefinition,
        origin: ScheduleOrigin,
        generation: i64,
        now: Millis,
    ) -> Result<Self, crate::StoreError> {
        let name = name.into();
        crate::schedule::check(&name, &definition)?;
        let next_at = crate::schedule::next_after(&definition.spec, now, now)?;
        if next_at.is_none() {
            return Err(crate::StoreError::Invalid {
                message: format!(
                    "schedule `{name}` would never fire: {} has no time after now; check the \
                     day of month and month",
                    definition.spec
                ),
            });
        }
        Ok(ScheduleRecord {
            id: uuid::Uuid::new_v4().simple().to_string(),
            decided_to: None,
            name,
            definition,
            origin,
            generation,
            status: ScheduleStatus::Active,
            was_paused: false,
            next_at,
            buffered_at: None,
            last_run: None,
            revision: 0,
            created_at: now,
            updated_at: now,
        })
    }

    /// When the sweep takes the next occurrence: its time plus the schedule's fixed jitter.
    pub fn fire_at(&self) -> Option<Millis> {
        self.next_at
            .map(|at| at.saturating_add(crate::schedule::jitter_offset(self)))
    }
}

/// What became of one occurrence of a schedule, or a change of its status: one row of the
/// schedule's log, unique by (schedule, key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleLogEntry {
    /// The schedule.
    pub schedule: String,
    /// The row's key in the schedule's log: `at:<ms>` for the occurrence at that time (fired,
    /// skipped or superseded), `buffered:<its key>`, `cancel:<run id>`, `trigger:<id>`,
    /// `backfill:<id>:<ms>`, `missed:<first ms>`, `status:<revision>`.
    pub key: String,
    /// What happened.
    pub kind: ScheduleLogKind,
    /// The occurrence's time (the first of a gap of missed ones).
    pub nominal_at: Option<Millis>,
    /// The last occurrence of a gap of missed ones.
    pub last_at: Option<Millis>,
    /// How many occurrences the row stands for (a gap's count; 1 otherwise).
    pub count: i64,
    /// The run started, for a fired, triggered or backfilled occurrence; the run cancelled,
    /// for `cancelled_previous`.
    pub run_id: Option<RunId>,
    /// The status after a status change.
    pub status: Option<ScheduleStatus>,
    /// Why, in words.
    pub reason: Option<String>,
    /// The schedule's revision the row was written with.
    pub revision: u64,
    /// When it was written.
    pub at: Millis,
    /// Who did it (an operator's name), when said.
    pub actor: Option<String>,
}

/// The kinds of [`ScheduleLogEntry`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleLogKind {
    /// The occurrence started a run.
    Fired,
    /// An operator's "trigger now" started a run.
    Triggered,
    /// A backfill started a run for a past time.
    Backfilled,
    /// The occurrence started nothing: the previous run had not ended (`skip`, or
    /// `buffer_one` with one already waiting).
    Skipped,
    /// The occurrence waits for the previous run to end (`buffer_one`).
    Buffered,
    /// The previous run was cancelled for this occurrence (`cancel_previous`).
    CancelledPrevious,
    /// Occurrences found too late (outside the catch-up window): a gap, first to last.
    Missed,
    /// The schedule was created, changed, paused, resumed or made inactive.
    Status,
}

impl ScheduleLogKind {
    /// The kind's name, as written.
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleLogKind::Fired => "fired",
            ScheduleLogKind::Triggered => "triggered",
            ScheduleLogKind::Backfilled => "backfilled",
            ScheduleLogKind::Skipped => "skipped",
            ScheduleLogKind::Buffered => "buffered",
            ScheduleLogKind::CancelledPrevious => "cancelled_previous",
            ScheduleLogKind::Missed => "missed",
            ScheduleLogKind::Status => "status",
        }
    }
}

/// One atomic write of a schedule: its new state (at revision `expected + 1`), the runs it
/// starts, the run it cancels and the rows it adds to its log, all or nothing. Refused
/// (nothing written) when the schedule's revision is not `expected` (`None`: when it exists),
/// when a row's key is in its log already, or when a run's reference id is taken: the mark of
/// another writer having come first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ScheduleWrite {
    /// The schedule as it is to be (its revision is set by the write).
    pub record: ScheduleRecord,
    /// The revision the writer read; `None` for a new schedule.
    pub expected: Option<u64>,
    /// The runs to start.
    pub runs: Vec<NewRun>,
    /// A run to cancel (`cancel_previous`), unless it has ended meanwhile.
    pub cancel: Option<RunId>,
    /// The rows to add to its log.
    pub log: Vec<ScheduleLogEntry>,
}

impl ScheduleWrite {
    /// A write of `record` over revision `expected`, with nothing else in it yet.
    pub fn new(record: ScheduleRecord, expected: Option<u64>) -> Self {
        ScheduleWrite {
            record,
            expected,
            runs: Vec::new(),
            cancel: None,
            log: Vec::new(),
        }
    }
}

/// A schedule the sweep should look at, with whether the run of its latest occurrence has
/// ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DueSchedule {
    /// The schedule.
    pub record: ScheduleRecord,
    /// Whether [`ScheduleRecord::last_run`] has not ended (`false` without one).
    pub previous_open: bool,
}

/// What [`ClientStore::create_schedule`](crate::ClientStore::create_schedule) did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "schedule")]
pub enum ScheduleCreated {
    /// It was created.
    Created(ScheduleRecord),
    /// One of that name with the same definition exists: it, untouched.
    Existing(ScheduleRecord),
}

impl ScheduleCreated {
    /// The schedule, created or found.
    pub fn record(&self) -> &ScheduleRecord {
        match self {
            ScheduleCreated::Created(record) | ScheduleCreated::Existing(record) => record,
        }
    }
}

/// An operator's action on a schedule (see
/// [`ClientStore::act_on_schedule`](crate::ClientStore::act_on_schedule)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum ScheduleAction {
    /// Stop firing until resumed; `reason` is recorded.
    Pause {
        /// Why, recorded in the schedule's log.
        #[serde(default)]
        reason: Option<String>,
    },
    /// Fire again, from the first occurrence after now (those while paused are not caught
    /// up).
    Resume,
    /// Start a run now, with a key of its own (never an occurrence's), whatever the overlap
    /// policy.
    Trigger,
    /// Start one run per occurrence in `[from, to]` (at most
    /// [`MAX_BACKFILL`](crate::schedule::MAX_BACKFILL)), exempt from the catch-up window and
    /// from the schedule's overlap policy (which governs occurrences that come while a run is
    /// open), unless `overlap` names a policy to apply among the backfill's runs.
    Backfill {
        /// The first time (ms), inclusive.
        from: Millis,
        /// The last time (ms), inclusive.
        to: Millis,
        /// A policy applied among the backfill's runs (and the schedule's open run); `None`:
        /// `allow`, one run per occurrence.
        #[serde(default)]
        overlap: Option<OverlapPolicy>,
    },
    /// Replace the definition by a newer one, forward only: `generation` must be above the
    /// stored one (an older binary during a rolling deploy never overwrites a newer
    /// definition). An inactive schedule becomes active again. The next occurrence is kept
    /// unless the timing changed; occurrences keep their keys, so moving a schedule to another
    /// workflow version never fires an occurrence twice.
    Redefine {
        /// The new definition.
        definition: Box<ScheduleDefinition>,
        /// Its generation.
        generation: i64,
    },
    /// Remove the schedule and its log (its runs stay).
    Delete,
}

/// What an action on a schedule did: the schedule as written and the runs it started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleActed {
    /// The schedule after the action (as it was, for `delete`).
    pub schedule: ScheduleRecord,
    /// The runs started (trigger, backfill).
    pub runs: Vec<RunId>,
    /// The rows the action added to the log.
    pub log: Vec<ScheduleLogEntry>,
}
