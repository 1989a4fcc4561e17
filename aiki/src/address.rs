//! Content addresses: how a task call or a child start is found in a run's manifest.
//!
//! A task's address is `"<task-name>:<input-hash>"`; a child start's is
//! `"<child-name>:<child-version>:<reference-id or input-hash>"`. The input hash is
//! `hex(sha256(canonical({"input": <input>})))` with canonical JSON as RFC 8785 (JCS) defines it,
//! byte for byte what the TypeScript reference implementation computes.

use std::any::TypeId;
use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::NoInput;
use crate::error::WorkflowError;

/// The RFC 8785 canonical JSON text of a value: keys sorted by UTF-16 code units, no
/// white space, numbers as ECMAScript prints them (`1` for `1.0`, `1e+21`).
///
/// Integers beyond 2^53 are printed as the nearest IEEE double, as in JavaScript.
pub fn canonical_json<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    serde_json_canonicalizer::to_string(value)
}

/// `hex(sha256(bytes))`, lowercase.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        use fmt::Write;
        write!(out, "{byte:02x}").expect("BUG: writing to a String cannot fail");
    }
    out
}

/// The input hash of a task or workflow input: `hex(sha256(canonical({"input": input})))`.
///
/// A function without an input (input type [`NoInput`]) hashes `{}`.
pub fn input_hash<T: Serialize + 'static>(input: &T) -> Result<String, WorkflowError> {
    #[derive(Serialize)]
    struct Envelope<'a, T: ?Sized> {
        input: &'a T,
    }
    let canonical = if TypeId::of::<T>() == TypeId::of::<NoInput>() {
        Ok("{}".to_owned())
    } else {
        canonical_json(&Envelope { input })
    };
    let canonical = canonical.map_err(|source| WorkflowError::InputNotSerializable {
        what: std::any::type_name::<T>().to_owned(),
        message: source.to_string(),
    })?;
    Ok(sha256_hex(canonical.as_bytes()))
}

/// A task's content address, typed with the task's output so that what it returns is known.
pub struct TaskAddress<Output> {
    address: String,
    _output: PhantomData<fn() -> Output>,
}

impl<Output> TaskAddress<Output> {
    /// The address of the task named `name` called with the input whose hash is `hash`.
    pub fn new(name: &str, hash: &str) -> Self {
        TaskAddress {
            address: format!("{name}:{hash}"),
            _output: PhantomData,
        }
    }

    /// The address as text, `name:hash`.
    pub fn as_str(&self) -> &str {
        &self.address
    }

    /// The address as text, owned.
    pub fn into_string(self) -> String {
        self.address
    }
}

impl<Output> Clone for TaskAddress<Output> {
    fn clone(&self) -> Self {
        TaskAddress {
            address: self.address.clone(),
            _output: PhantomData,
        }
    }
}

impl<Output> PartialEq for TaskAddress<Output> {
    fn eq(&self, other: &Self) -> bool {
        self.address == other.address
    }
}

impl<Output> Eq for TaskAddress<Output> {}

impl<Output> fmt::Display for TaskAddress<Output> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.address)
    }
}

impl<Output> fmt::Debug for TaskAddress<Output> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskAddress({})", self.address)
    }
}

/// The address of a child-workflow start: `name:version:reference-id`, or
/// `name:version:input-hash` without a reference id.
pub fn child_address(name: &str, version: &str, key: &str) -> String {
    format!("{name}:{version}:{key}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hash(value: serde_json::Value) -> String {
        input_hash(&value).unwrap()
    }

    /// The golden vectors of DESIGN.md: what the TypeScript reference computes. A change here
    /// orphans every in-flight run.
    #[test]
    fn golden_vector_no_input() {
        assert_eq!(
            input_hash(&NoInput).unwrap(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    #[test]
    fn golden_vector_null() {
        let expected = "73c92acd67f108f29ffc7b792c22978979900de72197dd828950c5c98456efb6";
        assert_eq!(hash(json!(null)), expected);
        assert_eq!(input_hash(&None::<u32>).unwrap(), expected);
        assert_eq!(input_hash(&()).unwrap(), expected);
    }

    #[test]
    fn golden_vector_object_keys_sorted() {
        assert_eq!(
            hash(json!({"b": 2, "a": 1})),
            "7e916c4ebcfdd07c6e9d4f6e3393cf48452e66ba21017d4fc409f37bda4d5f6c"
        );
    }

    #[test]
    fn golden_vector_string() {
        assert_eq!(
            input_hash(&"user-123").unwrap(),
            "6793d68188dc7faaea492f55309536e3eb4a15e970432732b3e4e39188c6ebe4"
        );
    }

    #[test]
    fn golden_vector_struct() {
        #[derive(Serialize)]
        struct Id {
            id: &'static str,
        }
        assert_eq!(
            input_hash(&Id { id: "original" }).unwrap(),
            "574ac995c2a1f9c8a64bf2f9bd69022419327958242cd82c2e69ff001cc1b8d1"
        );
    }

    #[test]
    fn golden_vector_float_one_hashes_like_integer_one() {
        let expected = "44745faaac4f3c1540a8c2974578aea85c08bb89ee2caf3afd1a24f9724f280f";
        assert_eq!(input_hash(&1.0_f64).unwrap(), expected);
        assert_eq!(input_hash(&1_u64).unwrap(), expected);
        assert_eq!(
            canonical_json(&json!({"input": 1.0})).unwrap(),
            r#"{"input":1}"#
        );
    }

    #[test]
    fn golden_vector_large_float() {
        assert_eq!(
            canonical_json(&json!({"input": 1e21})).unwrap(),
            r#"{"input":1e+21}"#
        );
        assert_eq!(
            input_hash(&1e21_f64).unwrap(),
            "00f1bf01e053150eef1248f3b8b7a37cbdf88e887ac0663f9fedd1593bdced91"
        );
    }

    #[test]
    fn skipped_none_field_keeps_the_address() {
        #[derive(Serialize)]
        struct V1 {
            id: &'static str,
        }
        #[derive(Serialize)]
        struct V2 {
            id: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            note: Option<String>,
        }
        assert_eq!(
            input_hash(&V1 { id: "original" }).unwrap(),
            input_hash(&V2 {
                id: "original",
                note: None
            })
            .unwrap()
        );
    }

    #[test]
    fn addresses_have_the_documented_shape() {
        let address = TaskAddress::<u32>::new("charge-card", "abc");
        assert_eq!(address.as_str(), "charge-card:abc");
        assert_eq!(
            child_address("child", "1.0.0", "ref-1"),
            "child:1.0.0:ref-1"
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn json_value() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i32>().prop_map(serde_json::Value::from),
                (-1e12f64..1e12).prop_map(serde_json::Value::from),
                "\\PC{0,8}".prop_map(serde_json::Value::from),
            ];
            leaf.prop_recursive(4, 32, 6, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
                    prop::collection::vec(("\\PC{0,6}", inner), 0..6).prop_map(|pairs| {
                        serde_json::Value::Object(pairs.into_iter().collect())
                    }),
                ]
            })
        }

        /// Serializes a value with every object's keys emitted in reverse order (a plain
        /// `serde_json::Value` would emit them sorted, proving nothing).
        struct Reversed<'a>(&'a serde_json::Value);

        impl Serialize for Reversed<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::{SerializeMap, SerializeSeq};
                match self.0 {
                    serde_json::Value::Object(map) => {
                        let mut out = serializer.serialize_map(Some(map.len()))?;
                        for (key, value) in map.iter().rev() {
                            out.serialize_entry(key, &Reversed(value))?;
                        }
                        out.end()
                    }
                    serde_json::Value::Array(items) => {
                        let mut out = serializer.serialize_seq(Some(items.len()))?;
                        for item in items {
                            out.serialize_element(&Reversed(item))?;
                        }
                        out.end()
                    }
                    other => other.serialize(serializer),
                }
            }
        }

        fn hash_reversed(value: &serde_json::Value) -> String {
            #[derive(Serialize)]
            struct Envelope<'a> {
                input: Reversed<'a>,
            }
            sha256_hex(
                canonical_json(&Envelope {
                    input: Reversed(value),
                })
                .unwrap()
                .as_bytes(),
            )
        }

        proptest! {
            #[test]
            fn key_order_never_changes_the_hash(value in json_value()) {
                prop_assert_eq!(input_hash(&value).unwrap(), hash_reversed(&value));
            }

            #[test]
            fn canonical_text_is_stable_under_reparsing(value in json_value()) {
                let text = canonical_json(&value).unwrap();
                let reparsed: serde_json::Value = serde_json::from_str(&text).unwrap();
                prop_assert_eq!(canonical_json(&reparsed).unwrap(), text);
            }
        }
    }
}
