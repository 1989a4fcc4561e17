//! The W3C `traceparent` a run is started in and its executions link to.

use std::fmt;
use std::str::FromStr;

/// A W3C Trace Context `traceparent` (version `00`): the trace and span a run was started in.
///
/// It is stored with the run; every execution of the run links to it, and a child run carries
/// its parent's, so a run that resumes days later on another machine stays one linked story.
/// With the `otel` feature, [`Client::start`](crate::Client::start) takes the current
/// OpenTelemetry context; [`Start::traceparent`](crate::Start::traceparent) gives one
/// explicitly (say, from an incoming HTTP request's header).
///
/// ```
/// use aiki::Traceparent;
///
/// let parent: Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse()?;
/// assert_eq!(parent.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
/// assert_eq!(parent.span_id(), "00f067aa0ba902b7");
/// assert!(parent.sampled());
/// assert!("00-00000000000000000000000000000000-00f067aa0ba902b7-01".parse::<Traceparent>().is_err());
/// # Ok::<(), aiki::InvalidTraceparent>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Traceparent(String);

/// Why a string is not a `traceparent`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{value}` is not a W3C traceparent ({reason}); expected `00-<32 hex trace id>-<16 hex \
     span id>-<2 hex flags>`, lowercase, ids not all zero"
)]
pub struct InvalidTraceparent {
    /// The string given.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl Traceparent {
    /// The trace id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The id of the span the run was started in: 16 lowercase hex digits.
    pub fn span_id(&self) -> &str {
        &self.0[36..52]
    }

    /// The trace flags: bit 0 is "sampled".
    pub fn flags(&self) -> u8 {
        u8::from_str_radix(&self.0[53..55], 16).unwrap_or_default()
    }

    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.flags() & 1 == 1
    }

    /// The header value.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A traceparent of its parts, if they are well-formed.
    pub fn from_parts(
        trace_id: &str,
        span_id: &str,
        flags: u8,
    ) -> Result<Self, InvalidTraceparent> {
        format!("00-{trace_id}-{span_id}-{flags:02x}").parse()
    }
}

impl FromStr for Traceparent {
    type Err = InvalidTraceparent;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| InvalidTraceparent {
            value: value.to_owned(),
            reason,
        };
        let parts: Vec<&str> = value.split('-').collect();
        let [version, trace, span, flags] = parts[..] else {
            return Err(invalid("it has not four parts separated by `-`"));
        };
        let hex = |part: &str, len| {
            part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if version != "00" {
            return Err(invalid("only version `00` is supported"));
        }
        if !hex(trace, 32) {
            return Err(invalid("the trace id is not 32 lowercase hex digits"));
        }
        if !hex(span, 16) {
            return Err(invalid("the span id is not 16 lowercase hex digits"));
        }
        if !hex(flags, 2) {
            return Err(invalid("the flags are not 2 lowercase hex digits"));
        }
        if trace.bytes().all(|b| b == b'0') {
            return Err(invalid("the trace id is all zeros"));
        }
        if span.bytes().all(|b| b == b'0') {
            return Err(invalid("the span id is all zeros"));
        }
        Ok(Traceparent(value.to_owned()))
    }
}

impl fmt::Display for Traceparent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_traceparents_say_what_is_wrong() {
        let cases = [
            ("", "four parts"),
            ("00-abc", "four parts"),
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "trace id is not",
            ),
            ("00-4bf92f3577b34da6-00f067aa0ba902b7-01", "trace id is not"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
                "span id is not",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
                "flags",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "trace id is all zeros",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "span id is all zeros",
            ),
        ];
        for (value, reason) in cases {
            let error = value.parse::<Traceparent>().unwrap_err();
            assert!(error.reason.contains(reason), "{value}: {error}");
            assert!(error.to_string().contains(value), "{error}");
        }
    }

    #[test]
    fn parts_round_trip() {
        let parent =
            Traceparent::from_parts("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 0)
                .unwrap();
        assert_eq!(
            parent.as_str(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        );
        assert!(!parent.sampled());
    }
}
