//! The runtime configuration kept in the store: the daemons' timings and limits, under the
//! product's key names, so that every process and server on one store agrees on them, whoever
//! holds the daemons' lease.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Millis, StoreError};

/// One setting of the [`RuntimeConfig`], named by its key in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ConfigKey {
    /// `daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs`: how long after its last
    /// refresh a claim counts as abandoned and claim recovery releases the run (default 90 s).
    /// Every executor's claim refresh interval must stay below half of it.
    ClaimIdleTimeout,
    /// `daemons.stallUndeliverableRuns.maxAgeMs`: how long a run may wait `queued` before it
    /// is stalled (default 24 h).
    StallMaxAge,
    /// `daemons.intervalMs`: the pause between two passes of the daemons (default 1 s, at most
    /// 1.5 s: the leader renews its 5 s lease at every pass).
    DaemonsInterval,
    /// `daemons.limit`: the most runs one sweep moves in one statement (default 500).
    DaemonsLimit,
    /// `daemons.pruneWorkers.retentionMs`: how long the worker list keeps a worker not seen
    /// any more (default 7 days).
    WorkerRetention,
    /// `daemons.purgeEndedRuns.retentionMs`: how long ended runs are kept before the daemons
    /// purge them with everything recorded for them (see
    /// [`Sweeper::purge_runs`](crate::Sweeper::purge_runs)); 0, the default, keeps them for
    /// ever. At least an hour ([`PURGE_MIN_AGE_MS`](crate::PURGE_MIN_AGE_MS)) when set, unless
    /// a shorter one is asked for explicitly (see [`ConfigKey::check_safe`]), down to a second
    /// ([`PURGE_SHORTEST_AGE_MS`](crate::PURGE_SHORTEST_AGE_MS)): for a trial or a test.
    RunRetention,
}

const SECOND: i64 = 1_000;
const DAY: i64 = 24 * 3_600 * SECOND;

impl ConfigKey {
    /// Every key, in the order they are listed.
    pub const ALL: &'static [ConfigKey] = &[
        ConfigKey::ClaimIdleTimeout,
        ConfigKey::StallMaxAge,
        ConfigKey::DaemonsInterval,
        ConfigKey::DaemonsLimit,
        ConfigKey::WorkerRetention,
        ConfigKey::RunRetention,
    ];

    /// The key's name in the store (and in the API and the CLI).
    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKey::ClaimIdleTimeout => "daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs",
            ConfigKey::StallMaxAge => "daemons.stallUndeliverableRuns.maxAgeMs",
            ConfigKey::DaemonsInterval => "daemons.intervalMs",
            ConfigKey::DaemonsLimit => "daemons.limit",
            ConfigKey::WorkerRetention => "daemons.pruneWorkers.retentionMs",
            ConfigKey::RunRetention => "daemons.purgeEndedRuns.retentionMs",
        }
    }

    /// The value in force while none is stored.
    pub const fn default_value(self) -> i64 {
        match self {
            ConfigKey::ClaimIdleTimeout => 90 * SECOND,
            ConfigKey::StallMaxAge => DAY,
            ConfigKey::DaemonsInterval => SECOND,
            ConfigKey::DaemonsLimit => 500,
            ConfigKey::WorkerRetention => 7 * DAY,
            ConfigKey::RunRetention => 0,
        }
    }

    /// The values the key accepts, inclusive (and 0 for
    /// [`RunRetention`](ConfigKey::RunRetention): kept for ever). Those below its
    /// [`safe_min`](ConfigKey::safe_min) are set only when asked for explicitly.
    pub fn range(self) -> (i64, i64) {
        match self {
            ConfigKey::ClaimIdleTimeout => (SECOND, DAY),
            ConfigKey::StallMaxAge => (SECOND, 365 * DAY),
            ConfigKey::DaemonsInterval => (10, 1_500),
            ConfigKey::DaemonsLimit => (1, 10_000),
            ConfigKey::WorkerRetention => (60 * SECOND, 365 * DAY),
            ConfigKey::RunRetention => (crate::PURGE_SHORTEST_AGE_MS, 3_650 * DAY),
        }
    }

    /// The least value a setting takes unless a lower one is asked for explicitly, for a key
    /// whose range goes lower: a run retention below an hour
    /// ([`PURGE_MIN_AGE_MS`](crate::PURGE_MIN_AGE_MS)) purges runs that a handle awaiting a
    /// result, a parent or a start by reference id may still look for, which suits a trial or
    /// a test, not a production store.
    pub fn safe_min(self) -> Option<i64> {
        match self {
            ConfigKey::RunRetention => Some(crate::PURGE_MIN_AGE_MS),
            _ => None,
        }
    }

    /// `value` if the key accepts it ([`check`](ConfigKey::check)) and it is not below the
    /// key's [`safe_min`](ConfigKey::safe_min) (0, off, is never below it); else
    /// [`StoreError::Invalid`] naming the key, the value and how to ask for it explicitly. What
    /// an operator's change is held to unless it says it means a short value.
    pub fn check_safe(self, value: i64) -> Result<i64, StoreError> {
        let value = self.check(value)?;
        match self.safe_min() {
            Some(min) if value != 0 && value < min => Err(StoreError::Invalid {
                message: format!(
                    "`{self}` of {value} ms is below {min} ms: ended runs would be purged while a \
                     handle awaiting a result, a parent or a start by reference id may still look \
                     for them; for a trial or a test, ask for it explicitly (`aiki config set \
                     --allow-short-retention`, `Client::set_short_retention`)"
                ),
            }),
            _ => Ok(value),
        }
    }

    /// `value` if the key accepts it; else [`StoreError::Invalid`] naming the key, the value
    /// and the accepted range.
    pub fn check(self, value: i64) -> Result<i64, StoreError> {
        let (min, max) = self.range();
        let off = self == ConfigKey::RunRetention && value == 0;
        if off || (min..=max).contains(&value) {
            Ok(value)
        } else {
            let or_off = if self == ConfigKey::RunRetention {
                " (or 0: keep ended runs for ever)"
            } else {
                ""
            };
            Err(StoreError::Invalid {
                message: format!(
                    "`{self}` cannot be {value}: it takes a whole number from {min} to \
                     {max}{or_off}"
                ),
            })
        }
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ConfigKey {
    type Err = StoreError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ConfigKey::ALL
            .iter()
            .copied()
            .find(|key| key.as_str() == name)
            .ok_or_else(|| StoreError::Invalid {
                message: format!(
                    "`{name}` is not a runtime configuration key; the keys are {}",
                    ConfigKey::ALL
                        .iter()
                        .map(|key| key.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

/// Whether claims refreshed every `refresh_ms` are safe under the claim idle timeout
/// `idle_timeout_ms`: the refresh interval must stay below half of it, or claim recovery may
/// take runs from a live executor. The one rule the worker's start and an operator's change of
/// the timeout both check.
pub fn claim_refresh_fits(refresh_ms: Millis, idle_timeout_ms: Millis) -> bool {
    refresh_ms.saturating_mul(2) < idle_timeout_ms
}

/// The runtime configuration in force on a store: each key's stored value, or its default.
/// Serialized as a flat object of the keys' names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct RuntimeConfig {
    /// See [`ConfigKey::ClaimIdleTimeout`].
    #[serde(rename = "daemons.recoverOverdueOutboxEntries.claimIdleTimeoutMs")]
    pub claim_idle_timeout_ms: Millis,
    /// See [`ConfigKey::StallMaxAge`].
    #[serde(rename = "daemons.stallUndeliverableRuns.maxAgeMs")]
    pub stall_max_age_ms: Millis,
    /// See [`ConfigKey::DaemonsInterval`].
    #[serde(rename = "daemons.intervalMs")]
    pub daemons_interval_ms: Millis,
    /// See [`ConfigKey::DaemonsLimit`].
    #[serde(rename = "daemons.limit")]
    pub daemons_limit: i64,
    /// See [`ConfigKey::WorkerRetention`].
    #[serde(rename = "daemons.pruneWorkers.retentionMs")]
    pub worker_retention_ms: Millis,
    /// See [`ConfigKey::RunRetention`].
    #[serde(rename = "daemons.purgeEndedRuns.retentionMs")]
    pub run_retention_ms: Millis,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            claim_idle_timeout_ms: ConfigKey::ClaimIdleTimeout.default_value(),
            stall_max_age_ms: ConfigKey::StallMaxAge.default_value(),
            daemons_interval_ms: ConfigKey::DaemonsInterval.default_value(),
            daemons_limit: ConfigKey::DaemonsLimit.default_value(),
            worker_retention_ms: ConfigKey::WorkerRetention.default_value(),
            run_retention_ms: ConfigKey::RunRetention.default_value(),
        }
    }
}

impl RuntimeConfig {
    /// The value of `key`.
    pub fn get(&self, key: ConfigKey) -> i64 {
        match key {
            ConfigKey::ClaimIdleTimeout => self.claim_idle_timeout_ms,
            ConfigKey::StallMaxAge => self.stall_max_age_ms,
            ConfigKey::DaemonsInterval => self.daemons_interval_ms,
            ConfigKey::DaemonsLimit => self.daemons_limit,
            ConfigKey::WorkerRetention => self.worker_retention_ms,
            ConfigKey::RunRetention => self.run_retention_ms,
        }
    }

    /// This configuration with `key` set to `value`, if the key accepts it.
    pub fn with(mut self, key: ConfigKey, value: i64) -> Result<Self, StoreError> {
        *self.slot(key) = key.check(value)?;
        Ok(self)
    }

    /// The configuration of stored `(key, value)` rows over the defaults. A key this release
    /// does not know (a newer release's) or a value out of its range is left out: the
    /// default stays in force.
    pub fn from_stored<'a>(rows: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut config = RuntimeConfig::default();
        for (name, value) in rows {
            if let Ok(key) = name.parse::<ConfigKey>()
                && key.check(value).is_ok()
            {
                *config.slot(key) = value;
            }
        }
        config
    }

    fn slot(&mut self, key: ConfigKey) -> &mut i64 {
        match key {
            ConfigKey::ClaimIdleTimeout => &mut self.claim_idle_timeout_ms,
            ConfigKey::StallMaxAge => &mut self.stall_max_age_ms,
            ConfigKey::DaemonsInterval => &mut self.daemons_interval_ms,
            ConfigKey::DaemonsLimit => &mut self.daemons_limit,
            ConfigKey::WorkerRetention => &mut self.worker_retention_ms,
            ConfigKey::RunRetention => &mut self.run_retention_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_back_by_its_name_and_its_default_is_in_range() {
        for &key in ConfigKey::ALL {
            assert_eq!(key.as_str().parse::<ConfigKey>().unwrap(), key);
            assert!(key.check(key.default_value()).is_ok(), "{key}");
        }
        assert_eq!(RuntimeConfig::default().claim_idle_timeout_ms, 90_000);
    }

    #[test]
    fn bad_names_and_values_are_refused_with_what_is_accepted() {
        let unknown = "daemons.claimIdleTimeout".parse::<ConfigKey>().unwrap_err();
        assert!(
            unknown.to_string().contains("claimIdleTimeoutMs"),
            "{unknown}"
        );
        let low = RuntimeConfig::default()
            .with(ConfigKey::ClaimIdleTimeout, 10)
            .unwrap_err();
        assert!(low.to_string().contains("from 1000 to 86400000"), "{low}");
    }

    #[test]
    fn run_retention_is_off_at_zero_and_else_an_hour_unless_asked_shorter() {
        let key = ConfigKey::RunRetention;
        assert_eq!(RuntimeConfig::default().get(key), 0, "off by default");
        for safe in [0, 3_600_000] {
            assert_eq!(key.check_safe(safe).unwrap(), safe);
        }
        for bad in [1, 999, -1, 3_651 * DAY] {
            let error = key.check(bad).unwrap_err().to_string();
            assert!(error.contains("or 0: keep ended runs for ever"), "{error}");
        }
        // Below an hour only when asked for explicitly; read back as stored.
        for short in [1_000, 60_000, 3_599_999] {
            assert_eq!(key.check(short).unwrap(), short);
            let error = key.check_safe(short).unwrap_err().to_string();
            assert!(error.contains("--allow-short-retention"), "{error}");
        }
        let stored = RuntimeConfig::from_stored([(key.as_str(), 60_000)]);
        assert_eq!(stored.run_retention_ms, 60_000);
        assert_eq!(ConfigKey::ClaimIdleTimeout.safe_min(), None);
    }

    #[test]
    fn stored_rows_override_defaults_and_unknown_or_bad_rows_are_left_out() {
        let config = RuntimeConfig::from_stored([
            ("daemons.limit", 50),
            ("daemons.someFutureDaemon.intervalMs", 5),
            ("daemons.intervalMs", -1),
        ]);
        assert_eq!(config.daemons_limit, 50);
        assert_eq!(config.daemons_interval_ms, 1_000);
        let json = serde_json::to_value(config).unwrap();
        assert_eq!(json["daemons.limit"], 50);
        assert_eq!(
            serde_json::from_value::<RuntimeConfig>(json).unwrap(),
            config
        );
    }
}
