//! Futures spawned onto other tokio tasks keep reporting to the subscriber current where they
//! were spawned, while they run and while they are dropped.
//!
//! `tracing`'s own `WithDispatch` sets the subscriber only while polling. A future dropped
//! elsewhere (an execution aborted with its worker, a task attempt aborted with its run) then
//! closes its spans under whatever subscriber is the default there, and
//! `tracing-subscriber`'s registry closes a span's parent through the default subscriber: the
//! parent (an execution span) would never close, and never be exported.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Dispatch;
use tracing::subscriber::NoSubscriber;

/// A future that runs, and is dropped, with `dispatch` as the default subscriber.
pub(crate) struct Dispatched<F> {
    future: Option<Pin<Box<F>>>,
    /// `None` when no subscriber was current: the future then reports to whatever is the
    /// default where it runs (a global subscriber set later included), as any future does.
    dispatch: Option<Dispatch>,
}

/// `future`, reporting to the subscriber current now.
pub(crate) fn in_current_dispatch<F: Future>(future: F) -> Dispatched<F> {
    let dispatch = tracing::dispatcher::get_default(Dispatch::clone);
    Dispatched {
        future: Some(Box::pin(future)),
        dispatch: (!dispatch.is::<NoSubscriber>()).then_some(dispatch),
    }
}

/// Runs `f` with `dispatch` as the default subscriber, if there is one.
fn under<T>(dispatch: &Option<Dispatch>, f: impl FnOnce() -> T) -> T {
    match dispatch {
        Some(dispatch) => tracing::dispatcher::with_default(dispatch, f),
        None => f(),
    }
}

impl<F: Future> Future for Dispatched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let future = this
            .future
            .as_mut()
            .expect("BUG: a dispatched future polled after it completed");
        let polled = under(&this.dispatch, || future.as_mut().poll(cx));
        if polled.is_ready() {
            // Dropped here, under its subscriber, like any other end.
            let done = this.future.take();
            under(&this.dispatch, || drop(done));
        }
        polled
    }
}

impl<F> Drop for Dispatched<F> {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            under(&self.dispatch, || drop(future));
        }
    }
}
