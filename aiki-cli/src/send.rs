//! `aiki runs start` and `aiki runs send`: runs and events from JSON, checked against the
//! catalog the workers publish, with the typed API's errors.

use std::io::Write;

use aiki::{Client, Namespace};
use serde_json::json;

use crate::Failure;
use crate::args::{Cli, Format, SendArgs, StartArgs, WorkflowArg};
use crate::output::{json, run_json};

pub(crate) async fn start(
    cli: &Cli,
    client: &Client,
    args: &StartArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let namespace = resolve(client, &args.workflow).await?;
    let mut start = client
        .start_json(namespace, args.input.clone())
        .pool(args.pool.clone());
    if let Some(reference_id) = &args.reference_id {
        start = start.reference_id(reference_id.clone());
    }
    let run = start.await?.record().await?;
    match format {
        Format::Table => writeln!(out, "{} is {} ({})", run.id, run.status, run.namespace)?,
        _ => json(out, format, &run_json(&run, cli.no_payloads))?,
    }
    Ok(())
}

pub(crate) async fn send(
    client: &Client,
    args: &SendArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let delivered = client
        .any_run(args.id)
        .send_json(&args.event, args.payload.clone(), args.reference_id.clone())
        .await?;
    match format {
        Format::Table if delivered => {
            writeln!(out, "event `{}` sent to {}", args.event, args.id)?;
        }
        Format::Table => writeln!(
            out,
            "event `{}` with reference id `{}` was already sent to {}; nothing changed",
            args.event,
            args.reference_id.as_deref().unwrap_or_default(),
            args.id
        )?,
        _ => json(
            out,
            format,
            &json!({"run_id": args.id, "event": args.event, "delivered": delivered}),
        )?,
    }
    Ok(())
}

/// The namespace a `NAME@VERSION` names, or the one version of `NAME` the catalog holds.
async fn resolve(client: &Client, workflow: &WorkflowArg) -> Result<Namespace, Failure> {
    if let Some(version) = &workflow.version {
        return Ok(Namespace::new(&workflow.name, version));
    }
    let catalog = client.catalog().await?;
    let versions: Vec<&Namespace> = catalog
        .iter()
        .map(|entry| &entry.namespace)
        .filter(|namespace| namespace.workflow == workflow.name)
        .collect();
    match versions.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(Failure::error(format!(
            "workflow `{}` is not in the catalog: no worker registering it has started against \
             this store (see `aiki workflows`)",
            workflow.name
        ))),
        several => Err(Failure::error(format!(
            "workflow `{}` has {} versions in the catalog ({}); name one as NAME@VERSION",
            workflow.name,
            several.len(),
            several
                .iter()
                .map(|namespace| namespace.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}
