//! `aiki endpoints`: the push endpoints an aiki server's dispatcher delivers runs to, on the
//! store directly. A secret is printed when it is made and never again.

use std::io::Write;
use std::time::Duration;

use aiki::MigrationMode;
use aiki::store::{DEFAULT_BUDGET_MS, EndpointRecord, EndpointSecret, Millis, StoreError};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::{Cli, EndpointsCommand, Format};
use crate::output::{Table, json, relative};

pub(crate) async fn endpoints(
    cli: &Cli,
    command: &EndpointsCommand,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let url = cli.database_url("aiki endpoints", "")?;
    let store = aiki::store::connect_with_mode(url, MigrationMode::Check).await?;
    let now = aiki::Clock::now(&aiki::SystemClock);
    let find = |endpoints: Vec<EndpointRecord>, workflow: &aiki::store::Namespace| {
        endpoints
            .into_iter()
            .find(|endpoint| &endpoint.namespace == workflow)
    };
    match command {
        EndpointsCommand::Set {
            workflow,
            endpoint: url,
            budget,
        } => {
            let budget_ms = budget.map(millis);
            let (written, secret) = match find(store.endpoints().await?, workflow) {
                Some(mut endpoint) => {
                    let expected = endpoint.revision;
                    endpoint.url = url.clone();
                    endpoint.budget_ms = budget_ms.unwrap_or(endpoint.budget_ms);
                    endpoint.updated_at = now;
                    (store.put_endpoint(endpoint, Some(expected)).await?, None)
                }
                None => {
                    let secret = EndpointSecret::generate(now);
                    let endpoint = EndpointRecord::new(
                        workflow.clone(),
                        url.clone(),
                        budget_ms.unwrap_or(DEFAULT_BUDGET_MS),
                        secret.clone(),
                        now,
                    );
                    (store.put_endpoint(endpoint, None).await?, Some(secret))
                }
            };
            match format {
                Format::Table => {
                    writeln!(
                        out,
                        "runs of {} are pushed to {} (budget {})",
                        written.namespace,
                        written.url,
                        seconds(written.budget_ms)
                    )?;
                    if let Some(secret) = &secret {
                        shown_once(out, secret)?;
                    }
                }
                _ => {
                    let mut value = record_json(&written, now);
                    if let Some(secret) = &secret {
                        value["secret"] = json!(secret.secret);
                    }
                    json(out, format, &value)?;
                }
            }
        }
        EndpointsCommand::List => {
            let endpoints = store.endpoints().await?;
            match format {
                Format::Table => {
                    let mut table =
                        Table::new(&["workflow", "url", "budget", "secrets", "updated"]);
                    for endpoint in &endpoints {
                        let secrets: Vec<String> = endpoint
                            .secrets
                            .iter()
                            .filter(|secret| secret.active_at(now))
                            .map(|secret| match secret.expires_at {
                                Some(at) => format!("{} (expires {})", secret.id, relative(at)),
                                None => secret.id.clone(),
                            })
                            .collect();
                        table.row(vec![
                            endpoint.namespace.to_string(),
                            endpoint.url.clone(),
                            seconds(endpoint.budget_ms),
                            secrets.join(", "),
                            relative(endpoint.updated_at),
                        ]);
                    }
                    table.print(out)?;
                }
                Format::Jsonl => {
                    for endpoint in &endpoints {
                        json(out, format, &record_json(endpoint, now))?;
                    }
                }
                _ => json(
                    out,
                    format,
                    &json!(
                        endpoints
                            .iter()
                            .map(|endpoint| record_json(endpoint, now))
                            .collect::<Vec<_>>()
                    ),
                )?,
            }
        }
        EndpointsCommand::Rotate { workflow, overlap } => {
            let Some(mut endpoint) = find(store.endpoints().await?, workflow) else {
                return Err(not_set(workflow));
            };
            let expected = endpoint.revision;
            let secret = EndpointSecret::generate(now);
            endpoint
                .rotate(secret.clone(), millis(*overlap), now)
                .map_err(Failure::error)?;
            let written = store.put_endpoint(endpoint, Some(expected)).await?;
            match format {
                Format::Table => {
                    writeln!(
                        out,
                        "rotated the secret of {}'s endpoint; the previous one signs until {}",
                        written.namespace,
                        relative(now.saturating_add(millis(*overlap)))
                    )?;
                    shown_once(out, &secret)?;
                }
                _ => {
                    let mut value = record_json(&written, now);
                    value["secret"] = json!(secret.secret);
                    json(out, format, &value)?;
                }
            }
        }
        EndpointsCommand::Remove { workflow } => {
            let removed = match store.remove_endpoint(workflow).await {
                Err(StoreError::NotFound { .. }) => return Err(not_set(workflow)),
                other => other?,
            };
            match format {
                Format::Table => writeln!(
                    out,
                    "removed the endpoint of {} ({}); its runs are no longer pushed",
                    removed.namespace, removed.url
                )?,
                _ => json(out, format, &record_json(&removed, now))?,
            }
        }
    }
    Ok(0)
}

fn not_set(workflow: &aiki::store::Namespace) -> Failure {
    Failure::error(format!(
        "{workflow} has no push endpoint; set one with `aiki endpoints set {workflow} URL`"
    ))
}

fn shown_once(out: &mut impl Write, secret: &EndpointSecret) -> std::io::Result<()> {
    writeln!(
        out,
        "secret {}:\n\n    {}\n\nThis is the only time the secret is shown: give it to the endpoint.",
        secret.id, secret.secret
    )
}

fn millis(duration: Duration) -> Millis {
    Millis::try_from(duration.as_millis()).unwrap_or(Millis::MAX)
}

fn seconds(ms: Millis) -> String {
    format!("{}s", ms / 1_000)
}

/// An endpoint as JSON, its secrets by id and times only.
fn record_json(endpoint: &EndpointRecord, now: Millis) -> Value {
    json!({
        "workflow": endpoint.namespace.workflow,
        "version": endpoint.namespace.version,
        "url": endpoint.url,
        "budget_ms": endpoint.budget_ms,
        "secrets": endpoint.secrets.iter().filter(|secret| secret.active_at(now)).map(|secret| json!({
            "id": secret.id,
            "created_at": secret.created_at,
            "expires_at": secret.expires_at,
        })).collect::<Vec<_>>(),
        "revision": endpoint.revision,
        "created_at": endpoint.created_at,
        "updated_at": endpoint.updated_at,
    })
}
