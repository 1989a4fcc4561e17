//! `aiki runs purge`: a dry run lists the ended runs that would go and changes nothing; a
//! purge takes them (at most `--limit`), and leaves runs not ended and runs ended within the
//! last hour; bad input is refused in one line with an exit code, and nothing is purged.

use aiki::store::{ClaimRequest, Namespace, NewRun, RunId, RunStatus, Transition};
use aiki::{Clock, StoreError};
use aiki_tests::Backend;
use serde_json::json;

use crate::support::aiki;

const DAY: i64 = 86_400_000;

/// A run of its own version created at `at`, moved to `status` at `at` (`running` when
/// `status` is `Running`).
async fn seeded(store: &aiki::BoxStore, status: RunStatus, at: i64) -> RunId {
    let namespace = Namespace::new(format!("purge-{}", RunId::new()), "1");
    let run = NewRun::new(namespace.clone(), json!(null), "0".repeat(64), at);
    let id = run.id;
    store.create_run(run).await.expect("create");
    let claimed = store
        .claim(ClaimRequest::new(
            "seeder",
            vec![namespace],
            "default",
            1,
            at,
        ))
        .await
        .expect("claim")
        .runs;
    let run = claimed.into_iter().next().expect("claimed");
    let transition = match status {
        RunStatus::Running => return id,
        RunStatus::Completed => Transition::to(status, at).output(json!(1), "f"),
        RunStatus::Failed => {
            Transition::to(status, at).error(aiki::Failure::new("task_failed", "no"))
        }
        _ => Transition::to(status, at),
    };
    store
        .transition(id, run.revision, transition)
        .await
        .expect("end");
    id
}

async fn exists(store: &aiki::BoxStore, id: RunId) -> bool {
    match store.get_run(id).await {
        Ok(_) => true,
        Err(StoreError::NotFound { .. }) => false,
        Err(error) => panic!("{error}"),
    }
}

async fn ended_runs_are_listed_then_purged(backend: Backend) {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let now = aiki::SystemClock.now();
    let old_done = seeded(&store, RunStatus::Completed, now - 3 * DAY).await;
    let old_failed = seeded(&store, RunStatus::Failed, now - 2 * DAY).await;
    let old_cancelled = seeded(&store, RunStatus::Cancelled, now - 2 * DAY + 1).await;
    let old_running = seeded(&store, RunStatus::Running, now - 3 * DAY).await;
    let recent = seeded(&store, RunStatus::Completed, now - 10 * 60_000).await;

    let listed = aiki(
        &url,
        &[
            "runs",
            "purge",
            "--finished-before",
            "1d",
            "--dry-run",
            "-o",
            "json",
        ],
    )
    .json();
    let ids: Vec<String> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        [old_done, old_failed, old_cancelled].map(|id| id.to_string()),
        "oldest first: {listed}"
    );
    assert_eq!(listed["dry_run"], true);
    let table = aiki(
        &url,
        &[
            "runs",
            "purge",
            "--finished-before",
            "1d",
            "--dry-run",
            "-o",
            "table",
        ],
    );
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("dry run: 3 runs") && table.stdout.contains("nothing was changed"),
        "{}",
        table.stdout
    );
    for id in [old_done, old_failed, old_cancelled, old_running, recent] {
        assert!(exists(&store, id).await, "a dry run purges nothing");
    }

    let one = aiki(
        &url,
        &[
            "runs",
            "purge",
            "--finished-before",
            "1d",
            "--limit",
            "1",
            "-o",
            "json",
        ],
    )
    .json();
    assert_eq!(one["purged"], 1, "{one}");
    assert!(!exists(&store, old_done).await, "the oldest went first");
    let rest = aiki(
        &url,
        &["runs", "purge", "--finished-before", "1d", "-o", "table"],
    );
    assert_eq!(rest.code, 0, "{}", rest.stderr);
    assert!(
        rest.stdout.starts_with("purged 2 ended runs"),
        "{}",
        rest.stdout
    );
    for id in [old_failed, old_cancelled] {
        assert!(!exists(&store, id).await, "{id} purged");
    }
    assert!(exists(&store, old_running).await, "not ended: kept");
    assert!(exists(&store, recent).await, "ended after the cutoff: kept");
    let none = aiki(
        &url,
        &["runs", "purge", "--finished-before", "1d", "-o", "json"],
    )
    .json();
    assert_eq!(none["purged"], 0, "{none}");
}

async fn bad_purges_are_refused_in_one_line(backend: Backend) {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let now = aiki::SystemClock.now();
    let old = seeded(&store, RunStatus::Completed, now - 3 * DAY).await;
    let young = aiki(&url, &["runs", "purge", "--finished-before", "10m"]);
    let young = young.failed(2);
    assert!(
        young.contains("at least an hour ago") && young.contains("--allow-short-retention"),
        "{young}"
    );
    let now_ = aiki(
        &url,
        &[
            "runs",
            "purge",
            "--finished-before",
            "0s",
            "--allow-short-retention",
        ],
    );
    assert!(
        now_.failed(2).contains("at least a second ago"),
        "{}",
        now_.stderr
    );
    let future = aiki(
        &url,
        &["runs", "purge", "--finished-before", "2099-01-01T00:00:00Z"],
    );
    future.failed(2);
    for args in [
        &["runs", "purge"][..],
        &["runs", "purge", "--finished-before", "yesterday"],
        &["runs", "purge", "--finished-before", "1d", "--limit", "0"],
        &[
            "runs",
            "purge",
            "--finished-before",
            "1d",
            "--limit",
            "many",
        ],
    ] {
        let refused = aiki(&url, args);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
    }
    let through_a_server = aiki(
        "http://127.0.0.1:9",
        &["runs", "purge", "--finished-before", "1d"],
    );
    let through_a_server = through_a_server.failed(1);
    assert!(
        through_a_server.contains("daemons.purgeEndedRuns.retentionMs"),
        "{through_a_server}"
    );
    assert!(exists(&store, old).await, "nothing refused purged anything");
}

/// Trying retention without waiting an hour: a dry run counts the runs that ended within the
/// last hour apart, with when each becomes purgeable; `--allow-short-retention` purges them
/// now.
async fn young_runs_are_counted_by_when_and_purged_when_asked(backend: Backend) {
    let url = backend.fresh_url().await;
    let store = aiki::store::connect(&url).await.expect("the store opens");
    let now = aiki::SystemClock.now();
    let minute = 60_000;
    let old = seeded(&store, RunStatus::Completed, now - 3 * DAY).await;
    let half_hour = seeded(&store, RunStatus::Completed, now - 30 * minute).await;
    let ten_minutes = seeded(&store, RunStatus::Failed, now - 10 * minute).await;
    let just_now = seeded(&store, RunStatus::Completed, now).await;
    let dry = ["runs", "purge", "--finished-before", "5m", "--dry-run"];

    let listed = aiki(&url, &[&dry[..], &["-o", "json"]].concat()).json();
    assert_eq!(
        (&listed["purgeable_now"], &listed["purgeable_later"]),
        (&json!(1), &json!(2)),
        "{listed}"
    );
    let when: Vec<(String, i64)> = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            let at = run["purgeable_at"].as_i64().unwrap();
            assert_eq!(at, run["ended_at"].as_i64().unwrap() + 60 * minute, "{run}");
            (run["id"].as_str().unwrap().to_owned(), at)
        })
        .collect();
    let ids: Vec<&str> = when.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [old, half_hour, ten_minutes].map(|id| id.to_string()),
        "ended before 5 min ago, oldest first: {listed}"
    );
    assert_eq!(listed["last_purgeable_at"], when[2].1, "{listed}");
    let table = aiki(&url, &[&dry[..], &["-o", "table"]].concat());
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("dry run: 1 run that ended before")
            && table
                .stdout
                .contains("would be purged now, and 2 more once an hour has passed")
            && table.stdout.contains("in 49 min"),
        "{}",
        table.stdout
    );
    for id in [old, half_hour, ten_minutes, just_now] {
        assert!(exists(&store, id).await, "a dry run purges nothing");
    }

    let purged = aiki(
        &url,
        &[
            "runs",
            "purge",
            "--finished-before",
            "5m",
            "--allow-short-retention",
            "-o",
            "json",
        ],
    )
    .json();
    assert_eq!(purged["purged"], 3, "{purged}");
    for id in [old, half_hour, ten_minutes] {
        assert!(!exists(&store, id).await, "{id} purged");
    }
    assert!(
        exists(&store, just_now).await,
        "ended after the cutoff: kept"
    );
}

/// SQLite's write lock held by another connection past the store's busy timeout (5 s): the
/// purge waits it out and purges, instead of failing with "database is locked".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_waits_out_a_busy_sqlite_database() {
    use sqlx::Connection as _;
    aiki_tests::bounded(async {
        let url = Backend::Sqlite.fresh_url().await;
        let store = aiki::store::connect(&url).await.expect("the store opens");
        let old = seeded(
            &store,
            RunStatus::Completed,
            aiki::SystemClock.now() - 3 * DAY,
        )
        .await;
        let mut writer = sqlx::SqliteConnection::connect(&url)
            .await
            .expect("a second connection opens");
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut writer)
            .await
            .expect("the write lock is taken");
        let purge = tokio::task::spawn_blocking({
            let url = url.clone();
            move || {
                aiki(
                    &url,
                    &["runs", "purge", "--finished-before", "1d", "-o", "json"],
                )
            }
        });
        tokio::time::sleep(std::time::Duration::from_secs(6)).await;
        assert!(
            !purge.is_finished(),
            "the purge waits while the lock is held"
        );
        sqlx::query("COMMIT")
            .execute(&mut writer)
            .await
            .expect("the write lock is released");
        let purged = purge.await.expect("the purge ran").json();
        assert_eq!(purged["purged"], 1, "{purged}");
        assert!(
            !exists(&store, old).await,
            "purged once the lock was released"
        );
    })
    .await;
}

aiki_tests::on_sql_backends!(
    ended_runs_are_listed_then_purged,
    bad_purges_are_refused_in_one_line,
    young_runs_are_counted_by_when_and_purged_when_asked
);
