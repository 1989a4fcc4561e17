//! A small value of a type, made from its JSON schema: what the impact check hands a workflow
//! for an event, or a child's output, it assumes arrives, to see what the code does after.
//!
//! The value is the smallest the schema allows (`null`, `false`, `0`, `""`, empty arrays, only
//! the required fields, the first variant); it is kept only when the type deserializes it, so
//! a type whose schema says too little (a custom `Deserialize`) gets no value, and the check
//! says it cannot look past that wait.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// A value of `T` made from its schema, as JSON, if `T` accepts it.
pub(crate) fn example<T: JsonSchema + DeserializeOwned + 'static>() -> Option<Value> {
    let schema = super::Schema::of::<T>();
    let value = make(schema.json(), schema.json(), 0)?;
    serde_json::from_value::<T>(value.clone()).ok()?;
    Some(value)
}

/// How deep a schema is followed (a recursive type stops there).
const MAX_DEPTH: usize = 16;

fn make(schema: &Value, root: &Value, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let schema = match schema {
        Value::Bool(true) => return Some(Value::Null),
        Value::Object(schema) => schema,
        _ => return None,
    };
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return make(resolve(root, reference)?, root, depth + 1);
    }
    if let Some(value) = schema.get("const") {
        return Some(value.clone());
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|v| v.first())
    {
        return Some(first.clone());
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(variants) = schema.get(key).and_then(Value::as_array) {
            return variants
                .iter()
                .find_map(|variant| make(variant, root, depth + 1));
        }
    }
    let kind = match schema.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        // `["string", "null"]`: an `Option`; `null` is the smallest.
        Some(Value::Array(kinds)) if kinds.iter().any(|k| k == "null") => "null",
        Some(Value::Array(kinds)) => kinds.first().and_then(Value::as_str)?,
        _ if schema.contains_key("properties") => "object",
        _ => return Some(Value::Null),
    };
    let min = |key: &str| schema.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(match kind {
        "null" => Value::Null,
        "boolean" => Value::Bool(false),
        "integer" => json!(
            schema
                .get("minimum")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .max(0)
        ),
        "number" => json!(
            schema
                .get("minimum")
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
                .max(0.0)
        ),
        "string" => Value::String("a".repeat(min("minLength") as usize)),
        "array" => {
            let items = schema.get("items").unwrap_or(&Value::Bool(true));
            let item = make(items, root, depth + 1);
            let count = min("minItems") as usize;
            if count > 0 {
                Value::Array(vec![item?; count])
            } else {
                Value::Array(Vec::new())
            }
        }
        "object" => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let mut object = Map::new();
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let property = properties
                    .and_then(|p| p.get(name))
                    .unwrap_or(&Value::Bool(true));
                object.insert(name.to_owned(), make(property, root, depth + 1)?);
            }
            Value::Object(object)
        }
        _ => return None,
    })
}

/// The schema a local `$ref` (`#/$defs/Name`, `#/definitions/Name`) points at.
fn resolve<'s>(root: &'s Value, reference: &str) -> Option<&'s Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
    struct Payment {
        cents: u64,
        note: Option<String>,
        kind: Kind,
        items: Vec<Item>,
    }

    #[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
    enum Kind {
        Card,
        Transfer { iban: String },
    }

    #[derive(Debug, Serialize, Deserialize, JsonSchema, PartialEq)]
    struct Item {
        sku: String,
    }

    #[test]
    fn the_smallest_value_the_type_accepts() {
        assert_eq!(example::<()>(), Some(Value::Null));
        assert_eq!(example::<u32>(), Some(json!(0)));
        assert_eq!(example::<String>(), Some(json!("")));
        assert_eq!(example::<Option<u8>>(), Some(Value::Null));
        let payment = example::<Payment>().expect("a payment");
        let payment: Payment = serde_json::from_value(payment).unwrap();
        assert_eq!(
            payment,
            Payment {
                cents: 0,
                note: None,
                kind: Kind::Card,
                items: Vec::new()
            }
        );
    }

    /// A type whose `Deserialize` refuses what its schema allows gets no value.
    #[derive(Debug, Serialize, JsonSchema)]
    struct Picky(u8);

    impl<'de> Deserialize<'de> for Picky {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let n = u8::deserialize(deserializer)?;
            if n == 0 {
                return Err(serde::de::Error::custom("zero"));
            }
            Ok(Picky(n))
        }
    }

    #[test]
    fn no_value_for_a_type_that_refuses_it() {
        assert_eq!(example::<Picky>(), None);
    }
}
