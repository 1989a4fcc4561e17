//! The impact check against every case of the refactoring guide: version A of a workflow runs
//! to where it waits, the worker stops, and the check replays the run against A' (same name and
//! version, changed code) without writing anything. Each case has a name of its own, so that
//! one check over one store classifies them all; the table it prints is the closing note's.

mod cases;
use crate::common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use aiki::impact::{self, CheckOptions, Gate, Report, RunImpact, Verdict};
use aiki::{Registry, Run, RunStatus, Task, TaskError, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};
use cases::*;
use common::{TaskA, TaskB, TaskC};

fn address<T: Task<Input = String>>(task: T, input: &str) -> String {
    task.address(&input.to_owned()).unwrap().into_string()
}

/// The check's verdict for the one run of `workflow`.
fn of<'r>(report: &'r Report, workflow: &str) -> &'r RunImpact {
    report
        .runs
        .iter()
        .find(|run| run.namespace.workflow == workflow)
        .unwrap_or_else(|| panic!("no run of {workflow} in the report"))
}

fn diverges(run: &RunImpact) -> (&str, &[String], &[String]) {
    match &run.verdict {
        Verdict::Diverges {
            new_address,
            unconsumed,
            after,
            ..
        } => (new_address, unconsumed, after),
        other => panic!("{}: expected a divergence, got {other}", run.namespace),
    }
}

fn proceed_arrives() -> Vec<String> {
    vec!["event `proceed` arrives".to_owned()]
}

async fn the_check_classifies_every_case_of_the_refactoring_guide(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| {
        w.register(Reorder)
            .register(Remove)
            .register(RemoveThenNew)
            .register(Append)
            .register(Insert)
            .register(ChangeInput)
            .register(Rename)
            .register(Discount)
            .register(Waits)
            .register(AddWait)
            .register(EventIntoInput)
            .register(SleepLonger)
            .register(SleepShorter)
            .register(Delays)
            .register(NamedSleeps)
            .register(Shape)
            .register(Contact)
            .register(EchoChild)
            .register(ChildInput)
            .register(ChildAppend)
            .register(DirectCall)
            .register(Stranded)
            .register(SomeoneElse)
    })
    .await;
    let c = &h.client;
    let x = || "x".to_owned();
    let waiting = [
        c.start::<Reorder>(x()).await.unwrap().id(),
        c.start::<Remove>(x()).await.unwrap().id(),
        c.start::<RemoveThenNew>(x()).await.unwrap().id(),
        c.start::<Append>(x()).await.unwrap().id(),
        c.start::<Insert>(x()).await.unwrap().id(),
        c.start::<ChangeInput>(x()).await.unwrap().id(),
        c.start::<Rename>(x()).await.unwrap().id(),
        c.start::<Discount>("premium".into()).await.unwrap().id(),
        c.start::<Discount>("regular".into()).await.unwrap().id(),
        c.start::<AddWait>(x()).await.unwrap().id(),
        c.start::<EventIntoInput>(x()).await.unwrap().id(),
        c.start::<Shape>("u1".into()).await.unwrap().id(),
        c.start::<Contact>("u1".into()).await.unwrap().id(),
        c.start::<ChildInput>(x()).await.unwrap().id(),
        c.start::<ChildAppend>(x()).await.unwrap().id(),
        c.start::<DirectCall>(x()).await.unwrap().id(),
    ];
    for id in waiting {
        let deadline = tokio::time::Instant::now() + aiki_tests::PATIENCE;
        while c.any_run(id).record().await.unwrap().status != RunStatus::AwaitingEvent {
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {id} never waited"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let waits = c.start::<Waits>(x()).await.unwrap();
    let first = h.reach(&waits, RunStatus::AwaitingEvent).await;
    waits.send::<WaitsApproved>("ann".into()).await.unwrap();
    h.reach_next(&waits, RunStatus::AwaitingEvent, &first).await;
    let longer = c.start::<SleepLonger>(x()).await.unwrap();
    let shorter = c.start::<SleepShorter>(x()).await.unwrap();
    h.reach(&longer, RunStatus::Sleeping).await;
    h.reach(&shorter, RunStatus::Sleeping).await;
    let stranded = c.start::<Stranded>(x()).await.unwrap();
    h.reach(&stranded, RunStatus::Sleeping).await;
    let other = c.start::<SomeoneElse>(x()).await.unwrap();
    h.reach(&other, RunStatus::Sleeping).await;
    let delays = c.start::<Delays>(x()).await.unwrap();
    let named = c.start::<NamedSleeps>(x()).await.unwrap();
    let one = h.reach(&delays, RunStatus::Sleeping).await;
    let two = h.reach(&named, RunStatus::Sleeping).await;
    h.advance(5 * MINUTE);
    h.reach_next(&delays, RunStatus::Sleeping, &one).await;
    h.reach_next(&named, RunStatus::Sleeping, &two).await;
    // The worker stops; 40 minutes pass: the shortened sleep (30 min) is over, the others not.
    h.deploy(|w| w).await;
    h.advance(40 * MINUTE);

    let before = snapshot(&h).await;
    let executed = [
        h.executions.count("task-a"),
        h.executions.count("task-b"),
        h.executions.count("task-c"),
    ];
    let new_build = Registry::builder()
        .register(Reorder2)
        .register(Remove2)
        .register(RemoveThenNew2)
        .register(Append2)
        .register(Insert2)
        .register(ChangeInput2)
        .register(Rename2)
        .register(Discount2)
        .register(Waits2)
        .register(AddWait2)
        .register(EventIntoInput2)
        .register(SleepLonger2)
        .register(SleepShorter2)
        .register(Delays2)
        .register(NamedSleeps2)
        .register(Shape2)
        .register(Contact2)
        .register(EchoChild)
        .register(ChildInput2)
        .register(ChildAppend2)
        .register(DirectCall2)
        .register(StrandedV2)
        .build()
        .unwrap();
    let report = impact::check(&new_build, &h.client, &CheckOptions::default())
        .await
        .unwrap();
    println!("{}", table(&report));

    // The check wrote nothing and ran no task.
    assert_eq!(snapshot(&h).await, before, "the check changed the store");
    assert_eq!(
        [
            h.executions.count("task-a"),
            h.executions.count("task-b"),
            h.executions.count("task-c"),
        ],
        executed,
        "the check ran a task"
    );
    assert_eq!(
        CHARGES.load(Ordering::SeqCst),
        0,
        "the direct call's body ran"
    );

    // Safe, as the guide says.
    for safe in ["reorder", "remove", "waits", "add-wait", "versioned-output"] {
        let run = of(&report, safe);
        assert!(
            matches!(run.verdict, Verdict::Safe) && run.new_work.is_empty(),
            "{safe}: {} {:?}",
            run.verdict,
            run.new_work
        );
        assert!(!run.fails(&Gate::default()));
    }
    assert_eq!(of(&report, "reorder").waits, proceed_arrives());
    assert_eq!(
        of(&report, "add-wait").waits,
        ["event `approved` arrives", "event `proceed` arrives"]
    );

    // Removal followed by a new task: diverges once `proceed` arrives.
    let (new, unconsumed, after) = diverges(of(&report, "remove-then-new"));
    assert_eq!(new, address(TaskB, "x"));
    assert_eq!(unconsumed, [address(TaskA, "x")]);
    assert_eq!(after, proceed_arrives());

    // Appended after the wait: new work, named.
    let append = of(&report, "append");
    assert_eq!(append.verdict, Verdict::NewWork);
    assert_eq!(append.new_work.len(), 1);
    assert_eq!(append.new_work[0].name, "task-b");
    assert_eq!(append.new_work[0].address, address(TaskB, "task-a(x)"));
    assert_eq!(append.new_work[0].after, proceed_arrives());
    let call_site = append.new_work[0].call_site.as_deref().unwrap();
    assert!(
        call_site.starts_with("tests/tests/impact/cases.rs:"),
        "{call_site}"
    );
    assert!(!append.fails(&Gate::default()));
    assert!(append.fails(&Gate::default().deny_new_work()));

    // Inserted, changed input, renamed: diverge in the next execution, before any wait.
    let (new, unconsumed, after) = diverges(of(&report, "insert"));
    assert_eq!(
        (new, unconsumed),
        (&*address(TaskC, "x"), &[address(TaskB, "x")][..])
    );
    assert!(after.is_empty());
    let (new, unconsumed, _) = diverges(of(&report, "change-input"));
    assert_eq!(
        (new, unconsumed),
        (&*address(TaskA, "x!"), &[address(TaskA, "x")][..])
    );
    let (new, unconsumed, _) = diverges(of(&report, "rename"));
    assert_eq!(
        (new, unconsumed),
        (&*address(TaskC, "x"), &[address(TaskA, "x")][..])
    );
    if let Verdict::Diverges { call_site, .. } = &of(&report, "insert").verdict {
        let at = call_site
            .as_deref()
            .expect("the diverging call's source location");
        assert!(at.starts_with("tests/tests/impact/cases.rs:"), "{at}");
    }

    // Conditional change: only the run that took the other branch diverges.
    let discount: Vec<&RunImpact> = report
        .runs
        .iter()
        .filter(|run| run.namespace.workflow == "discount")
        .collect();
    assert_eq!(discount.len(), 2);
    let diverging = discount
        .iter()
        .filter(|run| matches!(run.verdict, Verdict::Diverges { .. }))
        .count();
    assert_eq!(diverging, 1, "{discount:?}");
    assert!(discount.iter().any(|run| run.verdict == Verdict::Safe));

    // Event data flowing into a task input changes its address.
    let (new, unconsumed, after) = diverges(of(&report, "event-into-input"));
    assert!(new.starts_with("task-a:"), "{new}");
    assert_eq!(unconsumed, [address(TaskA, "x")]);
    assert_eq!(after, ["event `approved` arrives"]);

    // Sleeps: the change and by how much; a run that then runs task-b.
    let longer = of(&report, "sleep-longer");
    assert_eq!(longer.sleeps.len(), 1);
    assert_eq!(
        longer.sleeps[0].extended_by_ms,
        (30 * MINUTE).as_millis() as i64
    );
    assert!(!longer.sleeps[0].already_satisfied);
    assert_eq!(longer.verdict, Verdict::NewWork);
    let shorter = of(&report, "sleep-shorter");
    assert_eq!(
        shorter.sleeps[0].extended_by_ms,
        -((30 * MINUTE).as_millis() as i64)
    );
    assert!(
        shorter.sleeps[0].already_satisfied,
        "30 of 40 minutes passed"
    );
    let delays = of(&report, "same-named-sleeps");
    let extended: Vec<i64> = delays.sleeps.iter().map(|s| s.extended_by_ms).collect();
    let m55 = (55 * MINUTE).as_millis() as i64;
    assert_eq!(
        extended,
        [m55, -m55],
        "1 h asked of the 5 min record, 5 min of the 1 h one"
    );
    assert!(delays.fails(&Gate::default().deny_sleep_changes()));
    let named = of(&report, "named-sleeps");
    assert!(named.sleeps.is_empty(), "{:?}", named.sleeps);
    assert!(!named.fails(&Gate::default().deny_sleep_changes()));

    // Output shapes.
    match &of(&report, "shape").verdict {
        Verdict::Mismatch {
            what,
            address,
            mismatch,
            ..
        } => {
            assert_eq!(what, "task `fetch-user`");
            assert_eq!(
                address.as_deref(),
                Some(&*FetchUser.address(&"u1".to_owned()).unwrap().into_string())
            );
            assert!(mismatch.contains("email_address"), "{mismatch}");
        }
        other => panic!("shape: {other}"),
    }

    // Child starts: a changed child input diverges; an appended child is new work.
    let (new, unconsumed, _) = diverges(of(&report, "child-input"));
    assert!(new.starts_with("echo-child:1:"), "{new}");
    assert_eq!(unconsumed.len(), 1);
    let appended = of(&report, "child-append");
    assert_eq!(appended.verdict, Verdict::NewWork);
    assert_eq!(appended.new_work[0].kind, "child");
    assert_eq!(appended.new_work[0].name, "echo-child@1");

    // A task fn called directly: broken, before its body ran.
    match &of(&report, "direct-call").verdict {
        Verdict::Broken {
            error_kind,
            message,
            after,
        } => {
            assert_eq!(error_kind, "direct_task_call");
            assert!(
                message.contains("ChargeCard.start(run, input)"),
                "{message}"
            );
            assert_eq!(after, &proceed_arrives());
        }
        other => panic!("direct-call: {other}"),
    }

    // A dropped version is stranded; another service's run is listed apart.
    match &of(&report, "stranded").verdict {
        Verdict::Stranded { reason } => {
            assert!(reason.contains("version 1 of `stranded`"), "{reason}");
            assert!(reason.contains("registers 2"), "{reason}");
        }
        other => panic!("stranded: {other}"),
    }
    assert_eq!(report.other_services.len(), 1);
    assert_eq!(report.other_services[0].run_id, other.id());
    assert!(!report.passes(&Gate::default()));
    assert!(
        report
            .runs
            .iter()
            .all(|run| run.namespace.workflow != "someone-else")
    );
}

/// Every run's history and timeline, to compare before and after the check.
async fn snapshot(h: &Harness) -> Vec<(aiki::store::History, Vec<aiki::store::StatusChange>)> {
    let page = h
        .store
        .list_runs(aiki::store::ListRuns::new(Default::default(), 500))
        .await
        .unwrap();
    let mut all = Vec::new();
    for run in page.runs {
        all.push((
            h.store.load_history(run.id).await.unwrap(),
            h.store.timeline(run.id).await.unwrap(),
        ));
    }
    all
}

/// The report as the closing note shows it.
fn table(report: &Report) -> String {
    let mut lines = vec!["| case | verdict | new work | sleeps | waits assumed |".to_owned()];
    lines.push("|---|---|---|---|---|".to_owned());
    let mut runs: Vec<&RunImpact> = report.runs.iter().collect();
    runs.sort_by(|a, b| a.namespace.workflow.cmp(&b.namespace.workflow));
    for run in runs {
        let work: Vec<String> = run
            .new_work
            .iter()
            .map(|work| format!("{} `{}`", work.kind, work.name))
            .collect();
        let sleeps: Vec<String> = run
            .sleeps
            .iter()
            .map(|s| {
                format!(
                    "`{}` {:+} min{}",
                    s.name,
                    s.extended_by_ms / 60_000,
                    if s.already_satisfied { " (over)" } else { "" }
                )
            })
            .collect();
        lines.push(format!(
            "| {} | {} | {} | {} | {} |",
            run.namespace.workflow,
            run.verdict,
            work.join(", "),
            sleeps.join(", "),
            run.waits.join(", ")
        ));
    }
    lines.join("\n")
}

#[aiki::task(name = "provider-down")]
async fn provider_down(input: String) -> Result<String, TaskError> {
    Err(TaskError::new(format!("the provider is down ({input})")))
}

#[aiki::workflow(name = "fails-at-the-provider", version = "1")]
async fn fails_at_the_provider(run: &Run, input: String) -> Result<String, WorkflowError> {
    let a = TaskA.start(run, input).await?;
    ProviderDown.start(run, a).await
}

async fn failed_runs_are_checked_as_a_retry_would_revive_them(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(FailsAtTheProvider)).await;
    let run = h
        .client
        .start::<FailsAtTheProvider>("x".into())
        .await
        .unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    h.deploy(|w| w).await;
    let build = Registry::builder()
        .register(FailsAtTheProvider)
        .build()
        .unwrap();
    let live_only = impact::check(&build, &h.client, &CheckOptions::default())
        .await
        .unwrap();
    assert!(
        live_only.runs.is_empty(),
        "a failed run is over unless asked for"
    );
    let since = failed.updated_at - 1;
    let report = impact::check(
        &build,
        &h.client,
        &CheckOptions::default().failed_since(since),
    )
    .await
    .unwrap();
    let checked = of(&report, "fails-at-the-provider");
    assert_eq!(checked.status, RunStatus::Failed);
    assert_eq!(checked.verdict, Verdict::Safe, "{}", checked.verdict);
    assert_eq!(
        checked.resumes,
        [ProviderDown
            .address(&"task-a(x)".to_owned())
            .unwrap()
            .into_string()],
        "a retry runs the failed call again, and only it"
    );
    let later = impact::check(
        &build,
        &h.client,
        &CheckOptions::default().failed_since(failed.updated_at + 1),
    )
    .await
    .unwrap();
    assert!(later.runs.is_empty(), "failed before `since`");
}

#[aiki::workflow(name = "ticks-forever", version = "1")]
async fn ticks_forever(run: &Run, _input: String) -> Result<String, WorkflowError> {
    loop {
        run.sleep("tick", MINUTE).await?;
    }
}

async fn a_loop_of_waits_is_looked_into_only_so_far(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(TicksForever)).await;
    let run = h.client.start::<TicksForever>("x".into()).await.unwrap();
    h.reach(&run, RunStatus::Sleeping).await;
    h.deploy(|w| w).await;
    let build = Registry::builder().register(TicksForever).build().unwrap();
    let report = impact::check(&build, &h.client, &CheckOptions::default())
        .await
        .unwrap();
    let checked = of(&report, "ticks-forever");
    assert_eq!(checked.verdict, Verdict::Safe);
    assert_eq!(checked.waits.len(), 100);
    let blind = checked.blind.as_deref().unwrap();
    assert!(blind.contains("looked no further"), "{blind}");
    assert!(checked.fails(&Gate::default().deny_blind()));
}

on_every_backend!(
    a_loop_of_waits_is_looked_into_only_so_far,
    the_check_classifies_every_case_of_the_refactoring_guide,
    failed_runs_are_checked_as_a_retry_would_revive_them
);
