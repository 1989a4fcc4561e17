//! Cancelled operations: a store call dropped part-way (an aborted worker, a `select!`, a
//! timeout) must leave no transaction open on a pooled connection.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use aiki_store::{NewEvent, Store};
use serde_json::json;

use super::records::new_run;

/// Polls `op` at most `polls` times, letting the runtime run in between, then drops it.
async fn drop_after<F: Future>(op: F, polls: usize) {
    let mut op = pin!(op);
    for _ in 0..polls {
        if poll_fn(|cx| Poll::Ready(op.as_mut().poll(cx).is_ready())).await {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Drops event appends (each a transaction) at every point from their first poll to their
/// end, then checks that a run created afterwards through `store` is seen by `other`, another
/// store on the same database: a connection left inside a transaction would have kept it
/// uncommitted (and, on SQLite, held the write lock).
pub async fn cancelled_transactions_leave_nothing_open(store: &dyn Store, other: &dyn Store) {
    let namespace = aiki_store::Namespace::new(format!("cancel-{}", aiki_store::RunId::new()), "1");
    let run = store
        .create_run(new_run(&namespace, 1))
        .await
        .expect("run")
        .run()
        .id;
    for round in 0..200 {
        for polls in 1..=40 {
            let event = NewEvent::new(run, format!("e-{round}-{polls}"), json!(1), 2);
            drop_after(store.append_event(event), polls).await;
        }
    }
    let after = store
        .create_run(new_run(&namespace, 3))
        .await
        .expect("run")
        .run()
        .id;
    let seen = other.get_run(after).await;
    assert!(
        matches!(seen, Ok(ref record) if record.id == after),
        "a run created after cancelled transactions is not visible to another connection \
         ({seen:?}): one of them was left open"
    );
}
