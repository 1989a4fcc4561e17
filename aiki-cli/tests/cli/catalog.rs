//! `aiki runs start`, `aiki runs send` and `aiki workflows`: what the binary, which has no
//! workflow code, learns from the catalog the workers publish.

use aiki::RunId;
use aiki_tests::Backend;
use serde_json::Value;

use crate::support::{self, aiki, fixture, on};

async fn starts_and_sends_checked_against_the_catalog(backend: Backend) {
    let f = fixture(backend).await;
    let store = aiki::store::connect(&f.url).await.unwrap();
    let client = aiki::Client::new(store.clone());
    // The fixture's worker published what it registers; a version no worker registers is
    // listed by its runs alone.
    let workflows = aiki(&f.url, &["workflows", "-o", "json"]).json();
    let listed = |name: &str| support::workflow(&workflows, name).clone();
    let waits = listed("cli-waits");
    assert_eq!(
        waits["catalog"]["events"][0]["name"], "payment_received",
        "{waits}"
    );
    assert_eq!(
        waits["catalog"]["input"]["fingerprint"],
        aiki::Schema::of::<aiki::NoInput>().fingerprint()
    );
    assert_eq!(
        waits["pools"],
        serde_json::json!([]),
        "its worker has stopped: no live worker serves it"
    );
    assert_eq!(waits["mixed_builds"], false, "{waits}");
    assert_eq!(
        waits["builds"][0]["fingerprint"], waits["catalog"]["fingerprint"],
        "{waits}"
    );
    assert_eq!(listed("cli-unserved")["catalog"], Value::Null);
    let table = aiki(&f.url, &["workflows", "-o", "table"]);
    assert!(
        table.stdout.contains("(not in the catalog)"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("payment_received"),
        "{}",
        table.stdout
    );

    // A version whose runs are pushed to an endpoint is served without a live worker; the
    // table says where they go.
    let pushed = aiki(
        &f.url,
        &["endpoints", "set", "cli-waits@1", "https://fn.example/aiki"],
    );
    assert_eq!(pushed.code, 0, "{}", pushed.stderr);
    let table = aiki(&f.url, &["workflows", "-o", "table"]);
    let row = |name: &str| {
        table
            .stdout
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {}", table.stdout))
            .to_owned()
    };
    let waits_row = row("cli-waits");
    assert!(
        waits_row.contains("pushed to https://fn.example/aiki")
            && !waits_row.contains("no live worker"),
        "{waits_row}"
    );
    assert!(
        row("cli-unserved").contains("no live worker"),
        "{}",
        table.stdout
    );
    let workflows = aiki(&f.url, &["workflows", "-o", "json"]).json();
    let waits = support::workflow(&workflows, "cli-waits");
    assert_eq!(waits["pushed_to"], "https://fn.example/aiki", "{waits}");
    assert_eq!(
        support::workflow(&workflows, "cli-unserved")["pushed_to"],
        Value::Null
    );

    // A payload that breaks the event's schema: the typed API's own error, nothing sent.
    let waiting = f.waiting.to_string();
    let typed = client
        .handle::<support::CliWaits>(f.waiting)
        .send_json("payment_received", serde_json::json!("lots"), None)
        .await
        .unwrap_err();
    let refused = aiki(
        &f.url,
        &[
            "runs",
            "send",
            &waiting,
            "payment_received",
            "--payload",
            "\"lots\"",
        ],
    );
    assert_eq!(refused.failed(1), format!("error: {typed}"));
    assert!(
        typed
            .to_string()
            .contains("invalid event `payment_received`"),
        "{typed}"
    );
    let typed = client
        .handle::<support::CliWaits>(f.waiting)
        .send_json("refund", Value::Null, None)
        .await
        .unwrap_err();
    let refused = aiki(&f.url, &["runs", "send", &waiting, "refund"]);
    assert_eq!(refused.failed(1), format!("error: {typed}"));
    let shown = on(&f.url, "show", f.waiting, "json").json();
    assert_eq!(shown["run"]["status"], "awaiting_event");
    assert_eq!(shown["events"], serde_json::json!([]), "nothing recorded");

    // A good payload is sent once per reference id.
    let send = [
        "runs",
        "send",
        &waiting,
        "payment_received",
        "--payload",
        "700",
    ];
    let with_key = [&send[..], &["--reference-id", "pay-1", "-o", "json"]].concat();
    let sent = aiki(&f.url, &with_key).json();
    assert_eq!(sent["delivered"], true, "{sent}");
    assert_eq!(aiki(&f.url, &with_key).json()["delivered"], false);

    // Starts: a bad input gets the typed schema's complaint; a good one starts (once per
    // reference id); versions missing from the catalog are refused.
    let bad = aiki(
        &f.url,
        &["runs", "start", "cli-done@1", "--input", "\"three\""],
    );
    let complaint = aiki::Schema::of::<u32>()
        .validate(&serde_json::json!("three"))
        .unwrap_err();
    assert_eq!(
        bad.failed(1),
        format!("error: invalid input of cli-done@1: {complaint}")
    );
    let start = [
        "runs",
        "start",
        "cli-done",
        "--input",
        "41",
        "--reference-id",
        "r-1",
        "-o",
        "json",
    ];
    let started = aiki(&f.url, &start).json();
    assert_eq!(started["status"], "queued", "{started}");
    assert_eq!(started["namespace"]["version"], "1");
    assert_eq!(
        aiki(&f.url, &start).json()["id"],
        started["id"],
        "idempotent"
    );
    let unserved = aiki(&f.url, &["runs", "start", "cli-unserved@1"]);
    assert!(
        unserved
            .failed(1)
            .contains("cli-unserved@1 is not in the catalog"),
        "{}",
        unserved.stderr
    );
    let unknown = aiki(&f.url, &["runs", "start", "nope"]);
    assert!(unknown.failed(1).contains("`nope` is not in the catalog"));

    // A worker with the code finishes both.
    let worker = aiki::Worker::builder(store)
        .register(support::CliDone)
        .register(support::CliWaits)
        .poll_interval(std::time::Duration::from_millis(5))
        .build()
        .unwrap()
        .start();
    let started = started["id"].as_str().unwrap();
    for (id, output) in [(started, "42"), (waiting.as_str(), "700")] {
        let result = aiki(
            &f.url,
            &["runs", "result", id, "--timeout", "30s", "-o", "json"],
        );
        assert_eq!(
            (result.code, result.stdout.trim()),
            (0, output),
            "{}",
            result.stderr
        );
    }
    worker.shutdown().await;

    // Bad input of the new commands: a usage error, exit 2.
    for (args, says) in [
        (&["runs", "start", "@1"][..], "is not a workflow version"),
        (
            &["runs", "start", "cli-done@"][..],
            "is not a workflow version",
        ),
        (
            &["runs", "start", "cli-done", "--input", "{"][..],
            "is not JSON",
        ),
        (
            &[
                "runs",
                "start",
                "cli-done",
                "--input",
                "@/nonexistent/in.json",
            ][..],
            "cannot read `/nonexistent/in.json`",
        ),
        (&["runs", "send", "not-a-run", "ev"][..], "is not a run id"),
        (&["runs", "send", &waiting][..], "required"),
        (
            &[
                "runs",
                "send",
                &waiting,
                "payment_received",
                "--payload",
                "nope",
            ][..],
            "is not JSON",
        ),
    ] {
        let refused = aiki(&f.url, args);
        assert!(
            refused.failed(2).contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
    // Sending to a run that ended, or that does not exist.
    let ended = aiki(
        &f.url,
        &[
            "runs",
            "send",
            &waiting,
            "payment_received",
            "--payload",
            "1",
        ],
    );
    assert!(ended.failed(1).contains("ended"), "{}", ended.stderr);
    let missing = aiki(&f.url, &["runs", "send", &RunId::new().to_string(), "x"]);
    assert!(
        missing.failed(1).contains("not found"),
        "{}",
        missing.stderr
    );
}

aiki_tests::on_sql_backends!(starts_and_sends_checked_against_the_catalog);
