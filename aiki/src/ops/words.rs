//! Times in words: `3 min ago`, `in 2 h 5 min`, `2 h 59 min`, RFC 3339 instants.

use aiki_store::Millis;

/// `at` seen from `now` (ms since the epoch): `3 min ago`, `in 2 h 5 min`, `now`.
///
/// ```
/// assert_eq!(aiki::ops::relative(1_000, 181_000), "3 min ago");
/// assert_eq!(aiki::ops::relative(7_501_000, 1_000), "in 2 h 5 min");
/// ```
pub fn relative(at: Millis, now: Millis) -> String {
    let (ms, future) = if at >= now {
        (at - now, true)
    } else {
        (now - at, false)
    };
    let span = span(ms);
    if span == "0 s" {
        "now".to_owned()
    } else if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// A length of time in its two largest units: `2 h 59 min`, `40 s`, `3 d 4 h`.
///
/// ```
/// assert_eq!(aiki::ops::span(10_740_000), "2 h 59 min");
/// ```
pub fn span(ms: i64) -> String {
    let seconds = ms / 1000;
    let units = [("d", 86_400), ("h", 3600), ("min", 60), ("s", 1)];
    let mut parts = Vec::new();
    let mut rest = seconds;
    for (name, size) in units {
        if rest >= size || (parts.is_empty() && size == 1) {
            parts.push(format!("{} {name}", rest / size));
            rest %= size;
        }
        if parts.len() == 2 || (!parts.is_empty() && rest == 0) {
            break;
        }
    }
    parts.join(" ")
}

/// An instant (ms since the epoch) in RFC 3339, to the second: `2026-12-04T09:00:00Z`.
///
/// ```
/// assert_eq!(aiki::ops::timestamp(0), "1970-01-01T00:00:00Z");
/// ```
pub fn timestamp(at: Millis) -> String {
    let at = std::time::UNIX_EPOCH
        + std::time::Duration::from_millis(u64::try_from(at).unwrap_or_default());
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_keep_their_two_largest_units() {
        assert_eq!(span(0), "0 s");
        assert_eq!(span(40_000), "40 s");
        assert_eq!(span(10_740_000), "2 h 59 min");
        assert_eq!(span(3_600_000), "1 h");
        assert_eq!(span(273_600_000), "3 d 4 h");
    }

    #[test]
    fn timestamps_are_rfc3339_in_utc() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp(1_740_823_200_500), "2025-03-01T10:00:00Z");
    }

    #[test]
    fn instants_are_said_from_now() {
        assert_eq!(relative(5_000, 5_400), "now");
        assert_eq!(relative(0, 60_000), "1 min ago");
        assert_eq!(relative(120_000, 0), "in 2 min");
    }
}
