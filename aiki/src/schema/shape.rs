//! The shape of a recorded value as a schema sees it: at each object of the value, the
//! properties the schema declares there, the ones it requires, and the recorded ones it does
//! not evaluate.
//!
//! The walk follows unevaluated-properties semantics (JSON Schema 2020-12): the subschemas that
//! apply to an object in place (`$ref`, `allOf`, the `anyOf` / `oneOf` branches the object
//! matches, `if` / `then` / `else`) evaluate the properties together, so a `#[serde(flatten)]`
//! type, rendered as an `allOf` or merged properties, is one object with the union of its
//! parts' properties. A per-object `additionalProperties` check would not see that.
//!
//! The walk is done here rather than by validating a strict variant of the schema (with
//! `unevaluatedProperties: false` added): a subschema may be both a type of its own and a part
//! (`allOf` member) of another type, and `unevaluatedProperties: false` inside a part rejects
//! the properties its siblings evaluate.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock, RwLock};

use serde_json::Value;

use super::Schema;

/// Subschemas are followed this deep in place (a `$ref` cycle that never descends into the
/// value stops here).
const MAX_IN_PLACE_DEPTH: usize = 32;

/// What a schema says about one object of a value.
#[derive(Debug, Default)]
pub(super) struct Node {
    /// Properties some applicable subschema declares (`properties`).
    pub(super) declared: BTreeSet<String>,
    /// Properties some applicable subschema requires.
    pub(super) required: BTreeSet<String>,
    /// The object's own properties.
    pub(super) present: BTreeSet<String>,
    /// Recorded properties no applicable subschema evaluates.
    pub(super) unevaluated: BTreeSet<String>,
    /// The schema denies unknown properties here (`additionalProperties: false`, which is how
    /// `#[serde(deny_unknown_fields)]` renders).
    pub(super) strict: bool,
}

impl Node {
    /// Declared, not required and not recorded: what deserializes as `None` (or a default).
    pub(super) fn optional_lacking(&self) -> impl Iterator<Item = &String> {
        self.declared
            .iter()
            .filter(|name| !self.required.contains(*name) && !self.present.contains(*name))
    }
}

/// The objects of `value` as `schema` sees them, by JSON pointer (`""` is the value itself).
pub(super) fn walk(schema: &Schema, value: &Value) -> BTreeMap<String, Node> {
    let mut nodes = BTreeMap::new();
    let walk = Walk {
        root: schema.json(),
        fingerprint: schema.fingerprint(),
    };
    walk.visit(vec![schema.json()], value, String::new(), &mut nodes);
    nodes
}

struct Walk<'s> {
    root: &'s Value,
    fingerprint: &'s str,
}

impl<'s> Walk<'s> {
    fn visit(
        &self,
        schemas: Vec<&'s Value>,
        value: &Value,
        pointer: String,
        nodes: &mut BTreeMap<String, Node>,
    ) {
        let mut applicable = Vec::new();
        let mut open = false;
        for schema in schemas {
            open |= self.in_place(schema, value, 0, &mut applicable);
        }
        // No schema says anything about this value (an undeclared property's own fields).
        open |= applicable.is_empty();
        match value {
            Value::Object(object) => {
                let mut node = Node {
                    present: object.keys().cloned().collect(),
                    ..Node::default()
                };
                for schema in &applicable {
                    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                        node.declared.extend(properties.keys().cloned());
                    }
                    if let Some(required) = schema.get("required").and_then(Value::as_array) {
                        let names = required.iter().filter_map(Value::as_str);
                        node.required.extend(names.map(str::to_owned));
                    }
                    node.strict |= schema.get("additionalProperties") == Some(&Value::Bool(false));
                    open |= evaluates_any_property(schema);
                }
                if !open {
                    node.unevaluated = &node.present - &node.declared;
                }
                for (name, child) in object {
                    let schemas = applicable
                        .iter()
                        .filter_map(|schema| property_schema(schema, name))
                        .collect();
                    self.visit(schemas, child, format!("{pointer}/{}", escape(name)), nodes);
                }
                nodes.insert(pointer, node);
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let schemas = applicable
                        .iter()
                        .filter_map(|schema| item_schema(schema, index))
                        .collect();
                    self.visit(schemas, item, format!("{pointer}/{index}"), nodes);
                }
            }
            _ => {}
        }
    }

    /// Collects the object subschemas that apply to `value` in place. Returns `true` when
    /// something that cannot be followed applies (a `true` schema, an unresolvable `$ref`): then
    /// every property counts as evaluated, so nothing is reported that the schema might allow.
    fn in_place(
        &self,
        schema: &'s Value,
        value: &Value,
        depth: usize,
        applicable: &mut Vec<&'s Value>,
    ) -> bool {
        let Some(object) = schema.as_object() else {
            return schema == &Value::Bool(true);
        };
        if depth > MAX_IN_PLACE_DEPTH {
            return true;
        }
        applicable.push(schema);
        let mut open = false;
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) => open |= self.in_place(target, value, depth + 1, applicable),
                None => open = true,
            }
        }
        let branches = |keyword: &str| {
            object
                .get(keyword)
                .and_then(Value::as_array)
                .map(|branches| branches.iter().collect::<Vec<_>>())
                .unwrap_or_default()
        };
        let mut parts = branches("allOf");
        for keyword in ["anyOf", "oneOf"] {
            parts.extend(
                branches(keyword)
                    .into_iter()
                    .filter(|branch| self.matches(branch, value)),
            );
        }
        if let Some(condition) = object.get("if") {
            let then = if self.matches(condition, value) {
                "then"
            } else {
                "else"
            };
            parts.extend(object.get(then));
        }
        for part in parts {
            open |= self.in_place(part, value, depth + 1, applicable);
        }
        open
    }

    /// A local `$ref` (`#/$defs/User`) resolved in the root schema.
    fn resolve(&self, reference: &str) -> Option<&'s Value> {
        let pointer = reference.strip_prefix('#')?;
        let pointer = percent_decode(pointer)?;
        self.root.pointer(&pointer)
    }

    /// Whether `value` is valid against `branch`, with the root's definitions in scope. A
    /// branch that does not compile counts as matching (nothing is hidden from the check).
    fn matches(&self, branch: &Value, value: &Value) -> bool {
        self.branch_validator(branch)
            .is_none_or(|validator| validator.is_valid(value))
    }

    /// The compiled validator of a branch (with the root's definitions), compiled once per
    /// process and root schema; `None` when it does not compile.
    fn branch_validator(&self, branch: &Value) -> Option<Arc<jsonschema::Validator>> {
        type Cache = RwLock<HashMap<(String, String), Option<Arc<jsonschema::Validator>>>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (self.fingerprint.to_owned(), branch.to_string());
        if let Some(found) = cache.read().expect("BUG: branch cache poisoned").get(&key) {
            return found.clone();
        }
        let mut wrapper = serde_json::Map::new();
        for keyword in ["$schema", "$defs", "definitions"] {
            if let Some(found) = self.root.get(keyword) {
                wrapper.insert(keyword.to_owned(), found.clone());
            }
        }
        wrapper.insert("allOf".to_owned(), Value::Array(vec![branch.clone()]));
        let compiled = jsonschema::validator_for(&Value::Object(wrapper))
            .ok()
            .map(Arc::new);
        cache
            .write()
            .expect("BUG: branch cache poisoned")
            .entry(key)
            .or_insert(compiled)
            .clone()
    }
}

/// Whether a subschema evaluates properties beyond the ones it names.
fn evaluates_any_property(schema: &Value) -> bool {
    let opens = |keyword| {
        schema
            .get(keyword)
            .is_some_and(|found| found != &Value::Bool(false))
    };
    opens("additionalProperties") || opens("patternProperties") || opens("unevaluatedProperties")
}

/// The subschema a property's value is checked against, in one applicable subschema.
fn property_schema<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    if let Some(found) = schema.get("properties").and_then(|p| p.get(name)) {
        return Some(found);
    }
    ["additionalProperties", "unevaluatedProperties"]
        .into_iter()
        .find_map(|keyword| schema.get(keyword).filter(|found| found.is_object()))
}

/// The subschema an array item is checked against, in one applicable subschema.
fn item_schema(schema: &Value, index: usize) -> Option<&Value> {
    let prefix = schema.get("prefixItems").and_then(Value::as_array);
    if let Some(found) = prefix.and_then(|prefix| prefix.get(index)) {
        return Some(found);
    }
    match schema.get("items")? {
        Value::Array(tuple) => tuple.get(index),
        items => Some(items),
    }
}

/// A property name as a JSON-pointer segment.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// `%xx` escapes of a `$ref` fragment decoded; `None` when malformed.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}
