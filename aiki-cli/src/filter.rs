//! The filters of `runs list` and the bulk actions, checked against what the store knows: a
//! workflow or an error kind it has never heard of is refused, naming those it knows, instead
//! of listing nothing.

use std::collections::BTreeSet;

use aiki::Client;
use aiki_store::{RunFilter, TimeRange};

use crate::Failure;
use crate::args::FilterArgs;

/// The error kinds the runtime records: those of `aiki::WorkflowError::kind`, and the worker's
/// own (`corrupt_history`: a history that cannot be read).
const RUNTIME_ERROR_KINDS: &[&str] = aiki::WorkflowError::KINDS;

/// How many runs are read, newest first, to name the error kinds a store holds when one asked
/// for is unknown.
const KINDS_SAMPLE: u32 = 1000;

/// The store's filter for the filter flags, once the workflow, version and error kind they
/// name are known to the store.
pub(crate) async fn filter(client: &Client, args: &FilterArgs) -> Result<RunFilter, Failure> {
    check_workflow(client, args).await?;
    if let Some(kind) = &args.error_kind {
        check_error_kind(client, kind).await?;
    }
    let mut filter = RunFilter::default();
    filter.workflow = args.workflow.clone();
    filter.version = args.version.clone();
    filter.statuses = args.status.clone();
    filter.reference_id = args.reference_id.clone();
    filter.parent = args.parent;
    filter.pool = args.pool.clone();
    filter.error_kind = args.error_kind.clone();
    filter.failed_task = args.failed_task.clone();
    filter.error_contains = args.error_contains.clone();
    if let Some(name) = &args.schedule {
        check_schedule(client, name).await?;
        filter.schedule = Some(name.clone());
    }
    if let Some(since) = args.since {
        let now = aiki::Clock::now(&aiki::SystemClock);
        filter.created = TimeRange {
            from: Some(now.saturating_sub(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))),
            until: None,
        };
    }
    Ok(filter)
}

/// `--workflow` names a workflow with runs or a catalog entry, and `--version` one of its
/// versions (of any workflow, without `--workflow`).
async fn check_workflow(client: &Client, args: &FilterArgs) -> Result<(), Failure> {
    if args.workflow.is_none() && args.version.is_none() {
        return Ok(());
    }
    let mut known = BTreeSet::new();
    for counts in client.store().run_counts().await? {
        known.insert(counts.namespace);
    }
    for entry in client.catalog().await? {
        known.insert(entry.namespace);
    }
    let named: Vec<&aiki::Namespace> = known
        .iter()
        .filter(|namespace| {
            args.workflow
                .as_ref()
                .is_none_or(|w| &namespace.workflow == w)
        })
        .collect();
    if let Some(workflow) = &args.workflow
        && named.is_empty()
    {
        let names: BTreeSet<&str> = known.iter().map(|n| n.workflow.as_str()).collect();
        return Err(Failure::usage(format!(
            "no workflow `{workflow}` has runs or a catalog entry in this store; known \
             workflows: {}",
            list(names)
        )));
    }
    if let Some(version) = &args.version
        && !named.iter().any(|namespace| &namespace.version == version)
    {
        let versions: BTreeSet<&str> = named.iter().map(|n| n.version.as_str()).collect();
        let missing = match &args.workflow {
            Some(workflow) => format!("workflow `{workflow}` has no version `{version}`"),
            None => format!("no workflow has a version `{version}`"),
        };
        return Err(Failure::usage(format!(
            "{missing} with runs or a catalog entry; known versions: {}",
            list(versions)
        )));
    }
    Ok(())
}

/// A usage error for a schedule the store does not hold (its runs are found through its log,
/// which goes with it).
async fn check_schedule(client: &Client, name: &str) -> Result<(), Failure> {
    match client.store().schedule(name).await {
        Ok(_) => Ok(()),
        Err(aiki::StoreError::NotFound { .. }) => Err(Failure::usage(format!(
            "no schedule is named `{name}`; `aiki schedules list` shows them"
        ))),
        Err(error) => Err(error.into()),
    }
}

/// `--error-kind` names a kind the runtime records, or one present in the store.
async fn check_error_kind(client: &Client, kind: &str) -> Result<(), Failure> {
    if RUNTIME_ERROR_KINDS.contains(&kind) {
        return Ok(());
    }
    let present = client
        .list_runs(RunFilter::default().error_kind(kind), None, 1)
        .await?;
    if !present.runs.is_empty() {
        return Ok(());
    }
    let mut kinds: BTreeSet<String> = RUNTIME_ERROR_KINDS.iter().map(|k| k.to_string()).collect();
    let recent = client
        .list_runs(RunFilter::default(), None, KINDS_SAMPLE)
        .await?;
    kinds.extend(
        recent
            .runs
            .into_iter()
            .filter_map(|run| run.error.map(|e| e.kind)),
    );
    Err(Failure::usage(format!(
        "no run has an error of kind `{kind}`, and the runtime records no such kind; known \
         kinds: {}",
        list(kinds.iter().map(String::as_str))
    )))
}

/// Names for a message: `a, b, c`, or `none`.
fn list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.into_iter().collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}
