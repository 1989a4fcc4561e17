//! What a run is doing, in words: its wait set, or its status.

use aiki::{RunRecord, RunStatus, WaitSpec};
use aiki_store::{History, WorkerRecord};

use crate::output::{relative, span};

/// One line on what the run is doing or waiting on: "waiting on event `payment_received`,
/// times out in 2 h 59 min".
pub(crate) fn doing(history: &History, workers: &[WorkerRecord]) -> String {
    let run = &history.run;
    match (&run.wait, run.status) {
        (Some(wait), status) if status.is_suspended() => waiting(run, wait, history),
        (None, status) if status.is_suspended() => {
            // Suspended by a release that stored no wait set: say what the status says.
            let due = run
                .due_at
                .map(|at| format!(", due {}", relative(at)))
                .unwrap_or_default();
            format!("{status} (no wait set recorded){due}")
        }
        (_, RunStatus::Scheduled) => format!(
            "scheduled, due {}",
            run.due_at.map(relative).unwrap_or_default()
        ),
        (_, RunStatus::Queued) => {
            let queued = span(
                aiki::Clock::now(&aiki::SystemClock) - run.queued_at.unwrap_or(run.created_at),
            );
            let serving = workers
                .iter()
                .filter(|worker| worker.serves(&run.namespace, &run.pool))
                .count();
            match serving {
                0 => format!(
                    "queued for {queued}: no live worker serves {} in pool `{}` (none seen \
                     in the last {} s); start one that registers it",
                    run.namespace,
                    run.pool,
                    crate::workers::LIVE_WITHIN.as_secs()
                ),
                n => format!(
                    "queued for {queued}, for {n} live worker{} serving {} in pool `{}`",
                    if n == 1 { "" } else { "s" },
                    run.namespace,
                    run.pool
                ),
            }
        }
        (_, RunStatus::Running) => format!(
            "running on {}",
            run.owner.as_deref().unwrap_or("an unknown worker")
        ),
        (_, other) => other.to_string(),
    }
}

/// The wait set in words, one clause per kind of wait, joined by "; or".
fn waiting(run: &RunRecord, wait: &WaitSpec, history: &History) -> String {
    let mut clauses = Vec::new();
    for sleep in &wait.sleeps {
        clauses.push(format!(
            "sleeping (`{}`), wakes {}",
            sleep.name,
            relative(sleep.wake_at)
        ));
    }
    for event in &wait.events {
        let timeout = event
            .timeout_at
            .map(|at| format!(", times out {}", relative(at)))
            .unwrap_or_default();
        clauses.push(format!("waiting on event `{}`{timeout}", event.name));
    }
    if !wait.children.is_empty() {
        let status = |id| {
            history
                .children
                .iter()
                .find(|child| child.id == id)
                .map_or("unknown".to_owned(), |child| child.status.to_string())
        };
        let open: Vec<String> = wait
            .children
            .iter()
            .map(|child| {
                let timeout = child
                    .timeout_at
                    .map(|at| format!(", times out {}", relative(at)))
                    .unwrap_or_default();
                format!("{} ({}{timeout})", child.id, status(child.id))
            })
            .collect();
        let shown = open.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        let more = match open.len() {
            n if n > 5 => format!(" and {} more", n - 5),
            _ => String::new(),
        };
        clauses.push(if wait.all_children {
            format!(
                "waiting on all of {} child runs to end (or the first to fail): {shown}{more}",
                open.len()
            )
        } else if open.len() == 1 {
            format!("waiting on child run {shown} to end")
        } else {
            format!("waiting on any of the child runs {shown}{more} to end")
        });
    }
    for retry in &wait.retries {
        clauses.push(format!(
            "retrying task `{}` (attempt {}) {}",
            retry.address,
            retry.attempt,
            relative(retry.at)
        ));
    }
    if clauses.is_empty() {
        return format!("{} with nothing to wait on", run.status);
    }
    clauses.join("; or ")
}
