//! `aiki migrate`: brings the store's schema to this release's, and says what it found and
//! what it applied.

use std::io::Write;

use aiki_store::MigrationReport;
use serde_json::json;

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::json;

/// What a migration came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The database held no Aiki schema; it has this release's now.
    Created,
    /// Migrations were applied.
    Migrated,
    /// Nothing to do: the schema was this release's.
    UpToDate,
    /// Nothing to do: a newer release migrated the schema, and it admits this release.
    Newer,
    /// The store has no schema (`memory:`).
    NoSchema,
}

impl Outcome {
    fn of(url: &str, report: &MigrationReport) -> Outcome {
        if url.starts_with("memory:") {
            Outcome::NoSchema
        } else if !report.applied.is_empty() && report.found.is_none() {
            Outcome::Created
        } else if !report.applied.is_empty() {
            Outcome::Migrated
        } else if report.found.is_some_and(|found| found > report.release) {
            Outcome::Newer
        } else {
            Outcome::UpToDate
        }
    }

    fn name(self) -> &'static str {
        match self {
            Outcome::Created => "created",
            Outcome::Migrated => "migrated",
            Outcome::UpToDate => "up_to_date",
            Outcome::Newer => "newer",
            Outcome::NoSchema => "no_schema",
        }
    }
}

pub(crate) async fn migrate(
    cli: &Cli,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let url = cli.url()?;
    let report = aiki_store::migrate(url).await?;
    let outcome = Outcome::of(url, &report);
    if format != Format::Table {
        let applied: Vec<_> = report
            .applied
            .iter()
            .map(|m| json!({"version": m.version, "description": m.description}))
            .collect();
        let document = json!({
            "outcome": outcome.name(),
            "found": report.found,
            "applied": applied,
            "version": report.version,
            "release": report.release,
        });
        json(out, format, &document)?;
        return Ok(0);
    }
    // Never the URL: it may hold a password.
    let release = report.release;
    match outcome {
        Outcome::NoSchema => writeln!(out, "the memory store has no schema: nothing to migrate")?,
        Outcome::UpToDate => writeln!(
            out,
            "the store's schema was already up to date (version {}): nothing applied",
            report.version
        )?,
        Outcome::Newer => writeln!(
            out,
            "the store's schema is at version {}, newer than this release's ({release}), and \
             admits this release: nothing applied",
            report.found.unwrap_or_default()
        )?,
        Outcome::Created | Outcome::Migrated => {
            match report.found {
                None => writeln!(out, "found no Aiki schema: created it")?,
                Some(found) => writeln!(out, "found the schema at version {found}")?,
            }
            writeln!(out, "applied {} migration(s):", report.applied.len())?;
            for migration in &report.applied {
                writeln!(out, "  {:>4}  {}", migration.version, migration.description)?;
            }
            writeln!(
                out,
                "the store's schema is up to date: version {}",
                report.version
            )?;
        }
    }
    Ok(0)
}
