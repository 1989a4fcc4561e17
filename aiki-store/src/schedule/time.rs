//! When a schedule's occurrences are, and the checks of a definition.

use std::str::FromStr;

use chrono_tz::Tz;

use super::cron::CronIn;
use super::{MAX_EVERY_MS, MIN_EVERY_MS};
use crate::{
    MAX_CATCHUP_WINDOW_MS, MAX_JITTER_MS, Millis, ScheduleDefinition, ScheduleRecord, ScheduleSpec,
    StoreError,
};

/// A spec made ready to compute with.
enum Parsed {
    Cron(Box<CronIn>),
    Every(Millis),
}

fn invalid(message: String) -> StoreError {
    StoreError::Invalid { message }
}

fn parse(spec: &ScheduleSpec) -> Result<Parsed, StoreError> {
    match spec {
        ScheduleSpec::Cron {
            expression,
            timezone,
        } => {
            let fields = expression.split_whitespace().count();
            if !(5..=6).contains(&fields) {
                return Err(invalid(format!(
                    "the cron expression `{expression}` has {fields} fields; write 5 (minute hour \
                     day-of-month month day-of-week) or 6 (seconds first)"
                )));
            }
            let cron = super::cron::parse(expression).map_err(invalid)?;
            let tz = Tz::from_str(timezone).map_err(|_| {
                invalid(format!(
                    "`{timezone}` is not an IANA time zone; name one such as `UTC`, \
                     `Europe/Berlin` or `America/New_York`"
                ))
            })?;
            Ok(Parsed::Cron(Box::new(CronIn::new(cron, tz, expression))))
        }
        ScheduleSpec::Every { every_ms } => {
            if *every_ms > MAX_EVERY_MS {
                return Err(invalid(format!(
                    "an interval of {every_ms} ms is too long: give at most 366 days"
                )));
            }
            if *every_ms < MIN_EVERY_MS {
                return Err(invalid(format!(
                    "an interval of {every_ms} ms is too short: a schedule fires at most every \
                     {MIN_EVERY_MS} ms (give a positive interval of at least 1 s)"
                )));
            }
            Ok(Parsed::Every(*every_ms))
        }
    }
}

/// Checks a schedule's name and definition: [`StoreError::Invalid`] saying what is wrong.
pub fn check(name: &str, definition: &ScheduleDefinition) -> Result<(), StoreError> {
    if name.trim().is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(invalid(format!(
            "the schedule name {name:?} is not valid: give 1 to 200 characters, no control \
             characters"
        )));
    }
    if definition.namespace.workflow.is_empty() || definition.namespace.version.is_empty() {
        return Err(invalid(
            "a schedule names the workflow version it starts (`name@version`)".to_owned(),
        ));
    }
    parse(&definition.spec)?;
    if let Some(window) = definition.catchup_window_ms
        && !(1..=MAX_CATCHUP_WINDOW_MS).contains(&window)
    {
        return Err(invalid(format!(
            "a catch-up window of {window} ms is out of range: give 1 ms to 7 days"
        )));
    }
    if !(0..=MAX_JITTER_MS).contains(&definition.jitter_ms) {
        return Err(invalid(format!(
            "a jitter of {} ms is out of range: give 0 to 1 hour",
            definition.jitter_ms
        )));
    }
    Ok(())
}

/// The first occurrence of `spec` strictly after `after` (an `every` schedule counts its
/// intervals from `anchor`, its creation); `None` when there is none (a cron expression whose
/// dates never come again).
pub fn next_after(
    spec: &ScheduleSpec,
    after: Millis,
    anchor: Millis,
) -> Result<Option<Millis>, StoreError> {
    Ok(match parse(spec)? {
        Parsed::Every(every) => {
            // The first anchor + k * every above `after`, k of either sign.
            let steps = after.saturating_sub(anchor).div_euclid(every) + 1;
            Some(anchor.saturating_add(steps.saturating_mul(every)))
        }
        Parsed::Cron(cron) => cron.next_after(after),
    })
}

/// The occurrences of `record` in `[from, to]`, at most `max` (a backfill's, or the next
/// ones shown to an operator).
pub fn occurrences(
    record: &ScheduleRecord,
    from: Millis,
    to: Millis,
    max: usize,
) -> Result<Vec<Millis>, StoreError> {
    let spec = &record.definition.spec;
    let mut found = Vec::new();
    let mut at = next_after(spec, from.saturating_sub(1), record.created_at)?;
    while let Some(t) = at {
        if t > to || found.len() >= max {
            break;
        }
        found.push(t);
        at = next_after(spec, t, record.created_at)?;
    }
    Ok(found)
}

/// How late the occurrence at `at` may still start: the definition's window, or one interval
/// (for a cron schedule the time to the occurrence after `at`), at most 7 days.
pub fn catchup_window(record: &ScheduleRecord, at: Millis) -> Millis {
    let definition = &record.definition;
    if let Some(window) = definition.catchup_window_ms {
        return window;
    }
    let interval = match &definition.spec {
        ScheduleSpec::Every { every_ms } => *every_ms,
        spec => next_after(spec, at, record.created_at)
            .ok()
            .flatten()
            .map_or(MAX_CATCHUP_WINDOW_MS, |next| next - at),
    };
    interval.clamp(1, MAX_CATCHUP_WINDOW_MS)
}

/// The schedule's fixed jitter: how much later than each occurrence's time the sweep takes it
/// (derived from its name, so every process agrees; at most its `jitter_ms`).
pub fn jitter_offset(record: &ScheduleRecord) -> Millis {
    let jitter = record.definition.jitter_ms;
    if jitter <= 0 {
        return 0;
    }
    // FNV-1a: stable across releases and platforms, unlike std's hasher.
    let hash = record
        .name
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    i64::try_from(hash % (jitter as u64 + 1)).unwrap_or(0)
}

/// A duration in words: `90 s`, `15 min`, `2 h`, `1 d`, `1500 ms`.
pub fn words(ms: Millis) -> String {
    const UNITS: [(Millis, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1_000, "s"),
    ];
    UNITS
        .iter()
        .find(|(unit, _)| ms != 0 && ms % unit == 0)
        .map_or_else(
            || format!("{ms} ms"),
            |(unit, name)| format!("{} {name}", ms / unit),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expression: &str, timezone: &str) -> ScheduleSpec {
        ScheduleSpec::Cron {
            expression: expression.to_owned(),
            timezone: timezone.to_owned(),
        }
    }

    fn utc(text: &str) -> Millis {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn every_counts_from_its_anchor() {
        let spec = ScheduleSpec::Every { every_ms: 60_000 };
        assert_eq!(next_after(&spec, 1_000, 1_000).unwrap(), Some(61_000));
        assert_eq!(next_after(&spec, 60_999, 1_000).unwrap(), Some(61_000));
        assert_eq!(next_after(&spec, 61_000, 1_000).unwrap(), Some(121_000));
        assert_eq!(next_after(&spec, 0, 1_000).unwrap(), Some(1_000));
        assert_eq!(
            next_after(&spec, -59_000, 1_000).unwrap(),
            Some(-59_000 + 60_000)
        );
        assert_eq!(
            next_after(&spec, -60_000, 1_000).unwrap(),
            Some(1_000 - 60_000)
        );
    }

    #[test]
    fn cron_is_strictly_after_even_within_a_second() {
        let spec = cron("0 9 * * *", "UTC");
        let nine = utc("2026-03-02T09:00:00Z");
        assert_eq!(next_after(&spec, nine - 1, 0).unwrap(), Some(nine));
        assert_eq!(
            next_after(&spec, nine + 500, 0).unwrap(),
            Some(nine + 86_400_000)
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, says) in [
            (cron("0 9 * *", "UTC"), "4 fields"),
            (cron("0 0 9 * * * 2026", "UTC"), "7 fields"),
            (cron("61 9 * * *", "UTC"), "not valid"),
            (cron("0 9 * * *", "Mars/Olympus"), "IANA"),
            (ScheduleSpec::Every { every_ms: 0 }, "too short"),
            (ScheduleSpec::Every { every_ms: -5 }, "too short"),
        ] {
            let error = parse(&spec).err().expect("refused").to_string();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_cron_error_names_the_field_and_what_it_takes() {
        for (expression, field, takes) in [
            ("61 9 * * *", "minute field `61`", "0-59"),
            ("0 25 * * *", "hour field `25`", "0-23"),
            ("0 9 32 * *", "day of month field `32`", "1-31"),
            ("0 9 * 13 *", "month field `13`", "1-12 or JAN-DEC"),
            ("0 9 * * FUNDAY", "day of week field `FUNDAY`", "SUN-SAT"),
            ("0 9-x * * *", "hour field `9-x`", "0-23"),
            ("61 0 9 * * *", "seconds field `61`", "0-59"),
            ("0 0 9 * * 8", "day of week field `8`", "0-7"),
        ] {
            let error = parse(&cron(expression, "UTC")).err().expect("refused");
            let error = error.to_string();
            assert!(error.contains(field), "{expression}: {error}");
            assert!(error.contains(takes), "{expression}: {error}");
            assert!(error.contains("`*/15`"), "the forms a field takes: {error}");
        }
    }

    #[test]
    fn every_minute_follows_absolute_time_through_both_changes() {
        let spec = cron("* * * * *", "Europe/Berlin");
        for (from, minutes) in [
            // Fall back: the repeated hour's minutes fire twice, 120 in two hours.
            ("2027-10-31T00:00:00Z", 120),
            // Spring forward: two absolute hours hold 120 minutes, none lost or doubled.
            ("2027-03-28T00:00:00Z", 120),
        ] {
            let start = utc(from);
            let mut at = start - 1;
            let mut count = 0;
            while let Some(next) = next_after(&spec, at, 0).unwrap() {
                if next >= start + 2 * 3_600_000 {
                    break;
                }
                assert_eq!(next, start + count * 60_000, "from {from}");
                at = next;
                count += 1;
            }
            assert_eq!(count, minutes, "from {from}");
        }
    }

    #[test]
    fn a_cron_that_never_matches_has_no_next_time() {
        let spec = cron("0 0 30 2 *", "UTC");
        assert_eq!(next_after(&spec, 0, 0).unwrap(), None);
    }

    #[test]
    fn words_pick_the_largest_whole_unit() {
        assert_eq!(words(900_000), "15 min");
        assert_eq!(words(3_600_000), "1 h");
        assert_eq!(words(1_500), "1500 ms");
        assert_eq!(words(90_000), "90 s");
    }
}
