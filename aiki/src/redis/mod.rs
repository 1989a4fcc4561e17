//! Delivery through Redis (feature `redis`): a [`RedisPublisher`] adds every run that becomes
//! `queued` to a sorted set per workflow version and pool, scored by when it was queued; a
//! [`RedisSubscriber`] blocks on the sets its worker serves and tells the worker which run may
//! be ready. Redis only carries hints: the claim stays the store's fenced transition, so a
//! message lost, repeated or left behind never runs a run twice, and the worker's store poll
//! (at most every 5 s) stays on as the safety net.
//!
//! The keys are `aiki:workflow:<name>:<version>` for the `default` pool and
//! `aiki:workflow:<name>:<version>:<pool>` for any other; each member is a run id. Runs due
//! later (a delayed start, a retry, a sleep) are published when they come due, never ahead: the
//! publisher follows the store's change stream, where a run appears when it is queued. A run
//! that leaves `queued` (claimed, paused, cancelled) is taken out of its set again.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = aiki::connect("postgres://localhost/app").await?;
//! // One publisher per deployment is enough (more only publish the same runs again).
//! let _publisher = aiki::redis::RedisPublisher::new("redis://127.0.0.1/", store.clone())?.start();
//! let worker = aiki::Worker::builder(store)
//!     .subscriber(aiki::redis::RedisSubscriber::new("redis://127.0.0.1/")?)
//!     .build()?; // .register(MyWorkflow) first
//! let _running = worker.start();
//! # Ok(()) }
//! ```

mod publisher;
mod subscriber;

use aiki_store::Namespace;

pub use publisher::{RedisPublisher, RedisPublisherHandle};
pub use subscriber::RedisSubscriber;

/// The sorted set of the runs of `namespace` queued in `pool`.
pub fn queue_key(namespace: &Namespace, pool: &str) -> String {
    if pool == "default" {
        format!("aiki:workflow:{}:{}", namespace.workflow, namespace.version)
    } else {
        format!(
            "aiki:workflow:{}:{}:{pool}",
            namespace.workflow, namespace.version
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_the_version_and_any_pool_but_the_default() {
        let orders = Namespace::new("orders", "2");
        assert_eq!(queue_key(&orders, "default"), "aiki:workflow:orders:2");
        assert_eq!(queue_key(&orders, "gpu"), "aiki:workflow:orders:2:gpu");
    }
}
