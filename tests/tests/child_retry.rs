//! A parent failed by its child is recoverable: it is not retried automatically (it would
//! replay the child's recorded failure), a plain retry is refused as one that fails again, and
//! a retry with `rerun_child` retries the same child run with it, atomically, so the parent
//! completes once the child's fault is fixed; `force` retries it anyway (and it fails again).

use std::collections::HashSet;
use std::sync::Mutex;

use aiki::{ClientError, RetryOptions, Run, RunStatus, TaskError, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};

/// Keys whose lookup fails, until a test "deploys the fix" by removing its key.
static BROKEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn set_broken(key: &str, broken: bool) {
    let mut keys = BROKEN.lock().unwrap();
    let keys = keys.get_or_insert_with(HashSet::new);
    if broken {
        keys.insert(key.to_owned());
    } else {
        keys.remove(key);
    }
}

#[aiki::task(name = "lookup")]
async fn lookup(key: String) -> Result<String, TaskError> {
    if BROKEN
        .lock()
        .unwrap()
        .as_ref()
        .is_some_and(|keys| keys.contains(&key))
    {
        return Err(TaskError::new(std::io::Error::other("lookup service down")));
    }
    Ok(format!("found {key}"))
}

#[aiki::workflow(name = "retry-child", version = "1")]
async fn child(run: &Run, key: String) -> Result<String, WorkflowError> {
    Lookup.start(run, key).await
}

/// A parent with a retry policy of its own: a child's failure is still not retried.
#[aiki::workflow(
    name = "retry-parent",
    version = "1",
    retry = fixed(max_attempts = 3, delay_ms = 1)
)]
async fn parent(run: &Run, key: String) -> Result<String, WorkflowError> {
    let child = run
        .child::<Child>(key.clone())
        .reference_id(format!("child-of-{key}"))
        .await?;
    let found = child.wait().await?;
    Ok(format!("parent got: {found}"))
}

async fn a_parent_failed_by_its_child_completes_after_a_retry_with_the_child(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Parent).register(Child).task(Lookup))
        .await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    set_broken(&key, true);
    let run = h.client.start::<Parent>(key.clone()).await.unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    assert_eq!(failed.error.as_ref().unwrap().kind, "child_failed");
    let call = failed
        .error
        .as_ref()
        .unwrap()
        .call
        .clone()
        .expect("the child's start");
    let history = h.store.load_history(run.id()).await.unwrap();
    assert!(
        history
            .entries
            .iter()
            .any(|entry| entry.kind == aiki::store::EntryKind::Child
                && entry.address == call.address
                && entry.index == call.index),
        "the failure points at the child's start: {call:?}"
    );
    assert_eq!(
        failed.attempts, 1,
        "a child's failure is not retried automatically"
    );
    let child_id = h.store.load_history(run.id()).await.unwrap().children[0].id;

    let plan = h.client.any_run(run.id()).retry_plan().await.unwrap();
    let failed_child = plan
        .failed_child
        .clone()
        .expect("the failed child is named");
    assert_eq!(failed_child.run_id, child_id);
    assert_eq!(failed_child.status, RunStatus::Failed);
    assert!(
        failed_child.observed.is_some(),
        "the parent recorded the outcome"
    );
    let child_plan = failed_child.plan.expect("the child's own plan");
    assert_eq!(
        child_plan.rerun.len(),
        1,
        "the child's failed lookup runs again"
    );
    assert!(plan.fails_again(RetryOptions::default()));
    assert!(!plan.fails_again(RetryOptions::default().rerun_child()));

    let refused = run.retry(RetryOptions::default()).await.unwrap_err();
    assert!(
        matches!(refused, ClientError::RetryWouldFailAgain { child, .. } if child == child_id),
        "{refused}"
    );
    assert!(refused.to_string().contains("--rerun-child"), "{refused}");
    assert_eq!(
        h.store.get_run(run.id()).await.unwrap().revision,
        failed.revision,
        "a refused retry changes nothing"
    );

    // The fix is deployed; the parent is retried with its child, which is the same run.
    set_broken(&key, false);
    let retried = run
        .retry(RetryOptions::default().rerun_child())
        .await
        .unwrap();
    assert_eq!(retried.status, RunStatus::Queued);
    assert_eq!(retried.attempts, 2);
    assert_eq!(
        run.result().await.unwrap(),
        format!("parent got: found {key}")
    );
    let child_run = h.store.get_run(child_id).await.unwrap();
    assert_eq!(
        (child_run.status, child_run.attempts),
        (RunStatus::Completed, 2)
    );
    let history = h.store.load_history(run.id()).await.unwrap();
    assert_eq!(history.children.len(), 1, "no second child run");
    assert_eq!(history.children[0].id, child_id);
    for id in [run.id(), child_id] {
        let timeline = h.store.timeline(id).await.unwrap();
        assert!(
            timeline.iter().any(|change| change.reason == "retried"),
            "{timeline:?}"
        );
    }
}

async fn a_forced_retry_replays_the_childs_failure(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Parent).register(Child).task(Lookup))
        .await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    set_broken(&key, true);
    let run = h.client.start::<Parent>(key.clone()).await.unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    // Fixed, but the parent is forced alone: it replays the failure it recorded.
    set_broken(&key, false);
    let forced = run.retry(RetryOptions::default().force()).await.unwrap();
    assert_eq!(forced.attempts, 2);
    let again = h.reach_next(&run, RunStatus::Failed, &forced).await;
    assert_eq!(again.error.as_ref().unwrap().kind, "child_failed");
    assert_eq!(again.attempts, 2);
    assert_eq!(
        h.store.load_history(run.id()).await.unwrap().children[0].status,
        RunStatus::Failed,
        "the child was not retried"
    );
    assert!(failed.revision < again.revision);
}

/// A cancelled child cannot be retried: the retry with `rerun_child` says so, and changes
/// nothing.
async fn a_cancelled_child_is_not_retried(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(Parent).register(Child).task(Lookup))
        .await;
    let key = format!("key-{}", uuid::Uuid::new_v4());
    // No worker serves the child's pool: it waits queued until cancelled.
    h.deploy(|w| w.register(Parent)).await;
    let run = h.client.start::<Parent>(key).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    let child_id = h.store.load_history(run.id()).await.unwrap().children[0].id;
    h.client.any_run(child_id).cancel().await.unwrap();
    let failed = h.reach(&run, RunStatus::Failed).await;
    let refused = run
        .retry(RetryOptions::default().rerun_child())
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            ClientError::ChildNotRetryable {
                status: RunStatus::Cancelled,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(
        h.store.get_run(run.id()).await.unwrap().revision,
        failed.revision
    );
}

on_every_backend!(
    a_parent_failed_by_its_child_completes_after_a_retry_with_the_child,
    a_forced_retry_replays_the_childs_failure,
    a_cancelled_child_is_not_retried,
);
