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

mod renames {
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    use super::super::{Schema, decode_recorded};

    /// The fingerprint of `T`'s schema (computing it registers it, as recording does).
    fn fingerprint<T: schemars::JsonSchema + 'static>() -> String {
        Schema::of::<T>().fingerprint().to_owned()
    }

    fn check<T: schemars::JsonSchema + 'static>(
        value: serde_json::Value,
        recorder: Option<&str>,
    ) -> Result<(), String> {
        Schema::of::<T>().check_recorded(&value, recorder)
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct User {
        email: String,
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct UserRenamed {
        email_address: Option<String>,
    }

    #[test]
    fn a_renamed_optional_field_is_caught_with_the_recorder_known_or_not() {
        for recorder in [
            Some(fingerprint::<User>()),
            Some("unknown".to_owned()),
            None,
        ] {
            let error = check::<UserRenamed>(json!({"email": "a@x"}), recorder.as_deref())
                .expect_err("a rename reads as None");
            assert!(
                error.contains(
                    "recorded field `email` is not in the current type, which declares optional \
                     `email_address` that the record lacks: a renamed field would read as None"
                ),
                "{error}"
            );
            assert!(error.contains(r#"#[serde(alias = "email")]"#), "{error}");
        }
        // What the runtime decodes fails the same way.
        let decoded = decode_recorded::<UserRenamed>(json!({"email": "a@x"}), None);
        assert!(decoded.unwrap_err().contains("read as None"));
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct UserAliased {
        #[serde(alias = "email")]
        email_address: Option<String>,
    }

    #[test]
    fn a_rename_marked_with_a_serde_alias_decodes() {
        let user = decode_recorded::<UserAliased>(json!({"email": "a@x"}), None).unwrap();
        assert_eq!(user.email_address.as_deref(), Some("a@x"));
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct UserWithPhone {
        email: String,
        phone: Option<String>,
    }

    #[test]
    fn an_added_optional_field_passes() {
        let recorder = fingerprint::<User>();
        for recorder in [Some(recorder.as_str()), None] {
            check::<UserWithPhone>(json!({"email": "a@x"}), recorder).unwrap();
        }
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct UserWithName {
        email: String,
        name: String,
    }

    #[test]
    fn a_removed_field_passes() {
        let recorder = fingerprint::<UserWithName>();
        for recorder in [Some(recorder.as_str()), None] {
            check::<User>(json!({"email": "a@x", "name": "A"}), recorder).unwrap();
        }
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct Profile {
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        nick: Option<String>,
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct ProfileWithoutName {
        #[serde(skip_serializing_if = "Option::is_none")]
        nick: Option<String>,
    }

    #[test]
    fn a_removed_field_beside_a_skipped_none_passes_when_the_recorder_is_known() {
        let recorded = serde_json::to_value(Profile {
            name: "A".into(),
            nick: None,
        })
        .unwrap();
        assert_eq!(recorded, json!({"name": "A"}));
        let recorder = fingerprint::<Profile>();
        check::<ProfileWithoutName>(recorded.clone(), Some(&recorder)).unwrap();
        decode_recorded::<ProfileWithoutName>(recorded.clone(), Some(&recorder)).unwrap();
        // Unknown recorder: `nick` may have been `name`; the conservative rule reports it.
        let error = check::<ProfileWithoutName>(recorded, Some("written-by-an-older-release"));
        assert!(error.unwrap_err().contains("`name`"));
    }

    #[test]
    fn a_rollback_meeting_an_extra_recorded_field_passes() {
        let recorded = json!({"email": "a@x", "phone": "555"});
        let recorder = fingerprint::<UserWithPhone>();
        for recorder in [Some(recorder.as_str()), Some("newer-release"), None] {
            check::<User>(recorded.clone(), recorder).unwrap();
        }
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct Base {
        id: String,
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct Flattened {
        #[serde(flatten)]
        base: Base,
        email_address: Option<String>,
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct FlattenedOptional {
        id: String,
        #[serde(flatten)]
        contact: Option<UserRenamed>,
    }

    #[test]
    fn flattened_fields_are_evaluated_with_their_parent() {
        check::<Flattened>(json!({"id": "1", "email_address": "a@x"}), None).unwrap();
        let error = check::<Flattened>(json!({"id": "1", "email": "a@x"}), None).unwrap_err();
        assert!(
            error.contains("`email`") && error.contains("`email_address`"),
            "{error}"
        );
        assert!(
            !error.contains("`id`"),
            "the flattened part evaluates `id`: {error}"
        );
        // A flattened `Option` renders as `anyOf`; its matching branch evaluates its fields.
        check::<FlattenedOptional>(json!({"id": "1", "email_address": "a@x"}), None).unwrap();
        let error = check::<FlattenedOptional>(json!({"id": "1", "email": "a"}), None);
        assert!(error.unwrap_err().contains("read as None"));
    }

    #[test]
    fn all_of_parts_evaluate_together() {
        let schema = Schema::from_json(
            "AllOf",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "allOf": [
                    {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                    {"$ref": "#/$defs/Contact"}
                ],
                "$defs": {"Contact": {"type": "object", "properties": {"email_address": {"type": "string"}}}}
            }),
        );
        schema.check_recorded(&json!({"id": "1"}), None).unwrap();
        schema
            .check_recorded(&json!({"id": "1", "email_address": "a"}), None)
            .unwrap();
        let error = schema
            .check_recorded(&json!({"id": "1", "email": "a"}), None)
            .unwrap_err();
        assert!(
            error.contains("`email`") && error.contains("`email_address`"),
            "{error}"
        );
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    #[serde(untagged)]
    enum Contact {
        Phone {
            phone: String,
            extension: Option<String>,
        },
        Mail {
            email: String,
            email_verified: Option<bool>,
        },
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    struct Account {
        contact: Option<Contact>,
    }

    #[test]
    fn any_of_counts_only_the_branches_the_record_matches() {
        // `Mail` matches: `extension`, declared by `Phone` only, is not lacking.
        let mail = json!({"contact": {"email": "a", "email_verified": true, "legacy": 1}});
        check::<Account>(mail, None).unwrap();
        // `Phone` matches and the record lacks its `extension`: at the nested object.
        let error =
            check::<Account>(json!({"contact": {"phone": "1", "ext": "2"}}), None).unwrap_err();
        assert!(
            error.starts_with("at `/contact`: recorded field `ext`")
                && error.contains("`extension`"),
            "{error}"
        );
    }

    #[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct StrictUser {
        email: String,
    }

    #[test]
    fn deny_unknown_fields_makes_any_unevaluated_field_a_mismatch() {
        let recorder = fingerprint::<UserWithPhone>();
        let error =
            check::<StrictUser>(json!({"email": "a", "phone": "1"}), Some(&recorder)).unwrap_err();
        assert!(
            error.contains(
                "recorded field `phone` is not in the current type, which denies unknown fields"
            ),
            "{error}"
        );
        check::<StrictUser>(json!({"email": "a"}), Some(&recorder)).unwrap();
    }

    #[test]
    fn computed_schemas_are_registered_by_fingerprint() {
        let schema = Schema::of::<UserWithName>();
        let found = Schema::registered(schema.fingerprint()).expect("registered");
        assert!(std::sync::Arc::ptr_eq(&schema, &found));
        assert!(Schema::registered("not-a-fingerprint").is_none());
    }
}
