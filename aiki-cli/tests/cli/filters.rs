//! The filters of `runs list` and the bulk actions: by the task whose call failed a run, by
//! text in its error; and a workflow, version or error kind the store has never heard of is
//! refused naming those it knows, instead of an empty list.

use aiki::store::{ClaimRequest, NewRun, Transition};
use aiki::{Clock, Namespace, RunStatus, SystemClock};
use aiki_tests::Backend;

use crate::support::{aiki, fixture, ids};

async fn filters_a_person_can_use(backend: Backend) {
    let f = fixture(backend).await;
    let url = f.url.as_str();
    let list =
        |args: &[&str]| ids(&aiki(url, &[&["runs", "list", "-o", "json"], args].concat()).json());
    let failed = [f.failed.to_string()];
    assert_eq!(list(&["--failed-task", "cli-broken"]), failed);
    assert_eq!(list(&["--failed-task", "cli-step"]), Vec::<String>::new());
    assert_eq!(
        list(&["--failed-task", "cli"]),
        Vec::<String>::new(),
        "a name, not a prefix"
    );
    assert_eq!(list(&["--error-contains", "provider said"]), failed);
    assert_eq!(
        list(&["--error-contains", "Provider said"]),
        Vec::<String>::new()
    );
    assert_eq!(
        list(&[
            "--error-kind",
            "task_failed",
            "--failed-task",
            "cli-broken",
            "--workflow",
            "cli-fails"
        ]),
        failed
    );
    // A version of any workflow.
    assert_eq!(list(&["--version", "1"]).len(), 7);
    // A kind the runtime records, with no run of it: an empty list.
    assert_eq!(
        list(&["--error-kind", "corrupt_history"]),
        Vec::<String>::new()
    );
    // The bulk actions take them too.
    let dry = aiki(
        url,
        &["runs", "retry", "--failed-task", "cli-broken", "-o", "json"],
    )
    .json();
    assert_eq!(dry["count"], 1, "{dry}");

    // A kind only the store knows: recorded by another service's code.
    let store = aiki::store::connect(url).await.unwrap();
    let namespace = Namespace::new("cli-foreign", "1");
    let now = SystemClock.now();
    let run = NewRun::new(namespace.clone(), serde_json::json!(null), "h", now);
    store.create_run(run).await.unwrap();
    let claimed = store
        .claim(ClaimRequest::new(
            "test",
            vec![namespace],
            "default",
            1,
            now,
        ))
        .await
        .unwrap()
        .runs
        .remove(0);
    store
        .transition(
            claimed.id,
            claimed.revision,
            Transition::to(RunStatus::Failed, now)
                .error(aiki::Failure::new("quota_exceeded", "over the quota")),
        )
        .await
        .unwrap();
    assert_eq!(
        list(&["--error-kind", "quota_exceeded"]),
        [claimed.id.to_string()]
    );

    // Unknown names: refused, naming the known ones; exit 2.
    for (args, says) in [
        (
            &["runs", "list", "--workflow", "cli-dne"][..],
            "no workflow `cli-dne` has runs or a catalog entry",
        ),
        (
            &["runs", "list", "--workflow", "cli-dne"][..],
            "cli-done, cli-fails",
        ),
        (
            &["runs", "list", "--workflow", "cli-done", "--version", "9"][..],
            "has no version `9`",
        ),
        (
            &["runs", "list", "--workflow", "cli-done", "--version", "9"][..],
            "known versions: 1",
        ),
        (
            &["runs", "list", "--version", "9"][..],
            "no workflow has a version `9`",
        ),
        (
            &["runs", "list", "--error-kind", "task_fialed"][..],
            "no run has an error of kind `task_fialed`",
        ),
        (
            &["runs", "list", "--error-kind", "task_fialed"][..],
            "quota_exceeded",
        ),
        (
            &["runs", "list", "--error-kind", "task_fialed"][..],
            "corrupt_history",
        ),
        (
            &["runs", "cancel", "--workflow", "cli-dne", "--yes"][..],
            "no workflow `cli-dne`",
        ),
        (
            &["runs", "list", "--failed-task", ""][..],
            "must not be empty",
        ),
        (
            &["runs", "list", "--error-contains", ""][..],
            "must not be empty",
        ),
        (
            &["runs", "list", "--failed-task"][..],
            "a value is required",
        ),
    ] {
        let refused = aiki(url, args);
        assert!(
            refused.failed(2).contains(says),
            "{args:?}: {}",
            refused.stderr
        );
    }
}

aiki_tests::on_sql_backends!(filters_a_person_can_use);
