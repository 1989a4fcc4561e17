//! Forking an ended run onto another workflow version, after checking that what the fork
//! carries replays on that version's code.

use aiki_store::{History, Namespace, RunRecord, RunStatus};

use super::replay::replay;
use super::report::{RunImpact, Verdict};
use crate::error::ClientError;
use crate::handle::{AnyRun, ForkOptions};
use crate::registry::Registry;

/// Forks the ended run `run` onto `version` of its workflow, which `registry` must register:
/// [`AnyRun::fork`] with the fork pinned to the new version. The carried entries (the same ones
/// `fork` carries, minus what `options` drop) are first replayed against the new version's code
/// by the impact check, writing nothing; a fork that would diverge from them, find a recorded
/// value its types no longer accept, or break for a reason of its own is refused with
/// [`ClientError::ForkRefused`], naming the diverging addresses, and nothing is written.
/// Forking twice with the same options and version returns the same fork.
///
/// ```no_run
/// # async fn demo(client: aiki::Client, registry: aiki::Registry, id: aiki::RunId) -> Result<(), aiki::ClientError> {
/// let fork = aiki::impact::fork_onto(&registry, &client.any_run(id), "2", Default::default()).await?;
/// println!("forked onto {} as {}", fork.namespace, fork.id);
/// # Ok(()) }
/// ```
pub async fn fork_onto(
    registry: &Registry,
    run: &AnyRun,
    version: &str,
    options: ForkOptions,
) -> Result<RunRecord, ClientError> {
    let (source, fork) = run.prepare_fork(&options, Some(version)).await?;
    let namespace = fork.run.namespace.clone();
    let Some(workflow) = registry.workflow(&namespace) else {
        return Err(ClientError::NotRegistered {
            namespace: namespace.to_string(),
        });
    };
    let history = as_fork(&source, &fork);
    let mut impact = RunImpact::new(history.run.id, namespace.clone(), RunStatus::Queued);
    let client = run.client();
    let now = client.clock.now();
    replay(registry, client, &**workflow, history, &mut impact, now).await?;
    if impact.verdict.is_unsafe() {
        return Err(refused(source.run.id, &namespace, &impact.verdict));
    }
    run.create_fork(fork).await
}

/// The history the fork starts with, as a worker of the new version would load it.
fn as_fork(source: &History, fork: &aiki_store::NewFork) -> History {
    let mut run = source.run.clone();
    run.id = fork.run.id;
    run.namespace = fork.run.namespace.clone();
    run.status = RunStatus::Queued;
    run.revision = 0;
    run.attempts = 1;
    run.error = None;
    run.output = None;
    run.output_fingerprint = None;
    let mut history = source.clone();
    history.run = run;
    history.entries = fork.entries.clone();
    history.sleeps = fork.sleeps.clone();
    history.events = fork.events.clone();
    history
}

fn refused(run_id: aiki_store::RunId, namespace: &Namespace, verdict: &Verdict) -> ClientError {
    let diverging = match verdict {
        Verdict::Diverges { new_address, .. } => vec![new_address.clone()],
        Verdict::Mismatch {
            address: Some(address),
            ..
        } => vec![address.clone()],
        _ => Vec::new(),
    };
    ClientError::ForkRefused {
        run_id,
        namespace: namespace.to_string(),
        problem: verdict.to_string(),
        diverging,
    }
}
