//! `aiki keys`: the API keys aiki servers check requests against, on the store directly.

use std::io::Write;

use aiki::MigrationMode;
use aiki::store::ApiKeyRecord;
use serde_json::{Value, json};

use crate::Failure;
use crate::args::{Cli, Format, KeysCommand};
use crate::output::{Table, json, relative};

pub(crate) async fn keys(
    cli: &Cli,
    command: &KeysCommand,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let url = cli.database_url("aiki keys", "")?;
    let store = aiki::store::connect_with_mode(url, MigrationMode::Check).await?;
    let now = aiki::Clock::now(&aiki::SystemClock);
    match command {
        KeysCommand::Create { name, scopes } => {
            let key = aiki_server::keys::generate(name, scopes.clone(), now);
            store.create_key(key.record.clone()).await?;
            match format {
                Format::Table => {
                    let record = &key.record;
                    writeln!(
                        out,
                        "created key {} ({}), scopes {}\n\n    {}\n\nThis is the only time \
                         the key is shown: the store keeps its hash.",
                        record.id,
                        record.name,
                        record.scope_list(),
                        key.token
                    )?;
                }
                _ => {
                    let mut value = record_json(&key.record);
                    value["key"] = json!(key.token);
                    json(out, format, &value)?;
                }
            }
        }
        KeysCommand::List => {
            let keys = store.keys().await?;
            match format {
                Format::Table => {
                    let mut table = Table::new(&["id", "name", "scopes", "created", "revoked"]);
                    for key in &keys {
                        table.row(vec![
                            key.id.clone(),
                            key.name.clone(),
                            key.scope_list(),
                            relative(key.created_at),
                            key.revoked_at.map(relative).unwrap_or_default(),
                        ]);
                    }
                    table.print(out)?;
                }
                Format::Jsonl => {
                    for key in &keys {
                        json(out, format, &record_json(key))?;
                    }
                }
                _ => json(
                    out,
                    format,
                    &json!(keys.iter().map(record_json).collect::<Vec<_>>()),
                )?,
            }
        }
        KeysCommand::Revoke { id } => {
            let key = store.revoke_key(id, now).await?;
            match format {
                Format::Table => writeln!(out, "revoked key {} ({})", key.id, key.name)?,
                _ => json(out, format, &record_json(&key))?,
            }
        }
    }
    Ok(0)
}

/// A key as JSON, without its hash.
fn record_json(key: &ApiKeyRecord) -> Value {
    json!({
        "id": key.id,
        "name": key.name,
        "scopes": key.scopes,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    })
}
