//! A cron expression's occurrences in a time zone, across daylight-saving changes.
//!
//! croner matches the expression on local (wall-clock) times; this module maps each matching
//! local time to instants by the rule of [`crate::schedule`]: a local time that does not exist
//! (a spring-forward gap) fires at the first instant after the gap when the hour is fixed, and
//! not at all when it is a wildcard or a step (absolute time has no such instant); a local time
//! that exists twice (fall-back) fires at its first instant when the hour is fixed, and at both
//! when it is a wildcard or a step.

use std::str::FromStr;

use chrono::{Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::Millis;

/// The fields of a 6-field expression, in order, and the values each takes (a 5-field one
/// has no seconds).
const FIELDS: [(&str, &str); 6] = [
    ("seconds", "0-59"),
    ("minute", "0-59"),
    ("hour", "0-23"),
    (
        "day of month",
        "1-31, `L` (the last day) or `15W` (the weekday nearest the 15th)",
    ),
    ("month", "1-12 or JAN-DEC"),
    (
        "day of week",
        "0-7 (0 and 7 are Sunday) or SUN-SAT, `5L` (the last Friday of the month) or `1#2` \
         (its second Monday)",
    ),
];

/// `expression` (5 or 6 fields) read by croner; when it is refused, a message naming the
/// field that is wrong and what that field takes. A field is wrong when it is refused alone,
/// every other field a wildcard.
pub(super) fn parse(expression: &str) -> Result<Cron, String> {
    let error = match Cron::from_str(expression) {
        Ok(cron) => return Ok(cron),
        Err(error) => error,
    };
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let names = &FIELDS[FIELDS.len().saturating_sub(fields.len())..];
    let alone = |index: usize| {
        let pattern: Vec<&str> = (0..fields.len())
            .map(|other| if other == index { fields[index] } else { "*" })
            .collect();
        Cron::from_str(&pattern.join(" ")).is_err()
    };
    match (0..fields.len().min(names.len())).find(|&index| alone(index)) {
        Some(index) => {
            let (name, takes) = names[index];
            Err(format!(
                "the cron expression `{expression}` is not valid: its {name} field `{}` is \
                 wrong ({error}); the {name} field takes {takes}, written as one \
                 value, `*`, a list (`1,15`), a range (`1-5`) or a step (`*/15`, `0-30/10`)",
                fields[index]
            ))
        }
        None => Err(format!(
            "the cron expression `{expression}` is not valid: {error}; write 5 fields (minute \
             hour day-of-month month day-of-week) or 6 (seconds first), e.g. `0 9 * * MON-FRI`"
        )),
    }
}

/// The longest a daylight-saving change shifts local time (no zone has shifted more than 2 h).
const MAX_SHIFT_MS: Millis = 3 * 3_600_000;

/// The most local times looked at for one answer (a 6-field expression firing every second
/// near a change looks at about 6 h of them).
const MAX_STEPS: usize = 30_000;

/// A cron expression read in a time zone.
pub(super) struct CronIn {
    pub(super) cron: Cron,
    pub(super) tz: Tz,
    /// Whether the hour field is a wildcard or a step: it follows absolute time.
    pub(super) absolute: bool,
}

impl CronIn {
    /// The expression's hour field decides how a change is crossed (see the module's note).
    pub(super) fn new(cron: Cron, tz: Tz, expression: &str) -> Self {
        let fields: Vec<&str> = expression.split_whitespace().collect();
        let hour = if fields.len() == 6 {
            fields[2]
        } else {
            fields[1]
        };
        let absolute = hour
            .split(',')
            .any(|part| part == "*" || part.contains('/'));
        CronIn { cron, tz, absolute }
    }

    fn offset_ms(&self, at: Millis) -> Millis {
        Utc.timestamp_millis_opt(at).single().map_or(0, |t| {
            i64::from(t.with_timezone(&self.tz).offset().fix().local_minus_utc()) * 1000
        })
    }

    /// The first local time after `local` (strictly) that the expression matches.
    fn next_local(&self, local: NaiveDateTime) -> Option<NaiveDateTime> {
        // croner keeps the start's fraction of a second: start on a whole second.
        let start = Utc.from_utc_datetime(&local.with_nanosecond(0)?);
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        Some(next.naive_utc())
    }

    /// The instants a matching local time fires at (none, one or two), by the module's rule.
    fn instants(&self, local: NaiveDateTime) -> Vec<Millis> {
        match self.tz.from_local_datetime(&local) {
            LocalResult::Single(at) => vec![at.timestamp_millis()],
            LocalResult::Ambiguous(first, second) if self.absolute => {
                vec![first.timestamp_millis(), second.timestamp_millis()]
            }
            LocalResult::Ambiguous(first, _) => vec![first.timestamp_millis()],
            LocalResult::None if self.absolute => Vec::new(),
            LocalResult::None => {
                // The first instant after the gap: the first local minute that exists (gaps
                // are whole minutes long in every zone).
                let mut later = local
                    .with_second(0)
                    .and_then(|t| t.with_nanosecond(0))
                    .unwrap_or(local);
                for _ in 0..(MAX_SHIFT_MS / 60_000) {
                    later += Duration::minutes(1);
                    if let LocalResult::Single(at) | LocalResult::Ambiguous(at, _) =
                        self.tz.from_local_datetime(&later)
                    {
                        return vec![at.timestamp_millis()];
                    }
                }
                Vec::new()
            }
        }
    }

    /// The first occurrence strictly after `after` (ms), or `None` when there is none.
    pub(super) fn next_after(&self, after: Millis) -> Option<Millis> {
        self.next_after_within(after, 4)
    }

    fn next_after_within(&self, after: Millis, depth: u8) -> Option<Millis> {
        let offsets = [
            self.offset_ms(after.saturating_sub(MAX_SHIFT_MS)),
            self.offset_ms(after),
            self.offset_ms(after.saturating_add(MAX_SHIFT_MS)),
        ];
        let (low, high) = (
            offsets.iter().copied().min().unwrap_or(0),
            offsets.iter().copied().max().unwrap_or(0),
        );
        // An instant `at` has the local time `at + offset`: every occurrence after `after` has
        // a local time after `after + low`. Without a change near `after` (low == high) the
        // mapping keeps order there, so the first local match with an instant after `after`
        // is the answer (a change further on cannot put an earlier one before it: a repeated
        // local time lies within a shift of its change).
        let mut local = local_time(after.saturating_add(low).saturating_sub(1_000))?;
        let mut best: Option<Millis> = None;
        for _ in 0..MAX_STEPS {
            local = self.next_local(local)?;
            let reach = local.and_utc().timestamp_millis();
            if let Some(found) = best
                && reach - high.max(self.offset_ms(found)) > found
            {
                // Every later local time maps past the best found.
                return best;
            }
            for at in self.instants(local) {
                if at > after && best.is_none_or(|found| at < found) {
                    best = Some(at);
                }
            }
            if low == high && best.is_some() {
                return best;
            }
            if best.is_none() && reach - high > after.saturating_add(2 * MAX_SHIFT_MS) {
                // Nothing up to this local time: every occurrence is at or after the earliest
                // instant it may map to, so look again from there (past any change near
                // `after`).
                return match depth {
                    0 => None,
                    _ => self.next_after_within(reach - high - 1_000, depth - 1),
                };
            }
        }
        best
    }
}

/// The local time whose value, read as UTC, is `ms`.
fn local_time(ms: Millis) -> Option<NaiveDateTime> {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.naive_utc())
}
