//! The queues sleeps and events are recorded in: the names a workflow gives, and the runtime's
//! own records of a run's waits, typed here and nowhere else.

use std::fmt;

use super::{AwaitedSleep, EventRecord, SleepRecord};
use crate::RESERVED_EVENT_PREFIX;

/// The queue a sleep or event record belongs to: one the workflow named, or one of the
/// runtime's own records of a run's waits (a wait's timer, a child wait's timeout or observed
/// outcome).
///
/// This is the one place the runtime's records are told apart from the workflow's. They are
/// stored under names in a namespace no sent event may use (the first character
/// [`RESERVED_EVENT_PREFIX`], then `event:` or `child:`), the encoding every release since the
/// first reads; [`parse`](Queue::parse) reads it and [`stored_name`](Queue::stored_name)
/// writes it, so that records written before and after this type read alike.
///
/// ```
/// use aiki_store::Queue;
///
/// let timer = Queue::EventTimeout("paid".to_owned());
/// assert_eq!(Queue::parse(&timer.stored_name()), timer);
/// assert_eq!(Queue::parse("nap"), Queue::Named("nap".to_owned()));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Queue {
    /// A sleep or an event the workflow named.
    Named(String),
    /// The timer of a wait for the event of this name (a sleep record).
    EventTimeout(String),
    /// A child wait's records, by the address of the child's start: its timer (a sleep
    /// record) and the timeout or the child outcome the parent recorded (event records).
    ChildWait(String),
    /// A record of the runtime's that this release does not know (a newer release's), by
    /// its stored name.
    Unknown(String),
}

const EVENT_TIMEOUT: &str = "event:";
const CHILD_WAIT: &str = "child:";

impl Queue {
    /// The queue a stored name is of.
    pub fn parse(stored: &str) -> Queue {
        let Some(runtime) = stored.strip_prefix(RESERVED_EVENT_PREFIX) else {
            return Queue::Named(stored.to_owned());
        };
        if let Some(event) = runtime.strip_prefix(EVENT_TIMEOUT) {
            Queue::EventTimeout(event.to_owned())
        } else if let Some(address) = runtime.strip_prefix(CHILD_WAIT) {
            Queue::ChildWait(address.to_owned())
        } else {
            Queue::Unknown(stored.to_owned())
        }
    }

    /// The name its records are stored under.
    pub fn stored_name(&self) -> String {
        match self {
            Queue::Named(name) | Queue::Unknown(name) => name.clone(),
            Queue::EventTimeout(event) => format!("{RESERVED_EVENT_PREFIX}{EVENT_TIMEOUT}{event}"),
            Queue::ChildWait(address) => format!("{RESERVED_EVENT_PREFIX}{CHILD_WAIT}{address}"),
        }
    }

    /// Whether it is one of the runtime's own queues, not one the workflow named.
    pub fn is_runtime(&self) -> bool {
        !matches!(self, Queue::Named(_))
    }
}

/// For people: a named queue as its name; the runtime's as what they are for.
impl fmt::Display for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Queue::Named(name) => f.write_str(name),
            Queue::EventTimeout(event) => write!(f, "the timeout of the wait for event `{event}`"),
            Queue::ChildWait(address) => write!(f, "the wait on child `{address}`"),
            Queue::Unknown(name) => {
                let name = name.trim_start_matches(RESERVED_EVENT_PREFIX);
                write!(f, "runtime `{name}`")
            }
        }
    }
}

impl SleepRecord {
    /// The queue it is recorded in: a sleep the workflow named, or a wait's timer.
    pub fn queue(&self) -> Queue {
        Queue::parse(&self.name)
    }
}

impl EventRecord {
    /// The queue it is recorded in: an event the workflow awaits, or a child wait's record.
    pub fn queue(&self) -> Queue {
        Queue::parse(&self.name)
    }
}

impl AwaitedSleep {
    /// The queue of the awaited sleep: a sleep the workflow named, or a wait's timer.
    pub fn queue(&self) -> Queue {
        Queue::parse(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_names_are_those_every_release_reads() {
        // Pinned: a previous release reads these records during a rolling deploy.
        assert_eq!(
            Queue::EventTimeout("paid".into()).stored_name(),
            "\u{1}event:paid"
        );
        assert_eq!(
            Queue::ChildWait("ship:1:ab".into()).stored_name(),
            "\u{1}child:ship:1:ab"
        );
        assert_eq!(Queue::Named("nap".into()).stored_name(), "nap");
        for queue in [
            Queue::Named("nap".into()),
            Queue::Named("event:paid".into()),
            Queue::EventTimeout("paid".into()),
            Queue::EventTimeout(String::new()),
            Queue::ChildWait("ship:1:ab".into()),
            Queue::Unknown("\u{1}timer:x".into()),
        ] {
            assert_eq!(Queue::parse(&queue.stored_name()), queue, "{queue:?}");
        }
        assert!(!Queue::parse("nap").is_runtime());
        assert!(Queue::parse("\u{1}").is_runtime());
    }

    #[test]
    fn queues_read_for_people() {
        assert_eq!(Queue::parse("nap").to_string(), "nap");
        assert_eq!(
            Queue::parse("\u{1}event:paid").to_string(),
            "the timeout of the wait for event `paid`"
        );
        assert_eq!(
            Queue::parse("\u{1}child:ship:1").to_string(),
            "the wait on child `ship:1`"
        );
        assert_eq!(
            Queue::parse("\u{1}timer:x").to_string(),
            "runtime `timer:x`"
        );
    }
}
