//! Retry policies for tasks and workflows.

use std::time::Duration;

use crate::clock::MAX_DURATION;

/// How often, and after what delay, a failed task or workflow is attempted again.
///
/// `max_attempts` counts the first attempt. The delay after the n-th failed attempt is:
///
/// | policy | delay |
/// | --- | --- |
/// | [`never`](RetryPolicy::never) (default) | no retry |
/// | [`fixed`](RetryPolicy::fixed) | `delay` |
/// | [`exponential`](RetryPolicy::exponential) | `min(base_delay × factor^(n−1), max_delay)` |
/// | [`jittered`](RetryPolicy::jittered) | the exponential delay × a uniform random factor in `[1 − jitter, 1]`, rounded up to whole ms |
///
/// Constructors validate their parameters: zero attempts, zero delays, delays longer than ten
/// years, a factor below 1 and a jitter outside `[0, 1]` are [`RetryPolicyError`]s.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    kind: Kind,
    max_attempts: u32,
    base_delay: Duration,
    factor: f64,
    max_delay: Option<Duration>,
    jitter: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Never,
    Fixed,
    Exponential,
    Jittered,
}

/// A retry parameter out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid retry policy: {0}")]
pub struct RetryPolicyError(String);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::never()
    }
}

impl RetryPolicy {
    /// No retry: the first failure is final.
    pub const fn never() -> Self {
        RetryPolicy {
            kind: Kind::Never,
            max_attempts: 1,
            base_delay: Duration::ZERO,
            factor: 1.0,
            max_delay: None,
            jitter: 0.0,
        }
    }

    /// Up to `max_attempts` attempts, `delay` apart.
    pub fn fixed(max_attempts: u32, delay: Duration) -> Result<Self, RetryPolicyError> {
        check_attempts(max_attempts)?;
        check_delay("delay", delay)?;
        Ok(RetryPolicy {
            kind: Kind::Fixed,
            max_attempts,
            base_delay: delay,
            ..RetryPolicy::never()
        })
    }

    /// Up to `max_attempts` attempts, the delay doubling from `base_delay` (see
    /// [`factor`](RetryPolicy::factor), [`max_delay`](RetryPolicy::max_delay)).
    pub fn exponential(max_attempts: u32, base_delay: Duration) -> Result<Self, RetryPolicyError> {
        check_attempts(max_attempts)?;
        check_delay("base_delay", base_delay)?;
        Ok(RetryPolicy {
            kind: Kind::Exponential,
            max_attempts,
            base_delay,
            factor: 2.0,
            ..RetryPolicy::never()
        })
    }

    /// As [`exponential`](RetryPolicy::exponential), each delay scaled by a random factor in
    /// `[1 − jitter, 1]` (jitter 0.5 unless [`jitter`](RetryPolicy::jitter) says otherwise).
    pub fn jittered(max_attempts: u32, base_delay: Duration) -> Result<Self, RetryPolicyError> {
        Ok(RetryPolicy {
            kind: Kind::Jittered,
            jitter: 0.5,
            ..RetryPolicy::exponential(max_attempts, base_delay)?
        })
    }

    /// Sets the growth factor of exponential and jittered delays (default 2; at least 1).
    pub fn factor(mut self, factor: f64) -> Result<Self, RetryPolicyError> {
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(RetryPolicyError(format!(
                "factor must be a finite number of at least 1, got {factor}"
            )));
        }
        self.factor = factor;
        Ok(self)
    }

    /// Caps exponential and jittered delays.
    pub fn max_delay(mut self, max_delay: Duration) -> Result<Self, RetryPolicyError> {
        check_delay("max_delay", max_delay)?;
        self.max_delay = Some(max_delay);
        Ok(self)
    }

    /// Sets the jitter of a jittered policy, in `[0, 1]`.
    pub fn jitter(mut self, jitter: f64) -> Result<Self, RetryPolicyError> {
        if !(0.0..=1.0).contains(&jitter) {
            return Err(RetryPolicyError(format!(
                "jitter must be within [0, 1], got {jitter}"
            )));
        }
        self.jitter = jitter;
        Ok(self)
    }

    /// Attempts allowed in all, the first included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The delay before attempt `failed_attempts + 1`, or `None` when no attempt is left. A
    /// growing delay saturates at the ten-year maximum.
    pub fn delay_after(&self, failed_attempts: u32) -> Option<Duration> {
        if failed_attempts >= self.max_attempts {
            return None;
        }
        let n = failed_attempts.max(1);
        let delay = match self.kind {
            Kind::Never => return None,
            Kind::Fixed => self.base_delay,
            Kind::Exponential | Kind::Jittered => {
                let exponent = i32::try_from(n - 1).unwrap_or(i32::MAX);
                let millis = self.base_delay.as_millis() as f64 * self.factor.powi(exponent);
                let capped = match self.max_delay {
                    Some(max) => millis.min(max.as_millis() as f64),
                    None => millis,
                };
                // Saturates at the ten-year maximum instead of overflowing.
                Duration::from_millis(capped.min(MAX_DURATION.as_millis() as f64) as u64)
            }
        };
        if self.kind == Kind::Jittered {
            let scale = 1.0 - self.jitter * fastrand::f64();
            return Some(Duration::from_millis(
                (delay.as_millis() as f64 * scale).ceil() as u64,
            ));
        }
        Some(delay)
    }

    /// The policy as JSON, for the catalog: `{"kind": "never" | "fixed" | "exponential" |
    /// "jittered", "max_attempts", "base_delay_ms", "factor", "max_delay_ms", "jitter"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let kind = match self.kind {
            Kind::Never => "never",
            Kind::Fixed => "fixed",
            Kind::Exponential => "exponential",
            Kind::Jittered => "jittered",
        };
        serde_json::json!({
            "kind": kind,
            "max_attempts": self.max_attempts,
            "base_delay_ms": self.base_delay.as_millis() as u64,
            "factor": self.factor,
            "max_delay_ms": self.max_delay.map(|delay| delay.as_millis() as u64),
            "jitter": self.jitter,
        })
    }
}

fn check_attempts(max_attempts: u32) -> Result<(), RetryPolicyError> {
    if max_attempts == 0 {
        return Err(RetryPolicyError(
            "max_attempts must be at least 1 (it counts the first attempt)".to_owned(),
        ));
    }
    Ok(())
}

fn check_delay(name: &str, delay: Duration) -> Result<(), RetryPolicyError> {
    if delay.is_zero() {
        return Err(RetryPolicyError(format!(
            "{name} must be greater than zero"
        )));
    }
    if delay > MAX_DURATION {
        return Err(RetryPolicyError(format!(
            "{name} must be at most ten years, got {delay:?}; use a shorter delay"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn delays_beyond_ten_years_are_refused_and_computed_ones_saturate() {
        let error = RetryPolicy::fixed(2, Duration::MAX).unwrap_err();
        assert!(error.to_string().contains("ten years"), "{error}");
        assert!(RetryPolicy::exponential(2, MAX_DURATION + MS).is_err());
        assert!(RetryPolicy::fixed(2, MAX_DURATION).is_ok());
        let growing = RetryPolicy::exponential(200, Duration::from_secs(1)).unwrap();
        assert_eq!(growing.delay_after(150), Some(MAX_DURATION));
    }

    #[test]
    fn never_allows_no_retry() {
        assert_eq!(RetryPolicy::never().delay_after(1), None);
    }

    #[test]
    fn fixed_waits_the_same_until_attempts_run_out() {
        let policy = RetryPolicy::fixed(3, 100 * MS).unwrap();
        assert_eq!(policy.delay_after(1), Some(100 * MS));
        assert_eq!(policy.delay_after(2), Some(100 * MS));
        assert_eq!(policy.delay_after(3), None);
    }

    #[test]
    fn exponential_doubles_and_caps() {
        let policy = RetryPolicy::exponential(6, 1000 * MS)
            .unwrap()
            .max_delay(5000 * MS)
            .unwrap();
        let delays: Vec<_> = (1..6).map(|n| policy.delay_after(n).unwrap()).collect();
        assert_eq!(
            delays,
            [1000 * MS, 2000 * MS, 4000 * MS, 5000 * MS, 5000 * MS]
        );
        let tripling = RetryPolicy::exponential(3, 10 * MS)
            .unwrap()
            .factor(3.0)
            .unwrap();
        assert_eq!(tripling.delay_after(2), Some(30 * MS));
    }

    #[test]
    fn policies_describe_themselves_as_json() {
        assert_eq!(RetryPolicy::never().to_json()["kind"], "never");
        let policy = RetryPolicy::exponential(6, 1000 * MS)
            .unwrap()
            .max_delay(5000 * MS)
            .unwrap();
        assert_eq!(
            policy.to_json(),
            serde_json::json!({"kind": "exponential", "max_attempts": 6, "base_delay_ms": 1000,
                "factor": 2.0, "max_delay_ms": 5000, "jitter": 0.0})
        );
    }

    #[test]
    fn jittered_stays_within_its_band() {
        let policy = RetryPolicy::jittered(5, 1000 * MS).unwrap();
        for _ in 0..200 {
            let delay = policy.delay_after(2).unwrap();
            assert!(delay >= 1000 * MS && delay <= 2000 * MS, "{delay:?}");
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(RetryPolicy::fixed(0, MS).is_err());
        assert!(RetryPolicy::fixed(2, Duration::ZERO).is_err());
        assert!(
            RetryPolicy::exponential(2, MS)
                .unwrap()
                .factor(0.5)
                .is_err()
        );
        assert!(RetryPolicy::jittered(2, MS).unwrap().jitter(1.5).is_err());
        assert!(RetryPolicy::jittered(2, MS).unwrap().jitter(-0.1).is_err());
    }
}
