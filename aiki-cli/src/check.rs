//! `aiki check`: the pre-deploy impact report, from a binary with the workflows compiled in.

use std::io::Write;

use aiki::impact::{CheckOptions, Gate, Report, RunImpact};
use aiki::{Clock, Worker};
use aiki_store::RunFilter;
use serde_json::json;

use crate::args::{CheckArgs, Cli, Deny, Format};
use crate::output::{Table, json};
use crate::{App, EXIT_UNSAFE, Failure};

/// Runs the check; exit 0 when the gate passes, [`EXIT_UNSAFE`] when it does not.
pub(crate) async fn check(
    app: &App,
    cli: &Cli,
    args: &CheckArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let worker = app.worker(cli, "check").await?;
    let mut filter = RunFilter::default();
    filter.workflow = args.workflow.clone();
    filter.version = args.version.clone();
    filter.pool = args.pool.clone();
    let mut options = CheckOptions::default().filter(filter);
    if let Some(within) = args.failed_within {
        let since = aiki::SystemClock.now() - within.as_millis() as i64;
        options = options.failed_since(since);
    }
    if let Some(max) = args.max {
        options = options.max_runs(max as usize);
    }
    let report = aiki::impact::check(&worker, &options).await?;
    let gate = gate(&args.deny);
    let passed = report.passes(&gate);
    match format {
        Format::Table => table(&worker, &report, &gate, passed, out)?,
        _ => {
            let document = json!({
                "passed": passed,
                "deny": args.deny.iter().map(|d| d.name()).collect::<Vec<_>>(),
                "checked_at": report.checked_at,
                "summary": report.summary,
                "failing": report.failing(&gate).map(|run| run.run_id).collect::<Vec<_>>(),
                "runs": report.runs,
                "other_services": report.other_services,
            });
            json(out, format, &document)?;
        }
    }
    Ok(if passed { 0 } else { EXIT_UNSAFE })
}

fn gate(deny: &[Deny]) -> Gate {
    deny.iter().fold(Gate::default(), |gate, deny| match deny {
        Deny::NewWork => gate.deny_new_work(),
        Deny::SleepChanges => gate.deny_sleep_changes(),
        Deny::Blind => gate.deny_blind(),
        Deny::OtherServices => gate.deny_other_services(),
    })
}

/// The summary per version, then every run with something to say, then the verdict.
fn table(
    worker: &Worker,
    report: &Report,
    gate: &Gate,
    passed: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let mut versions: Vec<String> = worker.registered().map(ToString::to_string).collect();
    versions.sort();
    writeln!(out, "checked against this build's {}", versions.join(", "))?;
    let mut summary = Table::new(&["workflow", "runs", "by verdict", "sleep changes"]);
    for line in &report.summary {
        let verdicts: Vec<String> = line
            .by_verdict
            .iter()
            .map(|(verdict, n)| format!("{verdict} {n}"))
            .collect();
        summary.row(vec![
            line.namespace.to_string(),
            line.runs.to_string(),
            verdicts.join(", "),
            line.sleep_changes.to_string(),
        ]);
    }
    summary.print(out)?;
    let noteworthy: Vec<&RunImpact> = report
        .runs
        .iter()
        .filter(|run| run.fails(gate) || !run.new_work.is_empty() || !run.sleeps.is_empty())
        .collect();
    if !noteworthy.is_empty() {
        writeln!(out)?;
        let mut runs = Table::new(&["run", "workflow", "status", "gate", "what it would do"]);
        for run in noteworthy {
            runs.row(vec![
                run.run_id.to_string(),
                run.namespace.to_string(),
                run.status.to_string(),
                if run.fails(gate) { "FAILS" } else { "ok" }.to_owned(),
                describe(run),
            ]);
        }
        runs.print(out)?;
    }
    if !report.other_services.is_empty() {
        writeln!(out)?;
        let mut names: Vec<String> = report
            .other_services
            .iter()
            .map(|run| run.namespace.to_string())
            .collect();
        names.sort();
        names.dedup();
        writeln!(
            out,
            "{} run(s) of workflows this build does not register, not checked: {}",
            report.other_services.len(),
            names.join(", ")
        )?;
    }
    writeln!(out)?;
    let failing = report.failing(gate).count();
    if passed {
        writeln!(out, "passed: no run would break")?;
    } else {
        writeln!(
            out,
            "FAILED: {failing} run(s) fail the gate{}",
            if gate.other_services && !report.other_services.is_empty() {
                ", and runs of other workflows are present"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

/// A run's verdict, with its new work and changed sleeps, in one cell.
fn describe(run: &RunImpact) -> String {
    let mut parts = vec![run.verdict.to_string()];
    for work in &run.new_work {
        let mut part = format!("then {} `{}`", work.kind, work.name);
        if !work.after.is_empty() {
            part.push_str(&format!(" after {}", work.after.join(", ")));
        }
        if let Some(at) = &work.call_site {
            part.push_str(&format!(" at {at}"));
        }
        parts.push(part);
    }
    for sleep in &run.sleeps {
        let minutes = sleep.extended_by_ms as f64 / 60_000.0;
        parts.push(format!(
            "sleep `{}` {:+} min{}",
            sleep.name,
            minutes,
            if sleep.already_satisfied {
                ", already over"
            } else {
                ""
            }
        ));
    }
    if let Some(blind) = &run.blind {
        parts.push(format!("cannot see past {blind}"));
    }
    parts.join("; ")
}
