//! Mapping driver errors onto [`StoreError`] kinds, and which database error codes are
//! transient on each database.

use crate::StoreError;

/// What a unique violation on the table of operation answers says: a repeat of the operation
/// recorded its answer first (see `answers.rs`).
pub(crate) const ANSWER_TAKEN: &str = "the answer of this operation (a repeat recorded it first)";

/// The tables whose unique violations a caller can meet, and what each says was taken: the
/// database's message (which names its constraint) stays in the log.
const TAKEN: &[(&str, &str)] = &[
    ("aiki_operation_answers", ANSWER_TAKEN),
    ("aiki_runs", "a run with this id (or this reference id)"),
    ("aiki_api_keys", "an API key with this id"),
    ("aiki_schedules", "a schedule with this name"),
    ("aiki_endpoints", "an endpoint for this workflow version"),
    ("aiki_events", "an event with this reference id"),
];

/// Maps a driver error onto a [`StoreError`] kind; `is_transient` is the database's rule for
/// its error codes (see [`sqlite_code_is_transient`], [`postgres_code_is_transient`]). Only a
/// failure to reach the database, or a database error its rule calls transient, is
/// [`StoreError::Unavailable`] (which callers retry): a protocol error (a statement the driver
/// cannot send, such as one with more than 65,535 parameters) is not. A value the database
/// refuses (PostgreSQL's data exceptions, class `22`, and program limits, class `54`) is
/// [`StoreError::Invalid`], with the SQLSTATE and not the database's text.
pub(crate) fn map_error(error: sqlx::Error, is_transient: fn(&str) -> bool) -> StoreError {
    use sqlx::Error;
    match error {
        Error::Io(_)
        | Error::Tls(_)
        | Error::PoolTimedOut
        | Error::PoolClosed
        | Error::WorkerCrashed => StoreError::Unavailable {
            message: format!("{error}; check that the database is running and reachable"),
            source: Some(Box::new(error)),
        },
        Error::ColumnDecode { .. }
        | Error::Decode(_)
        | Error::ColumnNotFound(_)
        | Error::ColumnIndexOutOfBounds { .. }
        | Error::TypeNotFound { .. } => StoreError::Corrupt {
            message: error.to_string(),
        },
        Error::Database(ref database) => {
            if database.is_unique_violation() {
                let message = database.message();
                tracing::debug!(%message, "a unique violation");
                let what = TAKEN
                    .iter()
                    .find(|(table, _)| message.contains(table))
                    .map_or("a record with the same key", |(_, what)| what);
                return StoreError::AlreadyExists {
                    what: what.to_owned(),
                };
            }
            let code = database.code().map(|code| code.into_owned());
            if let Some(code) = code.as_deref().filter(|code| refuses_a_value(code)) {
                tracing::warn!(%error, "the database refused a value of a request");
                return StoreError::Invalid {
                    message: format!(
                        "the database refused a value this request holds (SQLSTATE {code}): \
                         check its text for NUL characters, its names for length and its \
                         numbers for range"
                    ),
                };
            }
            if code.as_deref().is_some_and(is_transient) {
                StoreError::Unavailable {
                    message: error.to_string(),
                    source: Some(Box::new(error)),
                }
            } else {
                StoreError::Backend {
                    source: Box::new(error),
                }
            }
        }
        other => StoreError::Backend {
            source: Box::new(other),
        },
    }
}

/// PostgreSQL's SQLSTATEs of a value it refuses: data exceptions (class `22`: a NUL in text,
/// a number out of range, …) and program limits (class `54`: an index row too large, too many
/// parameters).
fn refuses_a_value(code: &str) -> bool {
    code.len() == 5 && (code.starts_with("22") || code.starts_with("54"))
}

/// SQLite's transient codes: the `SQLITE_BUSY` (5) and `SQLITE_LOCKED` (6) families, extended
/// codes included (`SQLITE_BUSY_SNAPSHOT` is 517, its low byte 5).
#[cfg(any(feature = "sqlite", test))]
pub(crate) fn sqlite_code_is_transient(code: &str) -> bool {
    code.parse::<i32>()
        .is_ok_and(|code| matches!(code & 0xff, 5 | 6))
}

/// PostgreSQL's transient SQLSTATEs: connection exceptions (class `08`), serialization
/// failures and deadlocks (`40001`, `40P01`), too many connections (`53300`), shutdowns and
/// "cannot connect now" (`57P01`–`57P03`), and a database that does not exist yet (`3D000`).
#[cfg(any(feature = "postgres", test))]
pub(crate) fn postgres_code_is_transient(code: &str) -> bool {
    code.starts_with("08")
        || matches!(
            code,
            "40001" | "40P01" | "53300" | "57P01" | "57P02" | "57P03" | "3D000"
        )
}

/// Maps a migration error: a database migrated by newer code, an edited migration, or a
/// failure to reach the database.
pub(crate) fn map_migrate_error(
    error: sqlx::migrate::MigrateError,
    is_transient: fn(&str) -> bool,
) -> StoreError {
    use sqlx::migrate::MigrateError;
    match error {
        MigrateError::VersionMissing(version) => StoreError::Migration {
            message: format!(
                "the database has migration {version} applied, which this version of aiki-store \
                 does not know: it was migrated by newer code; upgrade aiki (aiki-store) to the \
                 version the other processes run"
            ),
        },
        MigrateError::VersionMismatch(version) => StoreError::Migration {
            message: format!(
                "migration {version} applied to the database differs from the one in this code \
                 (checksum mismatch); applied migrations are immutable, so this build of \
                 aiki-store is not a released one: use a released version"
            ),
        },
        MigrateError::Dirty(version) => StoreError::Migration {
            message: format!(
                "migration {version} was left partially applied; restore the database from a \
                 backup or finish the migration by hand"
            ),
        },
        MigrateError::Execute(error) => match map_error(error, is_transient) {
            transient @ StoreError::Unavailable { .. } => transient,
            other => StoreError::Migration {
                message: other.to_string(),
            },
        },
        other => StoreError::Migration {
            message: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(code, transient on SQLite, transient on PostgreSQL)`.
    const CODES: &[(&str, bool, bool)] = &[
        // SQLite: BUSY and LOCKED, plain and extended.
        ("5", true, false),
        ("6", true, false),
        ("261", true, false),   // SQLITE_BUSY_RECOVERY
        ("517", true, false),   // SQLITE_BUSY_SNAPSHOT
        ("262", true, false),   // SQLITE_LOCKED_SHAREDCACHE
        ("19", false, false),   // SQLITE_CONSTRAINT
        ("2067", false, false), // SQLITE_CONSTRAINT_UNIQUE
        ("1", false, false),    // SQLITE_ERROR
        ("11", false, false),   // SQLITE_CORRUPT
        // PostgreSQL: the transient SQLSTATEs, some of which read as numbers.
        ("08000", false, true),
        ("08003", false, true),
        ("08006", false, true),
        ("08P01", false, true),
        ("40001", false, true),
        ("40P01", false, true),
        ("53300", false, true),
        ("57P01", false, true),
        ("57P02", false, true),
        ("57P03", false, true),
        ("3D000", false, true),
        // PostgreSQL: permanent errors.
        ("23505", false, false), // unique_violation
        ("42P01", false, false), // undefined_table
        ("22P02", false, false), // invalid_text_representation
        ("53100", false, false), // disk_full
        ("57014", false, false), // query_canceled
        ("XX000", false, false),
    ];

    #[test]
    fn a_protocol_error_is_not_an_outage() {
        let error = sqlx::Error::Protocol("too many arguments for query: 70000".to_owned());
        let mapped = map_error(error, |_| true);
        assert!(
            !matches!(mapped, StoreError::Unavailable { .. }),
            "{mapped:?}"
        );
        assert!(refuses_a_value("22021") && refuses_a_value("54000"));
        assert!(!refuses_a_value("23505") && !refuses_a_value("08006"));
    }

    #[test]
    fn transient_codes_are_classified_per_database() {
        for &(code, sqlite, postgres) in CODES {
            assert_eq!(sqlite_code_is_transient(code), sqlite, "SQLite code {code}");
            assert_eq!(
                postgres_code_is_transient(code),
                postgres,
                "SQLSTATE {code}"
            );
        }
    }
}
