//! How a store treats its schema when it connects, and which schemas a release accepts.
//!
//! Workers migrate (`Apply`, the default): the schema is brought to this release's, safely when
//! several processes start at once. Operator tools (a CLI, an impact check, a read-only role)
//! use `Check`: they never change the schema.
//!
//! **Rolling deploys.** Each migration from the operations migration on sets a compatibility
//! record in the database (`aiki_compat.readable_from`): the oldest schema version whose release
//! still reads and writes this schema. An additive migration (new nullable columns, new tables)
//! keeps it; one the previous release would misread raises it. So:
//!
//! * a release finding a *newer* schema accepts it when the record admits its own version
//!   (its old pods keep running after the new release migrated, and a rollback works), and
//!   refuses it otherwise, naming both versions;
//! * a release finding an *older* schema (its pre-deploy check, run before the migration) reads
//!   it down to the oldest version it knows how to read, treating the columns that schema lacks
//!   as absent; in `Apply` mode it migrates it first.
//!
//! Releases before the operations migration know no compatibility record and refuse every newer
//! schema: upgrading from them is stop-and-migrate.

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

/// One migration a store applied when it connected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppliedMigration {
    /// Its version (the number its file name starts with).
    pub version: i64,
    /// What it does (its file name's words).
    pub description: String,
}

/// What connecting in [`MigrationMode::Apply`] did to the schema (see
/// [`migrate`](crate::migrate)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationReport {
    /// The schema version found (`None`: the database held no Aiki schema).
    pub found: Option<i64>,
    /// The migrations applied now, in order (empty when the schema was up to date, or newer
    /// and admitting this release).
    pub applied: Vec<AppliedMigration>,
    /// The schema version now.
    pub version: i64,
    /// This release's own schema version.
    pub release: i64,
}

/// The schema a database holds, as its migration bookkeeping and compatibility record say.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// `(version, success)` of every applied migration, in version order.
    pub(crate) versions: Vec<(i64, bool)>,
    /// The compatibility record: the oldest schema version whose release reads this one.
    pub(crate) readable_from: Option<i64>,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl Found {
    /// The newest applied version.
    pub(crate) fn at(&self) -> Option<i64> {
        self.versions.iter().map(|(version, _)| *version).max()
    }
}

/// What a release makes of a schema: which version it renders its statements for, and whether
/// it still has to migrate.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The version whose columns the statements may use.
    pub(crate) render_at: i64,
    /// `Apply` mode: there are migrations of this release to apply.
    pub(crate) migrate: bool,
}

/// Decides, changing nothing, what a release whose migrations are `known` (its own version is
/// the newest) and which reads schemas from `oldest_readable` on does with the schema `found`
/// when connecting in `mode`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn accept(
    backend: &str,
    found: &Found,
    known: &[i64],
    oldest_readable: i64,
    mode: MigrationMode,
) -> Result<Accepted, crate::StoreError> {
    let ours = known.iter().copied().max().unwrap_or_default();
    let refuse = |message: String| Err(crate::StoreError::Schema { message });
    if mode == MigrationMode::Never {
        return Ok(Accepted {
            render_at: ours,
            migrate: false,
        });
    }
    if let Some((version, _)) = found.versions.iter().find(|(_, success)| !success) {
        return Err(crate::StoreError::Migration {
            message: format!(
                "the {backend} schema has migration {version} partially applied; finish or \
                 repair the migration before connecting"
            ),
        });
    }
    let Some(at) = found.at() else {
        return match mode {
            MigrationMode::Check => refuse(format!(
                "the {backend} database holds no Aiki schema (this release's is version \
                 {ours}): it is not an Aiki store yet; run `aiki migrate`, or start a worker, \
                 to create it"
            )),
            _ => Ok(Accepted {
                render_at: ours,
                migrate: true,
            }),
        };
    };
    let newer = found
        .versions
        .iter()
        .map(|(version, _)| *version)
        .find(|version| *version > ours || !known.contains(version));
    if let Some(newer) = newer {
        return match found.readable_from {
            Some(from) if from <= ours => Ok(Accepted {
                render_at: ours,
                // A version of ours the newer release skipped cannot be applied under it.
                migrate: false,
            }),
            Some(from) => refuse(format!(
                "the {backend} schema is at version {at}, migrated by a newer release, and \
                 admits releases from schema version {from} on; this release's is {ours}: \
                 use a release at least as new as the one that migrated it"
            )),
            None => refuse(format!(
                "the {backend} schema is at version {newer}, newer than this release's \
                 ({ours}), and holds no compatibility record: a newer release migrated it, and \
                 this one could misread it; use a release at least as new as the workers'"
            )),
        };
    }
    let missing = known
        .iter()
        .any(|version| !found.versions.iter().any(|(applied, _)| applied == version));
    match mode {
        MigrationMode::Check if at < oldest_readable => refuse(format!(
            "the {backend} schema is at version {at}, older than the oldest this release reads \
             ({oldest_readable}; its own is {ours}); migrate it with `aiki migrate` or use the \
             release the workers run"
        )),
        MigrationMode::Check => Ok(Accepted {
            render_at: at,
            migrate: false,
        }),
        _ => Ok(Accepted {
            render_at: ours,
            migrate: missing,
        }),
    }
}

#[cfg(all(test, any(feature = "sqlite", feature = "postgres")))]
mod tests {
    use super::*;
    use crate::StoreError;

    fn found(versions: &[i64], readable_from: Option<i64>) -> Found {
        Found {
            versions: versions.iter().map(|v| (*v, true)).collect(),
            readable_from,
        }
    }

    fn message(result: Result<Accepted, StoreError>) -> String {
        match result {
            Err(StoreError::Schema { message } | StoreError::Migration { message }) => message,
            other => panic!("expected a schema error, got {other:?}"),
        }
    }

    const CHECK: MigrationMode = MigrationMode::Check;
    const APPLY: MigrationMode = MigrationMode::Apply;

    #[test]
    fn a_check_reads_its_own_and_older_schemas_down_to_the_oldest_it_reads() {
        let known = [1, 2, 3];
        let at = |versions: &[i64]| accept("sqlite", &found(versions, None), &known, 2, CHECK);
        assert_eq!(at(&[1, 2, 3]).unwrap().render_at, 3);
        assert_eq!(
            at(&[1, 2]).unwrap().render_at,
            2,
            "older, readable: rendered for it"
        );
        let older = message(at(&[1]));
        assert!(
            older.contains("version 1") && older.contains("(2;"),
            "{older}"
        );
        let none = message(at(&[]));
        assert!(
            none.contains("no Aiki schema") && none.contains("aiki migrate"),
            "{none}"
        );
        assert!(!none.contains("migration failed"), "{none}");
        let partial = Found {
            versions: vec![(1, true), (2, false)],
            readable_from: None,
        };
        assert!(message(accept("sqlite", &partial, &known, 1, CHECK)).contains("partially"));
    }

    #[test]
    fn a_newer_schema_is_accepted_when_its_compatibility_record_admits_this_release() {
        let known = [1, 2, 3];
        for mode in [CHECK, APPLY] {
            let admitted = accept("postgres", &found(&[1, 2, 3, 4], Some(3)), &known, 1, mode)
                .expect("admitted");
            assert_eq!(
                admitted,
                Accepted {
                    render_at: 3,
                    migrate: false
                }
            );
            let refused = message(accept(
                "postgres",
                &found(&[1, 2, 3, 4], Some(4)),
                &known,
                1,
                mode,
            ));
            assert!(
                refused.contains("version 4") && refused.contains("is 3"),
                "names both: {refused}"
            );
            let unrecorded = message(accept(
                "postgres",
                &found(&[1, 2, 3, 4], None),
                &known,
                1,
                mode,
            ));
            assert!(
                unrecorded.contains("version 4") && unrecorded.contains("(3)"),
                "{unrecorded}"
            );
        }
    }

    /// Every migration from the operations migration on sets the compatibility record, and
    /// sets it below its own version: the release before it keeps working against the schema it
    /// leaves (a rolling deploy). A migration that forgot would leave the previous release
    /// admitted to a schema it may misread. An index built concurrently (`-- no-transaction`)
    /// changes no column and may leave the record as it is, so it may hold nothing else.
    #[test]
    fn every_migration_since_the_record_sets_it() {
        for (backend, first) in [("sqlite", 10), ("postgres", 11)] {
            let folder = format!("{}/migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
            let mut checked = 0;
            for file in std::fs::read_dir(&folder).unwrap() {
                let path = file.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let version: i64 = name.split('_').next().unwrap().parse().unwrap();
                if version < first {
                    continue;
                }
                let sql = std::fs::read_to_string(&path).unwrap();
                let statements: Vec<&str> = sql
                    .lines()
                    .filter(|line| !line.trim_start().starts_with("--") && !line.trim().is_empty())
                    .collect();
                if sql.starts_with("-- no-transaction") {
                    assert!(
                        statements
                            .iter()
                            .all(|line| line.starts_with("CREATE INDEX CONCURRENTLY")),
                        "{backend} migration {name} runs outside a transaction and does more \
                         than build an index: {statements:?}"
                    );
                    continue;
                }
                let readable_from = statements
                    .iter()
                    .find_map(|line| {
                        let at = line
                            .find("readable_from = ")
                            .map(|at| at + 16)
                            .or_else(|| line.find("VALUES (1, ").map(|at| at + 11))?;
                        let digits: String = line[at..]
                            .chars()
                            .take_while(char::is_ascii_digit)
                            .collect();
                        digits.parse::<i64>().ok()
                    })
                    .unwrap_or_else(|| {
                        panic!("{backend} migration {name} does not set the compatibility record")
                    });
                assert!(
                    readable_from < version,
                    "{backend} migration {name} admits only releases from {readable_from} on: \
                     the release before it would stop during a rolling deploy"
                );
                checked += 1;
            }
            assert!(checked >= 2, "{backend}: {checked}");
        }
    }

    /// A status list a trigger of a migration since the record spells out is one the code
    /// names (terminal, suspended, woken by a timer, held by a pause): a status added later
    /// must not be missed by SQL that cannot call the code.
    #[test]
    fn every_status_list_of_a_trigger_is_one_the_code_names() {
        use crate::RunStatus;
        let named: Vec<(&str, Vec<&str>)> = [
            ("terminal", RunStatus::is_terminal as fn(RunStatus) -> bool),
            ("suspended", RunStatus::is_suspended),
            ("wakes on a timer", RunStatus::wakes_on_timer),
            ("held by a pause", RunStatus::held_by_pause),
            ("held by a pause, not paused yet", |status| {
                status.held_by_pause() && status != RunStatus::Paused
            }),
        ]
        .into_iter()
        .map(|(name, test)| {
            let mut set: Vec<&str> = RunStatus::ALL
                .into_iter()
                .filter(|status| test(*status))
                .map(RunStatus::as_str)
                .collect();
            set.sort_unstable();
            (name, set)
        })
        .collect();
        let mut lists = 0;
        for (backend, first) in [("sqlite", 10), ("postgres", 11)] {
            let folder = format!("{}/migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
            for file in std::fs::read_dir(&folder).unwrap() {
                let path = file.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let version: i64 = name.split('_').next().unwrap().parse().unwrap();
                if version < first {
                    continue;
                }
                let sql = std::fs::read_to_string(&path).unwrap();
                for (at, _) in sql
                    .match_indices("status IN (")
                    .chain(sql.match_indices("status NOT IN ("))
                {
                    let open = at + sql[at..].find('(').unwrap() + 1;
                    let close = open + sql[open..].find(')').unwrap();
                    let mut list: Vec<&str> = sql[open..close]
                        .split(',')
                        .map(|item| item.trim().trim_matches('\''))
                        .collect();
                    list.sort_unstable();
                    assert!(
                        named.iter().any(|(_, set)| *set == list),
                        "{backend} migration {name}: the status list {list:?} is none the code \
                         names ({named:?})"
                    );
                    lists += 1;
                }
            }
        }
        assert!(lists >= 10, "{lists} lists checked");
    }

    #[test]
    fn apply_migrates_what_is_missing_and_nothing_else() {
        let known = [1, 2, 3];
        let apply = |versions: &[i64]| accept("sqlite", &found(versions, None), &known, 2, APPLY);
        assert_eq!(
            apply(&[]).unwrap(),
            Accepted {
                render_at: 3,
                migrate: true
            }
        );
        assert_eq!(
            apply(&[1]).unwrap(),
            Accepted {
                render_at: 3,
                migrate: true
            }
        );
        assert_eq!(
            apply(&[1, 2, 3]).unwrap(),
            Accepted {
                render_at: 3,
                migrate: false
            }
        );
    }
}
