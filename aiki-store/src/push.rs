//! Signed HTTP push: the body a dispatcher posts to an endpoint and the signature it carries.
//!
//! A delivery is a `POST` of a [`PushBody`] (JSON) with the header [`SIGNATURE_HEADER`]:
//! `t=<unix ms>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, with one `v1` per active secret so
//! that secrets rotate without a gap. [`sign`] makes the header; [`verify`] checks one the way an
//! endpoint must: the header's parts in any order, unknown parts ignored, a malformed header
//! refused, the time within a tolerance of the endpoint's clock, and the body's MAC compared in
//! constant time against every secret the endpoint holds. Verify before parsing the body.
//!
//! ```
//! use aiki_store::push::{Tolerance, sign, verify};
//!
//! let body = br#"{"run_id":"0193a1b2-0000-7000-8000-000000000000","workflow":"orders","version":"1"}"#;
//! let header = sign(&["whsec_current"], 1_700_000_000_000, body);
//! assert!(verify(&header, body, &["whsec_current"], 1_700_000_001_000, Tolerance::default()).is_ok());
//! ```

use std::fmt;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::{Millis, RunId};

/// The most `v1` parts a header may carry (a dispatcher sends one per active secret, at most
/// two): more is refused as malformed before any MAC is computed.
pub const MAX_SIGNATURES: usize = 8;

/// The header carrying a delivery's signature.
pub const SIGNATURE_HEADER: &str = "x-aiki-signature";

/// What a dispatcher posts: the run to claim, and its workflow version (so that an endpoint
/// refuses a version it does not serve before it touches the store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushBody {
    /// The queued run delivered.
    pub run_id: RunId,
    /// Its workflow's name.
    pub workflow: String,
    /// Its workflow's version.
    pub version: String,
}

/// What an endpoint answers a delivery it executed with (status 200).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PushAnswer {
    /// Where the execution left the run: the status it moved the run to (`completed`,
    /// `failed`, `sleeping`, `awaiting_event`, `awaiting_retry`, `paused`, …), `handed_back`
    /// (its budget ran out: back to delivery), or `lost` (its claim was taken, or the store
    /// refused a write).
    pub outcome: String,
    /// The task results this execution recorded.
    pub tasks_recorded: u64,
}

impl PushAnswer {
    /// An answer: the execution left the run at `outcome`, having recorded `tasks_recorded`
    /// task results.
    pub fn new(outcome: impl Into<String>, tasks_recorded: u64) -> Self {
        PushAnswer {
            outcome: outcome.into(),
            tasks_recorded,
        }
    }
}

/// How far a signature's time may be from the endpoint's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tolerance {
    /// The oldest signature accepted (default 30 s).
    pub max_age: Duration,
    /// How far ahead a signature may be dated, for clock skew (default 5 s).
    pub max_ahead: Duration,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            max_age: Duration::from_secs(30),
            max_ahead: Duration::from_secs(5),
        }
    }
}

/// Why a signature was refused. Its message says what is wrong and what to check.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The request carries no signature header.
    #[error(
        "the request has no {SIGNATURE_HEADER} header; deliveries are signed by the aiki server's dispatcher"
    )]
    Missing,
    /// The header cannot be read.
    #[error("malformed {SIGNATURE_HEADER} header: {0}; expected `t=<unix ms>,v1=<64 hex digits>`")]
    Malformed(String),
    /// Signed too long ago.
    #[error(
        "signature expired: signed at {signed_at} ms, now is {now} ms (accepted up to {max_age_ms} ms old); \
         a delivery is signed afresh on every attempt, so check this host's clock"
    )]
    Expired {
        /// The signature's time (unix ms).
        signed_at: Millis,
        /// The endpoint's time (unix ms).
        now: Millis,
        /// The oldest accepted, in ms.
        max_age_ms: Millis,
    },
    /// Dated ahead of the endpoint's clock by more than the skew allowed.
    #[error(
        "signature not yet valid: signed at {signed_at} ms, now is {now} ms (accepted up to {max_ahead_ms} ms ahead); \
         check the clocks of this host and the aiki server"
    )]
    NotYetValid {
        /// The signature's time (unix ms).
        signed_at: Millis,
        /// The endpoint's time (unix ms).
        now: Millis,
        /// The skew accepted, in ms.
        max_ahead_ms: Millis,
    },
    /// No `v1` matches the body under any secret the endpoint holds.
    #[error(
        "no signature matches the body under this endpoint's secrets: a wrong or rotated-out secret, or a changed body"
    )]
    Mismatch,
}

/// The signature header of `body` sent at `t` (unix ms): one `v1` per secret.
pub fn sign<S: AsRef<str>>(secrets: &[S], t: Millis, body: &[u8]) -> String {
    let mut header = format!("t={t}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&hex::encode(
            mac(secret.as_ref(), t, body).finalize().into_bytes(),
        ));
    }
    header
}

fn mac(secret: &str, t: Millis, body: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any size");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// A signature header's parts.
struct Parsed {
    t: Millis,
    v1: Vec<Vec<u8>>,
}

fn parse(header: &str) -> Result<Parsed, SignatureError> {
    let malformed = |what: String| Err(SignatureError::Malformed(what));
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        let part = part.trim();
        let Some((name, value)) = part.split_once('=') else {
            return malformed(format!("part `{}` is not `name=value`", truncated(part)));
        };
        match name.trim() {
            "t" => {
                if t.is_some() {
                    return malformed("`t` given twice".to_owned());
                }
                match value.trim().parse::<Millis>() {
                    Ok(value) if value >= 0 => t = Some(value),
                    _ => {
                        return malformed(format!(
                            "`t={}` is not a time in unix milliseconds",
                            truncated(value)
                        ));
                    }
                }
            }
            "v1" if v1.len() >= MAX_SIGNATURES => {
                return malformed(format!("more than {MAX_SIGNATURES} `v1` parts"));
            }
            "v1" => match hex::decode(value.trim()) {
                Ok(bytes) if bytes.len() == 32 => v1.push(bytes),
                _ => {
                    return malformed(format!("`v1={}` is not 64 hex digits", truncated(value)));
                }
            },
            // Unknown parts (a future scheme) are ignored.
            _ => {}
        }
    }
    let Some(t) = t else {
        return malformed("no `t` part".to_owned());
    };
    if v1.is_empty() {
        return malformed("no `v1` part".to_owned());
    }
    Ok(Parsed { t, v1 })
}

/// At most 40 characters of `text`, for an error message.
fn truncated(text: &str) -> impl fmt::Display + '_ {
    let end = text
        .char_indices()
        .nth(40)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}

/// Checks `header` for `body` at `now` (the endpoint's unix ms): well formed, dated within
/// `tolerance`, and one of its `v1` the MAC of the body under one of `secrets` (compared in
/// constant time). Returns the signature's time.
pub fn verify<S: AsRef<str>>(
    header: &str,
    body: &[u8],
    secrets: &[S],
    now: Millis,
    tolerance: Tolerance,
) -> Result<Millis, SignatureError> {
    let parsed = parse(header)?;
    let max_age_ms = Millis::try_from(tolerance.max_age.as_millis()).unwrap_or(Millis::MAX);
    let max_ahead_ms = Millis::try_from(tolerance.max_ahead.as_millis()).unwrap_or(Millis::MAX);
    if now.saturating_sub(parsed.t) > max_age_ms {
        return Err(SignatureError::Expired {
            signed_at: parsed.t,
            now,
            max_age_ms,
        });
    }
    if parsed.t.saturating_sub(now) > max_ahead_ms {
        return Err(SignatureError::NotYetValid {
            signed_at: parsed.t,
            now,
            max_ahead_ms,
        });
    }
    // One MAC per secret, compared with each `v1` in constant time (`CtOutput`'s equality).
    let matches = secrets.iter().any(|secret| {
        let expected = mac(secret.as_ref(), parsed.t, body).finalize();
        parsed.v1.iter().any(|given| {
            let given = hmac::digest::generic_array::GenericArray::clone_from_slice(given);
            expected == hmac::digest::CtOutput::new(given)
        })
    });
    if matches {
        Ok(parsed.t)
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = br#"{"run_id":"x"}"#;
    const NOW: Millis = 1_800_000_000_000;

    fn check(header: &str) -> Result<Millis, SignatureError> {
        verify(header, BODY, &["new", "old"], NOW, Tolerance::default())
    }

    #[test]
    fn any_active_secret_and_any_order_of_parts_is_accepted() {
        assert_eq!(check(&sign(&["old"], NOW, BODY)), Ok(NOW));
        let header = sign(&["other", "new"], NOW, BODY);
        let mut parts: Vec<&str> = header.split(',').collect();
        parts.reverse();
        let reordered = format!("{}, scheme=v2 ,v0=abc", parts.join(","));
        assert_eq!(check(&reordered), Ok(NOW));
    }

    #[test]
    fn a_wrong_secret_or_a_tampered_body_is_a_mismatch() {
        assert_eq!(
            check(&sign(&["forged"], NOW, BODY)),
            Err(SignatureError::Mismatch)
        );
        let header = sign(&["new"], NOW, b"{\"run_id\":\"y\"}");
        assert_eq!(check(&header), Err(SignatureError::Mismatch));
        // The time is part of what is signed.
        let header =
            sign(&["new"], NOW, BODY).replacen(&format!("t={NOW}"), &format!("t={}", NOW - 1), 1);
        assert_eq!(check(&header), Err(SignatureError::Mismatch));
    }

    #[test]
    fn stale_and_future_signatures_name_both_times() {
        let stale = check(&sign(&["new"], NOW - 30_001, BODY)).unwrap_err();
        assert!(
            matches!(stale, SignatureError::Expired { signed_at, now, .. } if signed_at == NOW - 30_001 && now == NOW)
        );
        assert!(stale.to_string().contains("expired"), "{stale}");
        assert!(check(&sign(&["new"], NOW - 30_000, BODY)).is_ok());
        let ahead = check(&sign(&["new"], NOW + 5_001, BODY)).unwrap_err();
        assert!(ahead.to_string().contains("not yet valid"), "{ahead}");
        assert!(
            ahead.to_string().contains(&(NOW + 5_001).to_string()),
            "{ahead}"
        );
        assert!(check(&sign(&["new"], NOW + 5_000, BODY)).is_ok());
    }

    #[test]
    fn malformed_headers_are_refused() {
        let v1 = "ab".repeat(32);
        for header in [
            String::new(),
            "t=1".to_owned(),
            format!("v1={v1}"),
            format!("t=soon,v1={v1}"),
            format!("t=-5,v1={v1}"),
            format!("t={NOW},v1=xyz"),
            format!("t={NOW},v1=abcd"),
            format!("t={NOW},t={NOW},v1={v1}"),
            format!("t={NOW};v1={v1}"),
            format!("t={NOW}{}", format!(",v1={v1}").repeat(MAX_SIGNATURES + 1)),
        ] {
            assert!(
                matches!(check(&header), Err(SignatureError::Malformed(_))),
                "{header:?} gave {:?}",
                check(&header)
            );
        }
    }
}
