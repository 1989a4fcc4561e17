//! What a run is doing, in words: its wait set, who holds it, why it failed and the command
//! that retries it, or its status.

use aiki_store::{History, Millis, Queue, RunId, RunRecord, RunStatus, WaitSpec, WorkerRecord};

use super::words::{relative, span, timestamp};
use crate::handle::RetryPlan;
use crate::liveness::{ClaimView, Liveness};

/// What `doing` reads beside the run's history.
pub(super) struct Seen<'a> {
    /// The workers with a heartbeat lately, live or not.
    pub(super) workers: &'a [WorkerRecord],
    /// The failed run's retry plan, when it could be made.
    pub(super) plan: Option<&'a RetryPlan>,
    /// Now, by the clock heartbeats are timed by.
    pub(super) now: Millis,
}

impl Seen<'_> {
    /// The live workers that can run `run`.
    pub(super) fn serving<'w>(&'w self, run: &'w RunRecord) -> impl Iterator<Item = &'w str> {
        self.workers
            .iter()
            .filter(|worker| Liveness::of(worker, self.now).is_live())
            .filter(|worker| worker.serves(&run.namespace, &run.pool))
            .map(|worker| worker.id.as_str())
    }
}

/// One line on what the run is doing or waiting on: "waiting on event `payment_received`,
/// times out in 2 h 59 min".
pub(super) fn doing(history: &History, seen: &Seen<'_>) -> String {
    let run = &history.run;
    match (&run.wait, run.status) {
        (Some(wait), status) if status.is_suspended() => waiting(run, wait, history, seen.now),
        (None, status) if status.is_suspended() => {
            // Suspended by a release that stored no wait set: say what the status says.
            let due = run
                .due_at
                .map(|at| format!(", due {}", relative(at, seen.now)))
                .unwrap_or_default();
            format!("{status} (no wait set recorded){due}")
        }
        (_, RunStatus::Scheduled) => format!(
            "scheduled, due {}",
            run.due_at
                .map(|at| relative(at, seen.now))
                .unwrap_or_default()
        ),
        (_, RunStatus::Queued) => {
            let queued = span(seen.now - run.queued_at.unwrap_or(run.created_at));
            match seen.serving(run).count() {
                0 => format!(
                    "queued for {queued}: no live worker serves {} in pool `{}`; start one \
                     that registers it",
                    run.namespace, run.pool,
                ),
                n => format!(
                    "queued for {queued}, for {n} live worker{} serving {} in pool `{}`",
                    if n == 1 { "" } else { "s" },
                    run.namespace,
                    run.pool
                ),
            }
        }
        (_, RunStatus::Running) => running(run, seen),
        (_, RunStatus::Failed) => failed(run, seen.plan),
        (_, RunStatus::Completed) if run.continued().is_some() => format!(
            "continued as new: run {} carries on (its result is the last run's of the chain)",
            run.continued_as
                .map(|id| id.to_string())
                .unwrap_or_default()
        ),
        (_, other) => other.to_string(),
    }
}

/// Who holds a running run, whether that worker is alive, and a pause asked for.
fn running(run: &RunRecord, seen: &Seen<'_>) -> String {
    let mut line = match ClaimView::of(run, seen.workers, seen.now) {
        None => format!(
            "running on {}",
            run.owner.as_deref().unwrap_or("an unknown worker")
        ),
        Some(claim) => {
            let released = match claim.release_due {
                Some(due) if due > seen.now => {
                    format!("released at the latest {}", relative(due, seen.now))
                }
                Some(due) => format!(
                    "due for release since {} (at claim recovery's next sweep)",
                    span(seen.now - due)
                ),
                None => "released by claim recovery".to_owned(),
            };
            let release = format!(
                "; `aiki runs release {}` once its claim is confirmed stale",
                run.id
            );
            match claim.worker {
                Some(Liveness::Live) => format!("running on {}", claim.owner),
                Some(Liveness::Gone { since }) => format!(
                    "held by {}, gone since {}; {released}{release}",
                    claim.owner,
                    span(seen.now - since)
                ),
                Some(Liveness::Stopped { at }) => format!(
                    "held by {}, which stopped {}; {released}{release}",
                    claim.owner,
                    relative(at, seen.now)
                ),
                _ => format!(
                    "held by {}, whose worker has no heartbeat on record; {released}{release}",
                    claim.owner
                ),
            }
        }
    };
    if let Some(at) = run.pause_requested_at {
        line.push_str(&format!(
            "; pause requested by {} at {} ({})",
            run.pause_requested_by
                .as_deref()
                .unwrap_or("someone unnamed"),
            timestamp(at),
            relative(at, seen.now)
        ));
    }
    line
}

/// Why a run failed (the failing call, or the child whose failure it recorded) and the
/// command that retries it after a fix.
fn failed(run: &RunRecord, plan: Option<&RetryPlan>) -> String {
    let kind = run.error.as_ref().map_or("unknown", |e| e.kind.as_str());
    let call = plan
        .and_then(|plan| plan.rerun.first().or(plan.interrupted.first()))
        .or_else(|| run.error.as_ref().and_then(|error| error.call.as_ref()));
    let mut line = match (plan.and_then(|p| p.failed_child.as_ref()), call) {
        (Some(child), _) => format!(
            "failed ({kind}): its child run {} ended `{}`",
            child.run_id, child.status
        ),
        (None, Some(call)) => format!(
            "failed ({kind}) at call `{}` (#{})",
            call.address, call.index
        ),
        (None, None) => format!("failed ({kind})"),
    };
    match plan.map(|plan| retry_command(run.id, plan)) {
        Some(Ok(command)) => line.push_str(&format!("; after a fix, retry it: `{command}`")),
        Some(Err(instead)) => line.push_str(&format!("; {instead}")),
        None => line.push_str(&format!(
            "; after a fix, retry it: `aiki runs retry {}`",
            run.id
        )),
    }
    line
}

/// The `aiki runs retry` command that the plan needs: `--rerun-child` for a failed child's
/// recorded failure, `--rerun-interrupted` for an interrupted at-most-once task (here or down
/// the chain of failed children), `--even-if-observed` for a child its parent has acted on.
/// `Err`: what to do instead, when no retry revives it.
pub fn retry_command(id: RunId, plan: &RetryPlan) -> Result<String, String> {
    let mut flags = Vec::new();
    let mut interrupted = !plan.interrupted.is_empty();
    if let Some(child) = &plan.failed_child {
        if child.status == RunStatus::Cancelled {
            return Err(format!(
                "its child run {} was cancelled, which no retry revives: fork it (`aiki runs \
                 fork {id}`), or retry it with `--force` if its code now handles that",
                child.run_id
            ));
        }
        flags.push("--rerun-child");
        let mut below = child.plan.as_deref();
        while let Some(plan) = below {
            interrupted |= !plan.interrupted.is_empty();
            below = plan.failed_child.as_ref().and_then(|c| c.plan.as_deref());
        }
    }
    if interrupted {
        flags.push("--rerun-interrupted");
    }
    if plan.observed_by.is_some() {
        flags.push("--even-if-observed");
    }
    let mut command = format!("aiki runs retry {id}");
    for flag in flags {
        command.push(' ');
        command.push_str(flag);
    }
    Ok(command)
}

/// The name of a runtime timer or queue for people (a wait's timeout, a child wait's
/// records), or `None` for a name of the workflow's own.
pub fn runtime_name(name: &str) -> Option<String> {
    match Queue::parse(name) {
        Queue::Named(_) => None,
        Queue::EventTimeout(event) => Some(format!("event `{event}`")),
        Queue::ChildWait(address) => Some(format!("child `{address}`")),
        other => Some(other.to_string()),
    }
}

/// The wait set in words, one clause per kind of wait, joined by "; or".
fn waiting(run: &RunRecord, wait: &WaitSpec, history: &History, now: Millis) -> String {
    let mut clauses = Vec::new();
    for sleep in &wait.sleeps {
        clauses.push(match runtime_name(&sleep.name) {
            Some(wait) => format!(
                "the wait on {wait} times out {}",
                relative(sleep.wake_at, now)
            ),
            None => format!(
                "sleeping (`{}`), wakes {}",
                sleep.name,
                relative(sleep.wake_at, now)
            ),
        });
    }
    for event in &wait.events {
        let timeout = event
            .timeout_at
            .map(|at| format!(", times out {}", relative(at, now)))
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
                    .map(|at| format!(", times out {}", relative(at, now)))
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
            relative(retry.at, now)
        ));
    }
    if clauses.is_empty() {
        return format!("{} with nothing to wait on", run.status);
    }
    clauses.join("; or ")
}

#[cfg(test)]
mod tests {
    use super::runtime_name;

    #[test]
    fn runtime_timers_are_named_for_people() {
        assert_eq!(runtime_name("cool-down"), None);
        assert_eq!(
            runtime_name("\u{1}event:approved").as_deref(),
            Some("event `approved`")
        );
        assert_eq!(
            runtime_name("\u{1}child:ship:1:ab").as_deref(),
            Some("child `ship:1:ab`")
        );
    }
}
