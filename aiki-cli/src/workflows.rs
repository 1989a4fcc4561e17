//! `aiki workflows` and `aiki migrate`.

use std::collections::BTreeMap;
use std::io::Write;

use aiki::MigrationMode;
use serde_json::{Value, json};

use crate::Failure;
use crate::args::{Cli, Format};
use crate::output::{Table, json, relative};
use crate::runs::client;

pub(crate) async fn list(cli: &Cli, format: Format, out: &mut impl Write) -> Result<u8, Failure> {
    let client = client(cli).await?;
    let counts = client.store().run_counts().await?;
    if format == Format::Table {
        let mut table = Table::new(&["workflow", "version", "runs by status", "oldest queued"]);
        for version in &counts {
            let by_status: Vec<String> = version
                .by_status
                .iter()
                .map(|(status, count)| format!("{status} {count}"))
                .collect();
            table.row(vec![
                version.namespace.workflow.clone(),
                version.namespace.version.clone(),
                by_status.join(", "),
                version.oldest_queued_at.map(relative).unwrap_or_default(),
            ]);
        }
        table.print(out)?;
        return Ok(0);
    }
    let documents: Vec<Value> = counts
        .iter()
        .map(|version| {
            let by_status: BTreeMap<String, u64> = version
                .by_status
                .iter()
                .map(|(status, count)| (status.to_string(), *count))
                .collect();
            json!({
                "workflow": version.namespace.workflow,
                "version": version.namespace.version,
                "by_status": by_status,
                "oldest_queued_at": version.oldest_queued_at,
            })
        })
        .collect();
    if format == Format::Jsonl {
        for document in &documents {
            json(out, format, document)?;
        }
        return Ok(0);
    }
    json(out, format, &json!(documents))?;
    Ok(0)
}

pub(crate) async fn migrate(cli: &Cli, out: &mut impl Write) -> Result<u8, Failure> {
    let store = aiki::connect_with_mode(cli.url()?, MigrationMode::Apply).await?;
    drop(store);
    // Not the URL: it may hold a password.
    writeln!(out, "the store's schema is up to date")?;
    Ok(0)
}
