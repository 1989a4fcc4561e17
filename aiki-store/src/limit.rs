//! The size limit on the payloads a store keeps: a run's input, a task's or a run's output, an
//! event's payload, a child's, a fork's and a schedule's input.
//!
//! A payload is measured as its compact JSON text (what `serde_json::to_vec` writes). Every
//! backend refuses a write holding a payload over its limit with [`StoreError::TooLarge`]
//! before touching anything, so the write stores nothing, and an `aiki-server` answers it
//! with 413 and the same error. The limit is [`DEFAULT_PAYLOAD_LIMIT`] unless the store is
//! opened with another (`MemoryStore::with_payload_limit`, `SqliteOptions::payload_limit`,
//! `PostgresOptions::payload_limit`).
//!
//! Only the payloads a caller hands the store are measured: a task call's input recorded with
//! its entry is capped by the runtime instead (a larger one is recorded as its size), and what
//! a fork carries over from the run it forks or the store writes itself (a child outcome a
//! parent observed) was measured when it was first written.
//!
//! ```
//! use aiki_store::limit::{DEFAULT_PAYLOAD_LIMIT, PayloadLimit};
//! use serde_json::json;
//!
//! let limit = PayloadLimit::new(16);
//! assert!(limit.check(|| "a note".to_owned(), &json!("short")).is_ok());
//! let refused = limit.check(|| "a note".to_owned(), &json!("far too long for it")).unwrap_err();
//! assert_eq!(refused.code(), "too_large");
//! assert_eq!(PayloadLimit::default().bytes(), DEFAULT_PAYLOAD_LIMIT);
//! ```

use serde_json::Value;

use crate::{
    EntryRecord, NewEvent, NewFork, NewRun, RunId, ScheduleAction, ScheduleDefinition, StoreError,
    Transition,
};

/// The largest payload a store keeps unless told otherwise: 2 MiB of JSON text. Payloads are
/// records of a run, read back at every replay; large data (files, documents, result sets)
/// belongs in storage of its own, with a reference (a key, a URL) in the payload.
///
/// An `aiki-server`'s request body limit (4 MiB by default) stays above it, so that a request
/// carrying one payload at the limit reaches the store.
pub const DEFAULT_PAYLOAD_LIMIT: usize = 2 * 1024 * 1024;

/// The largest payload a store keeps, in bytes of compact JSON text, and the checks every
/// backend makes with it (see the [module](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PayloadLimit(usize);

impl Default for PayloadLimit {
    fn default() -> Self {
        PayloadLimit(DEFAULT_PAYLOAD_LIMIT)
    }
}

impl PayloadLimit {
    /// A limit of `bytes` of JSON text per payload.
    pub const fn new(bytes: usize) -> Self {
        PayloadLimit(bytes)
    }

    /// The limit, in bytes.
    pub const fn bytes(self) -> usize {
        self.0
    }

    /// Refuses `value` with [`StoreError::TooLarge`] when its JSON text is over the limit;
    /// `what` names it in the error (`the input of run …`).
    pub fn check(self, what: impl FnOnce() -> String, value: &Value) -> Result<(), StoreError> {
        let bytes = json_bytes(value);
        if bytes <= self.0 {
            return Ok(());
        }
        Err(StoreError::TooLarge {
            what: what(),
            bytes: bytes as u64,
            limit: self.0 as u64,
        })
    }

    /// Checks a new run's input ([`ClientStore::create_run`](crate::ClientStore::create_run),
    /// a child's in [`ExecutorStore::start_child`](crate::ExecutorStore::start_child)).
    pub fn check_new_run(self, run: &NewRun) -> Result<(), StoreError> {
        self.check(
            || match &run.parent {
                Some(parent) => format!(
                    "the input of child run {} of {} (started by run {})",
                    run.id, run.namespace, parent.run_id
                ),
                None => format!("the input of run {} of {}", run.id, run.namespace),
            },
            &run.input,
        )
    }

    /// Checks a manifest entry's output
    /// ([`ExecutorStore::put_entry`](crate::ExecutorStore::put_entry)).
    pub fn check_entry(self, entry: &EntryRecord) -> Result<(), StoreError> {
        match &entry.output {
            Some(output) => self.check(
                || {
                    format!(
                        "the output of the call at `{}` in run {}",
                        entry.address, entry.run_id
                    )
                },
                output,
            ),
            None => Ok(()),
        }
    }

    /// Checks the output a transition writes on run `id`
    /// ([`ExecutorStore::transition`](crate::ExecutorStore::transition),
    /// [`ClientStore::transition_all`](crate::ClientStore::transition_all)).
    pub fn check_transition(self, id: RunId, transition: &Transition) -> Result<(), StoreError> {
        match &transition.output {
            Some(output) => self.check(|| format!("the output of run {id}"), output),
            None => Ok(()),
        }
    }

    /// Checks an event's payload ([`ClientStore::append_event`](crate::ClientStore::append_event)).
    pub fn check_event(self, event: &NewEvent) -> Result<(), StoreError> {
        self.check(
            || {
                format!(
                    "the payload of event `{}` for run {}",
                    event.name, event.run_id
                )
            },
            &event.data,
        )
    }

    /// Checks a fork's input ([`ClientStore::fork_run`](crate::ClientStore::fork_run)); what it
    /// carries over was checked when it was first written.
    pub fn check_fork(self, fork: &NewFork) -> Result<(), StoreError> {
        self.check(
            || {
                format!(
                    "the input of fork {} of {}",
                    fork.run.id, fork.run.namespace
                )
            },
            &fork.run.input,
        )
    }

    /// Checks the input a schedule named `name` starts its runs with
    /// ([`ClientStore::create_schedule`](crate::ClientStore::create_schedule),
    /// [`ExecutorStore::declare_schedules`](crate::ExecutorStore::declare_schedules)).
    pub fn check_schedule(
        self,
        name: &str,
        definition: &ScheduleDefinition,
    ) -> Result<(), StoreError> {
        self.check(
            || format!("the input of schedule `{name}`"),
            &definition.input,
        )
    }

    /// Checks the definition an action on the schedule `name` writes, if any
    /// ([`ClientStore::act_on_schedule`](crate::ClientStore::act_on_schedule)).
    pub fn check_schedule_action(
        self,
        name: &str,
        action: &ScheduleAction,
    ) -> Result<(), StoreError> {
        match action {
            ScheduleAction::Redefine { definition, .. } => self.check_schedule(name, definition),
            _ => Ok(()),
        }
    }
}

/// The length of `value`'s compact JSON text (what `serde_json::to_vec` writes), counted
/// without keeping it.
///
/// ```
/// assert_eq!(aiki_store::limit::json_bytes(&serde_json::json!({"a": [1, 2]})), 11);
/// ```
pub fn json_bytes(value: &Value) -> usize {
    /// Counts the bytes written to it.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A `Value` always serializes (its keys are strings); the count is what was written.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `bytes` for people: `3.0 MiB (3145728 bytes)`, `512 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB {
        format!("{:.1} MiB ({bytes} bytes)", bytes as f64 / MIB as f64)
    } else if bytes >= KIB {
        format!("{:.1} KiB ({bytes} bytes)", bytes as f64 / KIB as f64)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_payload_at_the_limit_passes_and_one_byte_more_is_refused_with_both_sizes() {
        let limit = PayloadLimit::new(10);
        // `"` + 8 characters + `"`: 10 bytes.
        assert!(limit.check(|| "x".to_owned(), &json!("12345678")).is_ok());
        match limit.check(|| "the thing".to_owned(), &json!("123456789")) {
            Err(StoreError::TooLarge { what, bytes, limit }) => {
                assert_eq!((what.as_str(), bytes, limit), ("the thing", 11, 10));
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn the_size_is_that_of_compact_json_text() {
        let value = json!({"b": [1, 2.5, null], "a": "é"});
        assert_eq!(
            json_bytes(&value),
            serde_json::to_vec(&value).unwrap().len()
        );
    }

    #[test]
    fn the_message_says_what_how_large_the_limit_and_what_to_do() {
        let error = PayloadLimit::default()
            .check(
                || "the output of run 1".to_owned(),
                &json!("x".repeat(3 * 1024 * 1024)),
            )
            .unwrap_err();
        let message = error.to_string();
        for part in ["the output of run 1", "3.0 MiB", "2.0 MiB", "reference"] {
            assert!(message.contains(part), "{part}: {message}");
        }
        assert!(!error.is_transient());
    }

    #[tokio::test]
    async fn a_store_keeps_the_limit_it_is_given() {
        use crate::{ClientStore, Namespace, NewRun};
        let store = crate::memory::MemoryStore::new().with_payload_limit(16);
        let run = |input| NewRun::new(Namespace::new("limits", "1"), input, "0".repeat(64), 0);
        match store.create_run(run(json!("seventeen bytes"))).await {
            Err(StoreError::TooLarge { bytes, limit, .. }) => assert_eq!((bytes, limit), (17, 16)),
            other => panic!("expected TooLarge, got {other:?}"),
        }
        store
            .create_run(run(json!("sixteen bytes!")))
            .await
            .expect("at the limit");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(size(512), "512 bytes");
        assert_eq!(size(2048), "2.0 KiB (2048 bytes)");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB (3145728 bytes)");
    }
}
