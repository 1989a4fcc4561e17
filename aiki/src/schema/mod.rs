//! Schemas of recorded values: how a recorded value is checked against the code that reads it.
//!
//! Every recorded task and workflow output is stored with the fingerprint of the schema of the
//! type that produced it. On replay, an equal fingerprint needs no check; a different one (or
//! none, as for event payloads and run inputs, which are recorded without one) means the type
//! may have changed, and the recorded JSON is checked against the current schema before it is
//! deserialized: it must validate, and its shape must not show the rename signature (see
//! [`Schema::check_recorded`]). Schemas, fingerprints and compiled validators are computed once
//! per type, and every schema computed is kept by its fingerprint, so a value recorded by
//! another type this process knows is checked against what that type declared.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

use schemars::JsonSchema;
use serde_json::Value;

use crate::address::{canonical_json, sha256_hex};

mod example;
mod rename;
mod shape;
#[cfg(test)]
mod tests;

pub(crate) use example::example;
use rename::Mismatch;
pub(crate) use rename::{Recorded, decode_recorded};

/// The JSON schema of a type, its fingerprint and (compiled on first use) its validator.
pub struct Schema {
    type_name: &'static str,
    json: Value,
    fingerprint: String,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("type_name", &self.type_name)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Schema {
    /// The schema of `T`, computed once per type and cached for the life of the process.
    pub fn of<T: JsonSchema + 'static>() -> Arc<Schema> {
        static CACHE: OnceLock<RwLock<HashMap<TypeId, Arc<Schema>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let id = TypeId::of::<T>();
        if let Some(schema) = cache.read().expect("BUG: schema cache poisoned").get(&id) {
            return schema.clone();
        }
        let schema = Arc::new(Schema::from_json(
            std::any::type_name::<T>(),
            schemars::schema_for!(T).to_value(),
        ));
        let schema = cache
            .write()
            .expect("BUG: schema cache poisoned")
            .entry(id)
            .or_insert(schema)
            .clone();
        registry()
            .write()
            .expect("BUG: schema registry poisoned")
            .entry(schema.fingerprint.clone())
            .or_insert_with(|| schema.clone());
        schema
    }

    /// The schema with this fingerprint, if this process computed it with [`Schema::of`]
    /// (a fingerprint written by another release is unknown here).
    pub(crate) fn registered(fingerprint: &str) -> Option<Arc<Schema>> {
        registry()
            .read()
            .expect("BUG: schema registry poisoned")
            .get(fingerprint)
            .cloned()
    }

    /// The schema with this JSON as this process keeps it by its fingerprint: the one a Rust
    /// type registered, or one made now and kept, so its validator compiles once per process
    /// (for schemas read from the catalog).
    pub(crate) fn shared(json: &Value) -> Arc<Schema> {
        let schema = Schema::from_json("a schema from the catalog", json.clone());
        if let Some(known) = Schema::registered(schema.fingerprint()) {
            return known;
        }
        registry()
            .write()
            .expect("BUG: schema registry poisoned")
            .entry(schema.fingerprint.clone())
            .or_insert_with(|| Arc::new(schema))
            .clone()
    }

    /// A schema from its JSON (for schemas that come from elsewhere than a Rust type).
    pub fn from_json(type_name: &'static str, json: Value) -> Schema {
        let canonical = canonical_json(&json).expect("BUG: a JSON value always serializes");
        Schema {
            type_name,
            fingerprint: sha256_hex(canonical.as_bytes()),
            json,
            validator: OnceLock::new(),
        }
    }

    /// The schema as JSON.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// `hex(sha256(canonical(schema)))`.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Validates `value` against the schema; the error lists what did not match.
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        let validator = self
            .validator
            .get_or_init(|| jsonschema::validator_for(&self.json).map_err(|e| e.to_string()));
        let validator = match validator {
            Ok(validator) => validator,
            Err(message) => {
                return Err(format!(
                    "the schema of `{}` does not compile: {message}",
                    self.type_name
                ));
            }
        };
        let problems: Vec<String> = validator
            .iter_errors(value)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("at `{path}`: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// Checks a recorded value: no work when `recorded_fingerprint` is this schema's; otherwise
    /// the value must validate, and must not show the **rename signature**: at one object of the
    /// value, a recorded property this schema does not evaluate *and* an optional property this
    /// schema declares that the record lacks (which would deserialize as `None`).
    ///
    /// An optional property counts as lacking only if the schema that recorded the value did
    /// not declare it: a `None` left out by `#[serde(skip_serializing_if = "Option::is_none")]`
    /// is not a rename. The recording schema is looked up by `recorded_fingerprint` among the
    /// schemas this process computed; when it is unknown (written by another release, or no
    /// fingerprint was recorded), every absent optional property counts as lacking, so a
    /// removed field beside a skipped `None` in the same object is reported too: a run fails
    /// loudly rather than read `None` where a value was recorded.
    ///
    /// Properties are evaluated with unevaluated-properties semantics, so `#[serde(flatten)]`,
    /// `allOf` and `anyOf` schemas see the union of their parts. A type with
    /// `#[serde(deny_unknown_fields)]` is checked strictly: any recorded property it does not
    /// evaluate is a mismatch. Serde aliases are not in the schema: a field renamed with
    /// `#[serde(alias = "old")]` is still reported here; the runtime's own check, which also
    /// deserializes the value, accepts it.
    pub fn check_recorded(
        &self,
        value: &Value,
        recorded_fingerprint: Option<&str>,
    ) -> Result<(), String> {
        if recorded_fingerprint == Some(self.fingerprint.as_str()) {
            return Ok(());
        }
        self.mismatch(value, recorded_fingerprint).into_result()
    }

    /// Everything that does not match between a recorded value and this schema.
    fn mismatch(&self, value: &Value, recorded_fingerprint: Option<&str>) -> Mismatch {
        let recorder = recorded_fingerprint.and_then(Schema::registered);
        let mut mismatch = Mismatch::of_shape(self, recorder.as_deref(), value);
        if let Err(problems) = self.validate(value) {
            mismatch.problems.push(problems);
        }
        mismatch
    }
}

fn registry() -> &'static RwLock<HashMap<String, Arc<Schema>>> {
    static REGISTRY: OnceLock<RwLock<HashMap<String, Arc<Schema>>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}
