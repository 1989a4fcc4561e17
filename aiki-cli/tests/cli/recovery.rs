//! `aiki runs retry` and the bulk forms of the actions: one id acts at once; filter flags or
//! `--ids-from` are a dry run until `--yes`.

use aiki::RunId;
use aiki_tests::Backend;
use serde_json::{Value, json};

use crate::scenes::scene;
use crate::support::{aiki, fixture, on};

async fn retries_and_acts_in_bulk(backend: Backend) {
    let f = fixture(backend).await;
    // One failed run: back to delivery with one more attempt, `retried` in its timeline.
    let retried = on(&f.url, "retry", f.failed, "json").json();
    assert_eq!(retried["status"], "queued", "{retried}");
    assert_eq!(retried["attempts"], 2);
    let shown = on(&f.url, "show", f.failed, "json").json();
    let reasons: Vec<&str> = shown["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|change| change["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.last(), Some(&"retried"), "{reasons:?}");
    let refused = on(&f.url, "retry", f.done, "table");
    let line = refused.failed(1);
    assert!(
        line.contains("cannot retry run")
            && line.contains("`completed`")
            && line.contains("`failed`"),
        "{line}"
    );

    // A fork of the completed run: queued, with its lineage; the same again is the same fork.
    let fork = on(&f.url, "fork", f.done, "json").json();
    assert_eq!(fork["status"], "queued", "{fork}");
    assert_eq!(fork["lineage"]["forked_from"], f.done.to_string());
    assert_eq!(on(&f.url, "fork", f.done, "json").json()["id"], fork["id"]);
    let refused = on(&f.url, "fork", f.waiting, "table");
    assert!(
        refused.failed(1).contains("cannot fork run"),
        "{}",
        refused.stderr
    );
    let done = f.done.to_string();
    let unknown = aiki(&f.url, &["runs", "fork", &done, "--drop", "nothing:1"]);
    assert!(
        unknown
            .failed(1)
            .contains("has recorded nothing at `nothing:1`"),
        "{}",
        unknown.stderr
    );
    let usage = aiki(&f.url, &["runs", "fork", &done, "--drop"]);
    usage.failed(2);

    // Many runs: a dry run lists them and changes nothing.
    let dry = aiki(
        &f.url,
        &["runs", "cancel", "--workflow", "cli-unserved", "-o", "json"],
    );
    let dry = dry.json();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        dry["count"], 2,
        "the queued run and the parent's child: {dry}"
    );
    let listed = aiki(
        &f.url,
        &[
            "runs",
            "list",
            "--workflow",
            "cli-unserved",
            "--status",
            "queued",
            "-o",
            "json",
        ],
    )
    .json();
    assert_eq!(
        listed["runs"].as_array().unwrap().len(),
        2,
        "nothing cancelled yet"
    );
    let table = aiki(
        &f.url,
        &[
            "runs",
            "cancel",
            "--workflow",
            "cli-unserved",
            "-o",
            "table",
        ],
    );
    assert!(
        table.stdout.contains("would cancel 2 run(s)"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("add --yes"), "{}", table.stdout);

    // The dry run's JSON is the list `--yes` executes; a second pass skips what changed.
    let file = std::env::temp_dir().join(format!("aiki-ids-{}.json", RunId::new()));
    std::fs::write(&file, dry.to_string()).unwrap();
    let from = file.display().to_string();
    let done = aiki(
        &f.url,
        &["runs", "cancel", "--ids-from", &from, "--yes", "-o", "json"],
    )
    .json();
    assert_eq!(
        (done["done"].as_u64(), done["skipped"].as_u64()),
        (Some(2), Some(0)),
        "{done}"
    );
    assert!(
        done["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|result| result["outcome"] == "done" && result["status"] == "cancelled"),
        "{done}"
    );
    // Nothing done: the summary, and exit 1 with one line saying so.
    let again = aiki(
        &f.url,
        &["runs", "cancel", "--ids-from", &from, "--yes", "-o", "json"],
    );
    assert!(
        again
            .failed(1)
            .contains("every run selected (2) was skipped"),
        "{}",
        again.stderr
    );
    let again: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    assert_eq!(
        (again["done"].as_u64(), again["skipped"].as_u64()),
        (Some(0), Some(2)),
        "{again}"
    );
    assert!(
        again["results"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("`cancelled`"),
        "{again}"
    );
    // A plain list of ids works too.
    std::fs::write(&file, format!("{}\n", f.sleeping)).unwrap();
    let one = aiki(
        &f.url,
        &["runs", "cancel", "--ids-from", &from, "--yes", "-o", "json"],
    )
    .json();
    assert_eq!(one["done"], 1, "{one}");
    // A filter that selects nothing.
    let none = aiki(
        &f.url,
        &["runs", "requeue", "--status", "stalled", "-o", "json"],
    )
    .json();
    assert_eq!(none["count"], 0);
    // A bulk retry of the failed runs of a workflow, executed.
    let retry = aiki(
        &f.url,
        &[
            "runs",
            "retry",
            "--workflow",
            "cli-sleeps",
            "--yes",
            "-o",
            "json",
        ],
    );
    assert!(
        retry.failed(1).contains("no run was selected to retry"),
        "{}",
        retry.stderr
    );
    let retry: serde_json::Value = serde_json::from_str(&retry.stdout).unwrap();
    assert_eq!(retry["done"], 0, "cli-sleeps has no failed run: {retry}");

    // Bad input: a usage error, exit 2, nothing done.
    std::fs::write(&file, "not-an-id\n").unwrap();
    let waiting = f.waiting.to_string();
    for (args, says) in [
        (&["runs", "retry"][..], "name the runs to retry"),
        (
            &["runs", "retry", &waiting, "--workflow", "x"][..],
            "not both",
        ),
        (
            &["runs", "cancel", "--ids-from", &from, "--status", "queued"][..],
            "not both",
        ),
        (
            &["runs", "cancel", "--ids-from", &from, "--yes"][..],
            "which is not a run id",
        ),
        (
            &[
                "runs",
                "cancel",
                "--ids-from",
                "/nonexistent/ids.json",
                "--yes",
            ][..],
            "cannot read `/nonexistent/ids.json`",
        ),
        (
            &["runs", "resume", "--status", "paused", "--max", "0"][..],
            "0 is not in",
        ),
        (
            &["runs", "retry", "--status", "failed", "--yes", "--colour"][..],
            "unexpected argument",
        ),
    ] {
        let refused = aiki(&f.url, args);
        assert!(
            refused.failed(2).contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
    std::fs::write(&file, "{\"count\": 3}").unwrap();
    let refused = aiki(&f.url, &["runs", "cancel", "--ids-from", &from, "--yes"]);
    assert!(
        refused.failed(2).contains("without an `ids` array"),
        "{}",
        refused.stderr
    );
    assert_eq!(
        on(&f.url, "show", f.waiting, "json").json()["run"]["status"],
        "awaiting_event"
    );
    let _ = std::fs::remove_file(file);
}

/// A bulk retry's dry run checks each run as the retry would: a run failed by its child's
/// recorded failure is listed as skipped (it needs `--rerun-child`), not as one `--yes` retries;
/// `--yes` that then does nothing exits 1; with `--rerun-child` both agree and it is done.
async fn a_bulk_retry_says_what_it_would_skip_and_why(backend: Backend) {
    let s = scene(backend).await;
    let orphaned = s.orphaned.to_string();
    let by_workflow = ["runs", "retry", "--workflow", "cli-orphaned"];

    let dry = aiki(&s.url, &[&by_workflow[..], &["-o", "json"]].concat()).json();
    assert_eq!(
        (&dry["count"], &dry["ids"]),
        (&json!(0), &json!([])),
        "{dry}"
    );
    let skipped = dry["skipped"].as_array().expect("the runs it would skip");
    assert_eq!(skipped.len(), 1, "{dry}");
    assert_eq!(skipped[0]["id"], orphaned.as_str());
    assert_eq!(skipped[0]["code"], "retry_would_fail_again");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("`--rerun-child`"),
        "{dry}"
    );
    let table = aiki(&s.url, &[&by_workflow[..], &["-o", "table"]].concat());
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("would retry 0 run(s)")
            && table.stdout.contains("would skip 1 run(s)")
            && table
                .stdout
                .contains(&format!("  {orphaned}  run {orphaned} failed because")),
        "{}",
        table.stdout
    );

    // `--yes` skips it as the dry run said, and exits 1: nothing was done.
    let yes = aiki(
        &s.url,
        &[&by_workflow[..], &["--yes", "-o", "json"]].concat(),
    );
    let line = yes.failed(1);
    assert!(line.contains("nothing done"), "{line}");
    let summary: Value = serde_json::from_str(&yes.stdout).unwrap();
    assert_eq!(
        (&summary["done"], &summary["skipped"]),
        (&json!(0), &json!(1))
    );
    assert_eq!(
        on(&s.url, "show", s.orphaned, "json").json()["run"]["status"],
        "failed"
    );

    // With `--rerun-child`, the dry run and the action agree.
    let rerun = [&by_workflow[..], &["--rerun-child"]].concat();
    let dry = aiki(&s.url, &[&rerun[..], &["-o", "json"]].concat()).json();
    assert_eq!(dry["ids"], json!([orphaned]), "{dry}");
    assert_eq!(dry["skipped"], json!([]), "{dry}");
    let done = aiki(&s.url, &[&rerun[..], &["--yes", "-o", "json"]].concat()).json();
    assert_eq!(
        (&done["done"], &done["skipped"]),
        (&json!(1), &json!(0)),
        "{done}"
    );
}

aiki_tests::on_sql_backends!(
    retries_and_acts_in_bulk,
    a_bulk_retry_says_what_it_would_skip_and_why
);
