//! Unit tests of the run context's write path.

use std::future::{Future, poll_fn};
use std::sync::Arc;
use std::task::Poll;

use aiki_store::{History, Namespace, NewRun, StoreError};
use serde_json::Value;
use tokio::sync::Notify;

use super::Run;
use super::suspend::Block;
use crate::clock::ManualClock;
use crate::task::StateMap;

async fn fresh_run() -> Run {
    let store = aiki_store::connect("memory:").await.expect("memory store");
    let record =
        NewRun::new(Namespace::new("w", "1"), Value::Null, "hash".to_owned(), 0).into_record();
    Run::from_history(
        History::new(record),
        super::RunStore::Executor(store),
        Arc::new(ManualClock::new(0)),
        Arc::new(StateMap::default()),
        Arc::default(),
    )
}

/// Item 7 of issue 10: a write made on any path (here a bare one, as the interrupted-task path
/// makes) counts as in flight, so a run blocked on a durable wait does not suspend under it.
#[tokio::test(flavor = "current_thread")]
async fn a_write_under_way_keeps_the_run_from_suspending() {
    let run = fresh_run().await;
    let _blocked = run.block(Block::Sleep {
        wake_at: 10,
        name: "nap".to_owned(),
    });
    assert!(
        run.suspension().is_some(),
        "blocked and idle: it may suspend"
    );
    let gate = Arc::new(Notify::new());
    let op = |_store| {
        let gate = gate.clone();
        async move {
            gate.notified().await;
            Ok::<_, StoreError>(())
        }
    };
    let mut write = std::pin::pin!(run.write(op));
    let first = poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "the write waits on its gate");
    assert_eq!(
        run.suspension(),
        None,
        "a run must not suspend while a write is under way"
    );
    gate.notify_one();
    write.await.expect("the write succeeds");
    assert!(run.suspension().is_some(), "the write ended");
}
