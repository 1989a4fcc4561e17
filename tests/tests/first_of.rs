//! A first-of wait over a child run and an event (`select!` over `child.wait()` and an event
//! wait): the run is woken by whichever comes first, on every backend. The run is stored as
//! `awaiting_child_workflow` (a child outranks an event in the status label), and the event
//! must wake it all the same.

use std::time::Duration;

use aiki::{Run, RunStatus, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};

const MINUTE: Duration = Duration::from_secs(60);

/// Sleeps `input` minutes, then answers.
#[aiki::workflow(name = "first-of-child", version = "1")]
async fn first_of_child(run: &Run, input: u32) -> Result<String, WorkflowError> {
    run.sleep("work", MINUTE * input).await?;
    Ok(format!("child done after {input} min"))
}

/// Waits for its child, or for `cancel`, whichever comes first.
#[aiki::workflow(name = "first-of-parent", version = "1", events(cancel = String))]
async fn first_of_parent(run: &Run, input: u32) -> Result<String, WorkflowError> {
    let child = run.child::<FirstOfChild>(input).await?;
    tokio::select! {
        done = child.wait() => done,
        reason = run.events().cancel().wait() => Ok(format!("cancelled: {}", reason?)),
    }
}

/// The event comes first: it wakes the run while its child still sleeps.
async fn an_event_wakes_a_run_also_awaiting_a_child(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(FirstOfParent).register(FirstOfChild))
        .await;
    let run = h.client.start::<FirstOfParent>(60).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    let wait = waiting.wait.expect("a wait set");
    assert_eq!((wait.children.len(), wait.events.len()), (1, 1), "{wait:?}");
    run.send::<FirstOfParentCancel>("changed my mind".to_owned())
        .await
        .unwrap();
    // No time moves: only the event can wake the parent (its child sleeps an hour).
    assert_eq!(run.result().await.unwrap(), "cancelled: changed my mind");
    let reasons: Vec<String> = h
        .store
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .map(|change| change.reason)
        .collect();
    assert!(
        reasons.iter().any(|reason| reason == "an event arrived"),
        "{reasons:?}"
    );
}

/// The child ends first: its end wakes the run, which returns the child's output; the event
/// sent afterwards changes nothing.
async fn a_child_wakes_a_run_also_awaiting_an_event(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(FirstOfParent).register(FirstOfChild))
        .await;
    let run = h.client.start::<FirstOfParent>(1).await.unwrap();
    h.reach(&run, RunStatus::AwaitingChildWorkflow).await;
    let child = h.store.load_history(run.id()).await.unwrap().children[0].id;
    h.reach(&h.client.handle::<FirstOfChild>(child), RunStatus::Sleeping)
        .await;
    h.advance(MINUTE);
    assert_eq!(run.result().await.unwrap(), "child done after 1 min");
    let reasons: Vec<String> = h
        .store
        .timeline(run.id())
        .await
        .unwrap()
        .into_iter()
        .map(|change| change.reason)
        .collect();
    assert!(
        reasons.iter().any(|reason| reason == "a child run ended"),
        "{reasons:?}"
    );
}

on_every_backend!(
    an_event_wakes_a_run_also_awaiting_a_child,
    a_child_wakes_a_run_also_awaiting_an_event,
);
