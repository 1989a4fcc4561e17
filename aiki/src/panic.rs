//! Panics contained: a panicking task or workflow becomes a recorded error, never a run left
//! `running` by a dead execution.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

/// The message a panic was raised with (`panic!("...")` payloads are `&str` or `String`).
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        (*message).to_owned()
    } else if let Some(message) = payload.downcast_ref::<String>() {
        message.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs `future`, turning a panic while it is polled into `Err(message)`.
///
/// `AssertUnwindSafe` is sound here: a future that panicked is dropped at once, never polled
/// again, and what it shared with the run (the replay state) is only changed under a lock no
/// user code holds.
pub(crate) async fn caught<F: Future>(future: F) -> Result<F::Output, String> {
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .map_err(|payload| message(&*payload))
}
