//! The rename signature of a recorded value, and the decoding of recorded values that checks
//! for it.

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Schema;
use super::shape::walk;

/// At one object of a recorded value: recorded properties the current type does not evaluate,
/// beside optional properties it declares that the record lacks.
#[derive(Debug)]
struct Rename {
    pointer: String,
    recorded: Vec<String>,
    optional: Vec<String>,
}

/// What did not match between a recorded value and the current schema.
#[derive(Debug, Default)]
pub(super) struct Mismatch {
    renames: Vec<Rename>,
    /// Other problems, already worded: strict types' unknown properties, validation errors.
    pub(super) problems: Vec<String>,
}

impl Mismatch {
    /// The shape check of `value` against `current`, given the schema that recorded it (when
    /// this process knows it).
    pub(super) fn of_shape(current: &Schema, recorder: Option<&Schema>, value: &Value) -> Self {
        let now = walk(current, value);
        let before = recorder.map(|recorder| walk(recorder, value));
        let mut mismatch = Mismatch::default();
        for (pointer, node) in now {
            if node.unevaluated.is_empty() {
                continue;
            }
            let recorded: Vec<String> = node.unevaluated.iter().cloned().collect();
            if node.strict {
                mismatch.problems.push(format!(
                    "{}recorded {} not in the current type, which denies unknown fields \
                     (`#[serde(deny_unknown_fields)]`)",
                    at(&pointer),
                    fields("field", &recorded, "is", "are"),
                ));
                continue;
            }
            let known_before = before.as_ref().and_then(|nodes| nodes.get(&pointer));
            let optional: Vec<String> = node
                .optional_lacking()
                .filter(|name| known_before.is_none_or(|node| !node.declared.contains(*name)))
                .cloned()
                .collect();
            if !optional.is_empty() {
                mismatch.renames.push(Rename {
                    pointer,
                    recorded,
                    optional,
                });
            }
        }
        mismatch
    }

    /// Drops the optional properties that got a value from the record after all (through a
    /// `#[serde(alias)]`, which the schema does not show): `roundtrip` is the decoded value
    /// serialized again.
    fn keep_none(&mut self, roundtrip: &Value) {
        for rename in &mut self.renames {
            let object = roundtrip.pointer(&rename.pointer);
            rename.optional.retain(|name| {
                object
                    .and_then(|object| object.get(name))
                    .is_none_or(Value::is_null)
            });
        }
        self.renames.retain(|rename| !rename.optional.is_empty());
    }

    /// `Ok` when nothing mismatched, else every problem in one message.
    pub(super) fn into_result(self) -> Result<(), String> {
        let mut messages: Vec<String> = self.renames.iter().map(Rename::message).collect();
        messages.extend(self.problems);
        if messages.is_empty() {
            Ok(())
        } else {
            Err(messages.join("; "))
        }
    }
}

impl Rename {
    fn message(&self) -> String {
        let old = &self.recorded[0];
        format!(
            "{}recorded {} not in the current type, which declares optional {} that the record \
             lacks: a renamed field would read as None (if `{old}` was renamed, mark the new \
             field `#[serde(alias = \"{old}\")]`)",
            at(&self.pointer),
            fields("field", &self.recorded, "is", "are"),
            fields("", &self.optional, "", ""),
        )
    }
}

/// `at `/a/b`: ` for a nested object, nothing for the value itself.
fn at(pointer: &str) -> String {
    if pointer.is_empty() {
        String::new()
    } else {
        format!("at `{pointer}`: ")
    }
}

/// "field `a` is" / "fields `a`, `b` are" (with an empty noun: "`a`", "`a`, `b`").
fn fields(noun: &str, names: &[String], one: &str, many: &str) -> String {
    let list = names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let (noun, verb) = match names.len() {
        1 => (noun.to_owned(), one),
        _ if noun.is_empty() => (String::new(), many),
        _ => (format!("{noun}s"), many),
    };
    [noun.as_str(), list.as_str(), verb]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A type whose values are recorded: outputs, payloads and inputs.
pub(crate) trait Recorded: Serialize + DeserializeOwned + JsonSchema + 'static {}

impl<T: Serialize + DeserializeOwned + JsonSchema + 'static> Recorded for T {}

/// Decodes a recorded value (a task or child output, an event payload, a run's input) into
/// the current type: trusted when `fingerprint` is the type's own, otherwise checked as
/// [`Schema::check_recorded`] says, except that an optional field which does get a value from
/// the record (a serde alias) is not a rename. The error says what did not match.
pub(crate) fn decode_recorded<T: Recorded>(
    value: Value,
    fingerprint: Option<&str>,
) -> Result<T, String> {
    let schema = Schema::of::<T>();
    if fingerprint == Some(schema.fingerprint()) {
        return serde_json::from_value(value).map_err(|error| error.to_string());
    }
    let mut mismatch = schema.mismatch(&value, fingerprint);
    let decoded: T = match serde_json::from_value(value) {
        Ok(decoded) => decoded,
        Err(error) => {
            mismatch.problems.push(error.to_string());
            return Err(mismatch
                .into_result()
                .expect_err("BUG: a mismatch with a problem is an error"));
        }
    };
    if !mismatch.renames.is_empty() {
        let roundtrip = serde_json::to_value(&decoded).unwrap_or(Value::Null);
        mismatch.keep_none(&roundtrip);
    }
    mismatch.into_result().map(|()| decoded)
}
