//! `aiki check`: the pre-deploy impact report, from a binary with the workflows compiled in.
//! The table says each thing once: runs that would do the same at the same call site are one
//! line with their count (the JSON lists every run).

use std::io::Write;

use std::collections::{BTreeMap, BTreeSet};

use aiki::impact::{CheckOptions, Gate, Report, RunImpact, Verdict};
use aiki::{Clock, Registry};
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
    let (registry, client) = app.replaying(cli, "check").await?;
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
    let report = aiki::impact::check(&registry, &client, &options).await?;
    let gate = gate(&args.deny);
    let passed = report.passes(&gate);
    match format {
        Format::Table => table(&registry, &report, &gate, passed, out)?,
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
    registry: &Registry,
    report: &Report,
    gate: &Gate,
    passed: bool,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let mut versions: Vec<String> = registry.namespaces().map(ToString::to_string).collect();
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
    let noteworthy = report
        .runs
        .iter()
        .filter(|run| run.fails(gate) || !run.new_work.is_empty() || !run.sleeps.is_empty());
    let groups = group(noteworthy, gate);
    if !groups.is_empty() {
        writeln!(out)?;
        let mut runs = Table::new(&[
            "runs",
            "workflow",
            "statuses",
            "gate",
            "what they would do",
            "e.g. run",
        ]);
        for group in &groups {
            runs.row(vec![
                group.runs.len().to_string(),
                group.namespace.to_string(),
                group
                    .statuses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                if group.fails { "FAILS" } else { "ok" }.to_owned(),
                group.what.clone(),
                match group.runs.len() {
                    1 => group.runs[0].to_string(),
                    n => format!("{} and {} more", group.runs[0], n - 1),
                },
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

/// Runs of one version with the same verdict at the same call site (and the same new work
/// and sleep changes): one line of the table, however many runs.
struct Group<'a> {
    namespace: &'a aiki::Namespace,
    fails: bool,
    what: String,
    statuses: BTreeSet<aiki::RunStatus>,
    runs: Vec<aiki::RunId>,
}

/// The runs grouped by version, gate and what they would do (in words that leave out what
/// differs from run to run: content addresses and recorded inputs), failing groups first,
/// then the largest.
fn group<'a>(runs: impl Iterator<Item = &'a RunImpact>, gate: &Gate) -> Vec<Group<'a>> {
    let mut groups: BTreeMap<(&aiki::Namespace, bool, String), Group<'a>> = BTreeMap::new();
    for run in runs {
        let fails = run.fails(gate);
        let what = describe(run);
        let group = groups
            .entry((&run.namespace, fails, what.clone()))
            .or_insert_with(|| Group {
                namespace: &run.namespace,
                fails,
                what,
                statuses: BTreeSet::new(),
                runs: Vec::new(),
            });
        group.statuses.insert(run.status);
        group.runs.push(run.run_id);
    }
    let mut groups: Vec<Group<'a>> = groups.into_values().collect();
    groups.sort_by(|a, b| b.fails.cmp(&a.fails).then(b.runs.len().cmp(&a.runs.len())));
    groups
}

/// A call's name without its content hash: `charge` for `charge:3f2a…`, `ship:1` for a child
/// start `ship:1:order-7`.
fn call_name(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(name, _)| name)
}

/// `" (after event `x` arrives)"`, or nothing.
fn after(waits: &[String]) -> String {
    if waits.is_empty() {
        String::new()
    } else {
        format!(" (after {})", waits.join(", then "))
    }
}

/// A run's verdict at its call site, with its new work and changed sleeps, in one cell, in
/// words that are the same for every run that would do the same.
fn describe(run: &RunImpact) -> String {
    let verdict = match &run.verdict {
        Verdict::Diverges {
            new_address,
            call_site,
            unconsumed,
            after: waits,
        } => {
            let mut recorded: Vec<&str> = unconsumed.iter().map(|a| call_name(a)).collect();
            recorded.sort_unstable();
            recorded.dedup();
            format!(
                "diverges{}: new call `{}`{} while recorded {} unconsumed",
                after(waits),
                call_name(new_address),
                call_site
                    .as_ref()
                    .map(|at| format!(" at {at}"))
                    .unwrap_or_default(),
                recorded.join(", ")
            )
        }
        Verdict::Mismatch {
            what,
            address,
            mismatch,
            after: waits,
        } => format!(
            "mismatch{}: recorded {what}{} no longer matches its type: {mismatch}",
            after(waits),
            address
                .as_ref()
                .map(|a| format!(" at `{}`", call_name(a)))
                .unwrap_or_default()
        ),
        Verdict::Ends {
            outcome,
            after: waits,
            ..
        } => format!("ends {outcome}{}", after(waits)),
        other => other.to_string(),
    };
    let mut parts = vec![verdict];
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
