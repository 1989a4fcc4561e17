//! API keys as callers hold them: `aiki_<id>_<secret>`, sent as `Authorization: Bearer …`. The
//! store keeps the id, the secret's SHA-256 (a key's secret has 256 random bits, so a fast hash
//! is as strong as a slow one) and the scopes; a server checks a request's key against that in
//! constant time.

use aiki_store::{ApiKeyRecord, Millis, Scope};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The prefix of every key.
const PREFIX: &str = "aiki_";

/// A key just made: its record for the store, and the token to hand to its holder once (the
/// store never sees the secret).
#[derive(Clone, Debug)]
pub struct NewKey {
    /// What the store keeps.
    pub record: ApiKeyRecord,
    /// `aiki_<id>_<secret>`: what the caller sends.
    pub token: String,
}

/// A new key named `name` holding `scopes`, created at `now`, with a fresh random id and
/// secret (from the operating system's generator).
pub fn generate(name: &str, scopes: Vec<Scope>, now: Millis) -> NewKey {
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let secret = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    NewKey {
        record: ApiKeyRecord::new(id.clone(), name, hash(&secret), scopes, now),
        token: format!("{PREFIX}{id}_{secret}"),
    }
}

/// The id and the secret of a token shaped `aiki_<id>_<secret>`; `None` for any other shape.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.strip_prefix(PREFIX)?.split_once('_')?;
    let hex = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(id) && hex(secret)).then_some((id, secret))
}

/// The SHA-256 of a secret, in lowercase hex (what the store keeps).
pub fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Whether `secret` is the secret of `record`, compared in constant time.
pub fn verify(record: &ApiKeyRecord, secret: &str) -> bool {
    hash(secret)
        .as_bytes()
        .ct_eq(record.secret_sha256.as_bytes())
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_parses_and_verifies_and_nothing_else_does() {
        let key = generate("workers", vec![Scope::Executor], 1);
        let (id, secret) = parse(&key.token).expect("its own shape");
        assert_eq!(id, key.record.id);
        assert_eq!(secret.len(), 64);
        assert!(verify(&key.record, secret));
        assert!(!verify(&key.record, &secret.replace(&secret[..1], "x")));
        let other = generate("workers", vec![Scope::Executor], 1);
        assert_ne!(other.record.id, key.record.id);
        assert!(!verify(&key.record, parse(&other.token).unwrap().1));
        for bad in [
            "",
            "aiki_",
            "aiki__abc",
            "aiki_abc",
            "aiki_abc_",
            "x_abc_def",
            "aiki_ab-c_def",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
