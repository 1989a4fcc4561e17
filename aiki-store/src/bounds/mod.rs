//! What a store accepts in the fields of a request, beyond their types: the values a database
//! would refuse with an error of its own (a NUL character in text, a name longer than an index
//! row holds, a time or duration whose sums overflow 64 bits, a revision past `i64::MAX`), and
//! the lengths of the lists a request may hold. A server checks every request body with
//! [`Bounded::check_bounds`] before the store sees it, so such a request is refused as
//! `invalid_request` naming the field, never answered with a database's error.
//!
//! | what | bound |
//! | --- | --- |
//! | any text (names, ids, messages; not payloads, which are kept as JSON text) | no NUL character (U+0000) |
//! | a name, id, reference id, pool, owner, fingerprint, actor | at most [`MAX_NAME_BYTES`] bytes |
//! | an address, a sleep's or an event's name (they may hold an address) | at most [`MAX_ADDRESS_BYTES`] bytes |
//! | a time (milliseconds since 1970) | within ±[`MAX_TIME`] (the end of year 9999) |
//! | a duration in milliseconds | within ±[`MAX_DURATION_MS`] (100 years) |
//! | an expected revision | at most [`MAX_REVISION`] |
//! | a listing's status filter (`filter.statuses`) | at most [`MAX_STATUS_FILTER`] statuses |
//! | the moves of one `transition_all` (`POST /transitions`) | at most [`MAX_MOVES`] |
//! | any other list of a request (a claim's namespaces, a wait set's members, declared schedules, …) | at most [`MAX_LIST_ITEMS`] |
//!
//! The entry batches keep their own caps ([`api::MAX_ENTRY_BATCH`](crate::api::MAX_ENTRY_BATCH),
//! [`api::MAX_ENTRY_WRITES`](crate::api::MAX_ENTRY_WRITES)).
//!
//! ```
//! use aiki_store::bounds::{Bounded, Field};
//! use aiki_store::{Namespace, NewRun};
//! use serde_json::json;
//!
//! let run = NewRun::new(Namespace::new("orders", "1.0.0"), json!(null), "0".repeat(64), 1);
//! assert!(run.check_bounds(Field::ROOT).is_ok());
//! let nul = NewRun::new(Namespace::new("ord\0ers", "1.0.0"), json!(null), "0".repeat(64), 1);
//! let refused = nul.check_bounds(Field::ROOT).unwrap_err();
//! assert_eq!(refused.field, "namespace.workflow");
//! ```

mod records;
mod requests;

use std::fmt;

use crate::{Millis, StoreError};

/// The longest name, id, reference id, pool, owner, fingerprint or actor, in bytes: two of
/// them and an address fit in one PostgreSQL index row (at most 2,704 bytes).
pub const MAX_NAME_BYTES: usize = 512;

/// The longest address, sleep name or event name, in bytes: a child start's address is three
/// names (`name:version:reference`), and a wait's record of it is named after it.
pub const MAX_ADDRESS_BYTES: usize = 1_800;

/// The latest time (and, negated, the earliest) a request may carry: 9999-12-31T23:59:59.999Z
/// in milliseconds since 1970. A time plus a duration within [`MAX_DURATION_MS`] never
/// overflows 64 bits.
pub const MAX_TIME: Millis = 253_402_300_799_999;

/// The longest duration (and, negated, the shortest) a request may carry: 100 years in
/// milliseconds.
pub const MAX_DURATION_MS: i64 = 100 * 365 * 24 * 3_600_000;

/// The largest expected revision (a database keeps revisions as signed 64-bit integers).
pub const MAX_REVISION: u64 = i64::MAX as u64;

/// The most statuses a listing's filter names (there are fewer statuses than this: a longer
/// list repeats some).
pub const MAX_STATUS_FILTER: usize = 16;

/// The most moves one `transition_all` (`POST /transitions`) makes.
pub const MAX_MOVES: usize = 1_000;

/// The most items any other list of a request holds.
pub const MAX_LIST_ITEMS: usize = 10_000;

/// A field of a request that is out of bounds: where it is, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` {message}")]
#[non_exhaustive]
pub struct OutOfBounds {
    /// The field's path in the request body (`run.namespace.workflow`, `entries[2].address`;
    /// empty for the body itself).
    pub field: String,
    /// What is wrong and what to send instead.
    pub message: String,
}

impl From<OutOfBounds> for StoreError {
    fn from(error: OutOfBounds) -> Self {
        StoreError::Invalid {
            message: if error.field.is_empty() {
                format!("the request {}", error.message)
            } else {
                error.to_string()
            },
        }
    }
}

/// A request type whose fields the store bounds (see the [module](self)).
pub trait Bounded {
    /// `Err` naming the first field out of bounds, `at` being where `self` sits in the request
    /// ([`Field::ROOT`] for the whole body).
    fn check_bounds(&self, at: Field<'_>) -> Result<(), OutOfBounds>;
}

/// Where a field sits in a request: a path built on the stack as the checks descend.
#[derive(Clone, Copy, Debug)]
pub struct Field<'a> {
    parent: Option<&'a Field<'a>>,
    step: Step<'a>,
}

#[derive(Clone, Copy, Debug)]
enum Step<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Field<'a> {
    /// The request body itself.
    pub const ROOT: Field<'static> = Field {
        parent: None,
        step: Step::Root,
    };

    /// The field `key` of this one.
    pub fn at(&'a self, key: &'a str) -> Field<'a> {
        Field {
            parent: Some(self),
            step: Step::Key(key),
        }
    }

    /// The item `index` of this list.
    pub fn item(&'a self, index: usize) -> Field<'a> {
        Field {
            parent: Some(self),
            step: Step::Index(index),
        }
    }

    fn refused(&self, message: String) -> OutOfBounds {
        OutOfBounds {
            field: self.to_string(),
            message,
        }
    }

    /// Refuses text holding a NUL character.
    pub fn text(&self, value: &str) -> Result<(), OutOfBounds> {
        if value.contains('\0') {
            return Err(self.refused(
                "holds a NUL character (U+0000), which the store cannot keep in text: send the \
                 text without it"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    /// Refuses a name over [`MAX_NAME_BYTES`] or holding a NUL character.
    pub fn name(&self, value: &str) -> Result<(), OutOfBounds> {
        self.text(value)?;
        self.length(value, MAX_NAME_BYTES)
    }

    /// Refuses an address over [`MAX_ADDRESS_BYTES`] or holding a NUL character.
    pub fn address(&self, value: &str) -> Result<(), OutOfBounds> {
        self.text(value)?;
        self.length(value, MAX_ADDRESS_BYTES)
    }

    fn length(&self, value: &str, limit: usize) -> Result<(), OutOfBounds> {
        if value.len() > limit {
            return Err(self.refused(format!(
                "is {} bytes long; the store keeps at most {limit} bytes here",
                value.len()
            )));
        }
        Ok(())
    }

    /// [`name`](Field::name) of a value that may be absent.
    pub fn maybe_name(&self, value: Option<&str>) -> Result<(), OutOfBounds> {
        value.map_or(Ok(()), |value| self.name(value))
    }

    /// Refuses a time beyond ±[`MAX_TIME`].
    pub fn time(&self, value: Millis) -> Result<(), OutOfBounds> {
        if !(-MAX_TIME..=MAX_TIME).contains(&value) {
            return Err(self.refused(format!(
                "is {value}, not a time the store keeps: milliseconds since 1970, at most \
                 {MAX_TIME} (the end of year 9999)"
            )));
        }
        Ok(())
    }

    /// [`time`](Field::time) of a value that may be absent.
    pub fn maybe_time(&self, value: Option<Millis>) -> Result<(), OutOfBounds> {
        value.map_or(Ok(()), |value| self.time(value))
    }

    /// Refuses a duration beyond ±[`MAX_DURATION_MS`].
    pub fn duration(&self, value: i64) -> Result<(), OutOfBounds> {
        if !(-MAX_DURATION_MS..=MAX_DURATION_MS).contains(&value) {
            return Err(self.refused(format!(
                "is {value} ms, longer than the store keeps: at most {MAX_DURATION_MS} ms \
                 (100 years)"
            )));
        }
        Ok(())
    }

    /// Refuses an expected revision over [`MAX_REVISION`].
    pub fn revision(&self, value: u64) -> Result<(), OutOfBounds> {
        if value > MAX_REVISION {
            return Err(self.refused(format!(
                "is {value}, past the largest revision a run has ({MAX_REVISION}): send the \
                 revision the run was read at"
            )));
        }
        Ok(())
    }

    /// Refuses a list of `len` items over `cap`, each item being `what`.
    pub fn list(&self, len: usize, cap: usize, what: &str) -> Result<(), OutOfBounds> {
        if len > cap {
            return Err(self.refused(format!(
                "holds {len} {what}; at most {cap} are taken in one request: send fewer, or \
                 several requests"
            )));
        }
        Ok(())
    }

    /// Checks every item of `items` (at most [`MAX_LIST_ITEMS`]).
    pub fn items<T: Bounded>(&self, items: &[T]) -> Result<(), OutOfBounds> {
        self.list(items.len(), MAX_LIST_ITEMS, "items")?;
        for (index, item) in items.iter().enumerate() {
            item.check_bounds(self.item(index))?;
        }
        Ok(())
    }

    /// Checks `value` if there is one.
    pub fn maybe<T: Bounded>(&self, value: Option<&T>) -> Result<(), OutOfBounds> {
        value.map_or(Ok(()), |value| value.check_bounds(*self))
    }
}

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parent) = self.parent {
            parent.fmt(f)?;
        }
        match self.step {
            Step::Root => Ok(()),
            Step::Key(key) if self.parent.is_none_or(|parent| parent.is_root()) => f.write_str(key),
            Step::Key(key) => write!(f, ".{key}"),
            Step::Index(index) => write!(f, "[{index}]"),
        }
    }
}

impl Field<'_> {
    fn is_root(&self) -> bool {
        matches!(self.step, Step::Root)
    }
}

impl<T: Bounded> Bounded for Box<T> {
    fn check_bounds(&self, at: Field<'_>) -> Result<(), OutOfBounds> {
        (**self).check_bounds(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_named_by_their_path() {
        let root = Field::ROOT;
        let run = root.at("run");
        let namespace = run.at("namespace");
        assert_eq!(
            namespace.at("workflow").to_string(),
            "run.namespace.workflow"
        );
        let entries = root.at("entries");
        let second = entries.item(2);
        assert_eq!(second.at("address").to_string(), "entries[2].address");
        assert_eq!(root.item(3).to_string(), "[3]");
        assert_eq!(root.to_string(), "");
    }

    #[test]
    fn each_bound_refuses_past_it_and_takes_it() {
        let at = Field::ROOT.at("f");
        assert!(at.name(&"x".repeat(MAX_NAME_BYTES)).is_ok());
        assert!(at.name(&"x".repeat(MAX_NAME_BYTES + 1)).is_err());
        assert!(at.address(&"x".repeat(MAX_ADDRESS_BYTES)).is_ok());
        assert!(at.address(&"x".repeat(MAX_ADDRESS_BYTES + 1)).is_err());
        assert!(at.text(&"x".repeat(100_000)).is_ok());
        assert_eq!(at.text("a\0b").unwrap_err().field, "f");
        assert!(at.time(MAX_TIME).is_ok() && at.time(-MAX_TIME).is_ok());
        assert!(at.time(MAX_TIME + 1).is_err() && at.time(i64::MIN).is_err());
        assert!(at.duration(MAX_DURATION_MS).is_ok());
        assert!(at.duration(i64::MAX).is_err());
        assert!(at.revision(MAX_REVISION).is_ok());
        assert!(at.revision(u64::MAX).is_err());
        let refused = at.list(MAX_MOVES + 1, MAX_MOVES, "moves").unwrap_err();
        assert!(refused.message.contains("1000"), "{refused}");
        let error = StoreError::from(refused);
        assert_eq!(error.code(), "invalid_request");
        assert!(error.to_string().contains("`f`"), "{error}");
    }
}
