//! `aiki config`: the store's runtime configuration, shown key by key (the value in force, the
//! default, the accepted range), or one key set.

use std::io::Write;

use aiki::{ConfigKey, RuntimeConfig};
use serde_json::json;

use crate::Failure;
use crate::args::{Cli, ConfigArgs, ConfigCommand, Format};
use crate::output::{Table, json};
use crate::runs::client;

pub(crate) async fn config(
    cli: &Cli,
    args: &ConfigArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let client = client(cli).await?;
    let config = match &args.command {
        None | Some(ConfigCommand::Show) => client.runtime_config().await?,
        Some(ConfigCommand::Set {
            key,
            value,
            force,
            allow_short_retention,
        }) => {
            if *allow_short_retention {
                if *key != ConfigKey::RunRetention {
                    return Err(Failure::usage(format!(
                        "`--allow-short-retention` sets `{}`, not `{key}`",
                        ConfigKey::RunRetention
                    )));
                }
                client.set_short_retention(*value).await?
            } else if *force {
                client.force_config(*key, *value).await?
            } else {
                client.set_config(*key, *value).await?
            }
        }
    };
    match format {
        Format::Table => table(&config, out)?,
        Format::Jsonl => {
            for &key in ConfigKey::ALL {
                json(out, format, &entry(&config, key))?;
            }
        }
        _ => json(out, format, &json!(config))?,
    }
    Ok(0)
}

/// One key as a JSON line (`safe_min`: the least value set without asking explicitly, for a
/// key whose range goes lower).
fn entry(config: &RuntimeConfig, key: ConfigKey) -> serde_json::Value {
    let (min, max) = key.range();
    json!({
        "key": key.as_str(),
        "value": config.get(key),
        "default": key.default_value(),
        "min": min,
        "max": max,
        "safe_min": key.safe_min(),
    })
}

/// The values a key takes: `1000..=86400000`, and for the run retention the part asked for
/// explicitly.
fn range(key: ConfigKey) -> String {
    let (min, max) = key.range();
    match key.safe_min() {
        Some(safe) => format!("{safe}..={max} (from {min} with --allow-short-retention)"),
        None => format!("{min}..={max}"),
    }
}

fn table(config: &RuntimeConfig, out: &mut impl Write) -> Result<(), Failure> {
    let mut table = Table::new(&["key", "value", "default", "range"]);
    for &key in ConfigKey::ALL {
        let value = config.get(key);
        let default = key.default_value();
        table.row(vec![
            key.as_str().to_owned(),
            if value == default {
                value.to_string()
            } else {
                format!("{value} (changed)")
            },
            default.to_string(),
            range(key),
        ]);
    }
    table.print(out)
}
