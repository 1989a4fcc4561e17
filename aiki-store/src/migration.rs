//! How a store treats its schema when it connects, and what a store that does not migrate
//! accepts.
//!
//! Workers migrate (`Apply`, the default): the schema is brought to this release's, safely when
//! several processes start at once. Operator tools (a CLI, an impact check, a read-only role)
//! use `Check`: they never change the schema, refuse one that is newer than this release's (a
//! newer release migrated it; this code may misread it), and accept an older one only down to
//! the oldest version this release reads correctly, naming both versions otherwise.

/// What connecting does with the database's schema.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MigrationMode {
    /// Apply pending migrations (and move an install of an earlier release into place).
    #[default]
    Apply,
    /// Change nothing; fail unless the schema is one this release reads correctly.
    Check,
    /// Change and check nothing (the operator migrates; `migrate()` does it later).
    Never,
}

impl From<bool> for MigrationMode {
    /// `true`: [`MigrationMode::Apply`]; `false`: [`MigrationMode::Never`] (the meaning of the
    /// options' `migrate(bool)`).
    fn from(migrate: bool) -> Self {
        if migrate {
            MigrationMode::Apply
        } else {
            MigrationMode::Never
        }
    }
}

/// The schema versions a database has applied, as read from its migration bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// `(version, success)`, in version order.
    pub(crate) versions: Vec<(i64, bool)>,
}

/// Checks, without changing anything, that a database at `applied` can be read by this
/// release, whose migrations are `known` and which reads schemas from `oldest_readable` on.
pub(crate) fn check(
    backend: &str,
    applied: &Applied,
    known: &[i64],
    oldest_readable: i64,
) -> Result<(), crate::StoreError> {
    let ours = known.iter().copied().max().unwrap_or_default();
    let error = |message: String| Err(crate::StoreError::Migration { message });
    if let Some((version, _)) = applied.versions.iter().find(|(_, success)| !success) {
        return error(format!(
            "the {backend} schema has migration {version} partially applied; finish or repair \
             the migration before connecting"
        ));
    }
    if let Some((newer, _)) = applied.versions.iter().find(|(v, _)| !known.contains(v)) {
        return error(format!(
            "the {backend} schema is at version {newer}, newer than this release's ({ours}): a \
             newer release migrated it, and this one could misread it; use a release at least \
             as new as the workers'"
        ));
    }
    let at = applied.versions.iter().map(|(v, _)| *v).max();
    match at {
        None => error(format!(
            "the {backend} database holds no Aiki schema (version {ours} expected); run \
             `aiki migrate`, or connect once with migrations applied"
        )),
        Some(at) if at < oldest_readable => error(format!(
            "the {backend} schema is at version {at}, older than the oldest this release reads \
             ({oldest_readable}; its own is {ours}); migrate it with `aiki migrate` or use the \
             release the workers run"
        )),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;

    fn applied(versions: &[i64]) -> Applied {
        Applied {
            versions: versions.iter().map(|v| (*v, true)).collect(),
        }
    }

    #[test]
    fn a_check_accepts_what_it_reads_and_refuses_the_rest_naming_both_versions() {
        let known = [1, 2, 3];
        assert!(check("sqlite", &applied(&[1, 2, 3]), &known, 2).is_ok());
        assert!(
            check("sqlite", &applied(&[1, 2]), &known, 2).is_ok(),
            "older, readable"
        );
        let message = |result: Result<(), StoreError>| match result {
            Err(StoreError::Migration { message }) => message,
            other => panic!("expected a migration error, got {other:?}"),
        };
        let older = message(check("sqlite", &applied(&[1]), &known, 2));
        assert!(
            older.contains("version 1") && older.contains("(2;"),
            "{older}"
        );
        let newer = message(check("postgres", &applied(&[1, 2, 3, 4]), &known, 1));
        assert!(
            newer.contains("version 4") && newer.contains("(3)"),
            "{newer}"
        );
        let none = message(check("postgres", &applied(&[]), &known, 1));
        assert!(none.contains("aiki migrate"), "{none}");
        let partial = Applied {
            versions: vec![(1, true), (2, false)],
        };
        assert!(message(check("sqlite", &partial, &known, 1)).contains("partially"));
    }
}
