//! `aiki workers` (live, stopped or gone; builds; claim timing) and `aiki workflows` saying
//! when the live workers of a version run different builds.

use std::time::Duration;

use aiki::Worker;
use aiki_tests::Backend;

use crate::scenes::{MixedNew, MixedOld, PATIENCE};
use crate::support::{aiki, workflow};

async fn workers_and_the_builds_they_run(backend: Backend) {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.unwrap();
    let start = |id: &str, pool: &str, old: bool| {
        let builder = Worker::builder(store.clone())
            .worker_id(id)
            .pool(pool)
            .poll_interval(Duration::from_millis(5));
        let builder = if old {
            builder.register(MixedOld)
        } else {
            builder.register(MixedNew)
        };
        builder.build().unwrap().start()
    };
    let old = start("w-old", "blue", true);
    let new = start("w-new", "green", false);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let workers = loop {
        let workers = aiki(&url, &["workers", "-o", "json"]).json();
        if workers.as_array().map(Vec::len) == Some(2) {
            break workers;
        }
        assert!(tokio::time::Instant::now() < deadline, "{workers}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let build = |id: &str| {
        let worker = workers
            .as_array()
            .unwrap()
            .iter()
            .find(|worker| worker["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {workers}"));
        assert_eq!(worker["liveness"]["state"], "live", "{worker}");
        worker["fingerprints"]["cli-mixed@1"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let builds = [build("w-old"), build("w-new")];
    assert_ne!(builds[0], builds[1], "two builds: {workers}");
    let table = aiki(&url, &["workers", "-o", "table"]);
    println!("{}", table.stdout);
    let row = |id: &str| {
        table
            .stdout
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("{id}: {}", table.stdout))
            .to_owned()
    };
    assert!(row("w-old").contains("live"), "{}", table.stdout);
    assert!(
        row("w-old").contains(&format!("cli-mixed@1 ({})", &builds[0][..12])),
        "{}",
        table.stdout
    );

    // Two builds live at once: said per version, in JSON and in the table.
    let workflows = aiki(&url, &["workflows", "-o", "json"]).json();
    let mixed = workflow(&workflows, "cli-mixed");
    assert_eq!(mixed["mixed_builds"], true, "{mixed}");
    assert_eq!(mixed["builds"].as_array().map(Vec::len), Some(2), "{mixed}");
    let table = aiki(&url, &["workflows", "-o", "table"]);
    println!("{}", table.stdout);
    assert!(
        table.stdout.contains("MIXED: ") && table.stdout.contains("(1 worker)"),
        "{}",
        table.stdout
    );

    // One stops: listed as stopped; the version runs one build again.
    new.shutdown().await;
    let workers = aiki(&url, &["workers", "-o", "json"]).json();
    let stopped = workers
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "w-new")
        .expect("w-new is listed");
    assert_eq!(stopped["liveness"]["state"], "stopped", "{stopped}");
    assert!(stopped["liveness"]["at"].is_i64(), "{stopped}");
    let table = aiki(&url, &["workers", "-o", "table"]);
    assert!(table.stdout.contains("stopped "), "{}", table.stdout);
    let workflows = aiki(&url, &["workflows", "-o", "json"]).json();
    let mixed = workflow(&workflows, "cli-mixed");
    assert_eq!(mixed["mixed_builds"], false, "{mixed}");
    assert_eq!(mixed["pools"], serde_json::json!(["blue"]), "{mixed}");
    old.shutdown().await;

    // Every row with `--all`; a window with `--within`; lines with `-o jsonl`.
    let all = aiki(&url, &["workers", "--all", "-o", "json"]).json();
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");
    let lines = aiki(&url, &["workers", "--within", "1d", "-o", "jsonl"]);
    assert_eq!(lines.stdout.lines().count(), 2, "{}", lines.stdout);

    // Bad input: one line, exit 2.
    for (args, says) in [
        (&["workers", "--within", "soon"][..], "is not a duration"),
        (
            &["workers", "--all", "--within", "5m"][..],
            "cannot be used with",
        ),
        (&["workers", "--all=yes"][..], "unexpected value"),
    ] {
        let refused = aiki(&url, args);
        assert!(
            refused.failed(2).contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
}

aiki_tests::on_sql_backends!(workers_and_the_builds_they_run);
