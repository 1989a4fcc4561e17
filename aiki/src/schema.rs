//! Output schemas: how a recorded output is checked against the code that reads it.
//!
//! Every recorded output is stored with the fingerprint of the schema of the type that produced
//! it. On replay, an equal fingerprint needs no check; a different one means the type changed,
//! and the recorded JSON is validated against the current schema before it is deserialized.
//! Schemas, fingerprints and compiled validators are computed once per type.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

use schemars::JsonSchema;
use serde_json::Value;

use crate::address::{canonical_json, sha256_hex};

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
        cache
            .write()
            .expect("BUG: schema cache poisoned")
            .entry(id)
            .or_insert(schema)
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

    /// Checks a recorded value: no work when `recorded_fingerprint` is this schema's, a
    /// validation otherwise.
    pub fn check_recorded(
        &self,
        value: &Value,
        recorded_fingerprint: Option<&str>,
    ) -> Result<(), String> {
        if recorded_fingerprint == Some(self.fingerprint.as_str()) {
            return Ok(());
        }
        self.validate(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct User {
        email: String,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct UserV2 {
        email_address: String,
    }

    #[test]
    fn schemas_are_cached_per_type() {
        assert!(Arc::ptr_eq(&Schema::of::<User>(), &Schema::of::<User>()));
        assert_ne!(
            Schema::of::<User>().fingerprint(),
            Schema::of::<UserV2>().fingerprint()
        );
    }

    /// Golden vector: the fingerprint of a one-field struct with the pinned schemars version.
    /// If it changes (a schemars upgrade), recorded outputs are validated instead of trusted:
    /// correct, only slower. Update it knowingly.
    #[test]
    fn fingerprint_golden_vector() {
        let schema = Schema::of::<User>();
        assert_eq!(
            canonical_json(schema.json()).unwrap(),
            r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"email":{"type":"string"}},"required":["email"],"title":"User","type":"object"}"#
        );
        assert_eq!(
            schema.fingerprint(),
            sha256_hex(canonical_json(schema.json()).unwrap().as_bytes())
        );
    }

    #[test]
    fn a_changed_shape_fails_validation_and_names_the_field() {
        let schema = Schema::of::<UserV2>();
        let recorded = json!({"email": "a@example.com"});
        let error = schema.check_recorded(&recorded, Some("old")).unwrap_err();
        assert!(error.contains("email_address"), "{error}");
        assert!(
            schema
                .check_recorded(&json!({"email_address": "a"}), Some("old"))
                .is_ok()
        );
        // Same fingerprint: trusted without a check.
        assert!(
            schema
                .check_recorded(&recorded, Some(schema.fingerprint()))
                .is_ok()
        );
    }
}
