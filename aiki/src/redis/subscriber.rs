//! The subscriber: blocks on the sorted sets of the versions a worker serves.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aiki_store::{Namespace, Ready, RunId};
use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::Instant;

use super::queue_key;
use crate::Subscriber;

/// The safety poll's default interval.
const SAFETY_POLL: Duration = Duration::from_secs(5);

/// The longest one `BZPOPMIN` blocks, so that a wake-up raised in this process is looked at
/// within it.
const LONGEST_BLOCK: Duration = Duration::from_secs(1);

/// Tells a worker which run may be ready by popping the sets the [`RedisPublisher`] fills
/// (see the [module](super) docs): `BZPOPMIN` over the keys of the versions and pool the worker
/// serves, on a connection of its own, their order rotated on each call (the command favours the
/// first key that has members). Each popped run is a [`Ready::Run`] hint; when nothing comes
/// for the safety poll's interval (5 s by default) it says [`Ready::Anything`], so the worker
/// polls the store. While Redis is down it reconnects (backing off up to 1 s) and the worker
/// falls back to that poll; nothing is lost, since the runs stay queued in the store and the
/// publisher republishes them once Redis is back.
///
/// [`RedisPublisher`]: super::RedisPublisher
pub struct RedisSubscriber {
    client: redis::Client,
    safety_poll: Duration,
    /// The keys served and what each holds.
    keys: Mutex<Vec<(String, Namespace, String)>>,
    turn: AtomicUsize,
    connection: tokio::sync::Mutex<Option<redis::aio::MultiplexedConnection>>,
    local: tokio::sync::Mutex<watch::Receiver<u64>>,
}

impl std::fmt::Debug for RedisSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSubscriber")
            .field("redis", &self.client.get_connection_info().addr)
            .field("safety_poll", &self.safety_poll)
            .finish_non_exhaustive()
    }
}

impl RedisSubscriber {
    /// A subscriber on the Redis at `url` (`redis://host:port/db`). Fails only on a malformed
    /// URL; Redis need not be up yet.
    pub fn new(url: &str) -> Result<Self, redis::RedisError> {
        Ok(RedisSubscriber {
            client: redis::Client::open(url)?,
            safety_poll: SAFETY_POLL,
            keys: Mutex::new(Vec::new()),
            turn: AtomicUsize::new(0),
            connection: tokio::sync::Mutex::new(None),
            local: tokio::sync::Mutex::new(crate::wake::subscribe()),
        })
    }

    /// Says [`Ready::Anything`] when no run was popped for `interval` (default 5 s), so the
    /// worker polls the store.
    pub fn safety_poll(mut self, interval: Duration) -> Self {
        self.safety_poll = interval;
        self
    }

    /// The keys in this call's order.
    fn rotated_keys(&self) -> Vec<(String, Namespace, String)> {
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone();
        if !keys.is_empty() {
            let turn = self.turn.fetch_add(1, Ordering::Relaxed) % keys.len();
            keys.rotate_left(turn);
        }
        keys
    }
}

#[async_trait]
impl Subscriber for RedisSubscriber {
    fn serve(&self, namespaces: &[Namespace], pool: &str) {
        *self
            .keys
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = namespaces
            .iter()
            .map(|namespace| {
                (
                    queue_key(namespace, pool),
                    namespace.clone(),
                    pool.to_owned(),
                )
            })
            .collect();
    }

    async fn next_signal(&self) -> Ready {
        let deadline = Instant::now() + self.safety_poll;
        let mut backoff = Duration::from_millis(50);
        let mut connection = self.connection.lock().await;
        let mut local = self.local.lock().await;
        loop {
            if local.has_changed().unwrap_or(false) {
                local.borrow_and_update();
                return Ready::Anything;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ready::Anything;
            }
            let keys = self.rotated_keys();
            if keys.is_empty() {
                tokio::time::sleep(left).await;
                return Ready::Anything;
            }
            if connection.is_none() {
                match tokio::time::timeout(
                    Duration::from_secs(5),
                    self.client.get_multiplexed_async_connection(),
                )
                .await
                {
                    Ok(Ok(fresh)) => {
                        backoff = Duration::from_millis(50);
                        *connection = Some(fresh);
                    }
                    failed => {
                        tracing::debug!(
                            ?failed,
                            "Redis is not answering; the store poll stands in"
                        );
                        tokio::time::sleep(backoff.min(left)).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                        continue;
                    }
                }
            }
            let Some(redis) = connection.as_mut() else {
                continue;
            };
            let block = left.min(LONGEST_BLOCK);
            let mut command = redis::cmd("BZPOPMIN");
            for (key, _, _) in &keys {
                command.arg(key);
            }
            command.arg(block.as_secs_f64());
            let popped = tokio::time::timeout(
                block + Duration::from_secs(5),
                command.query_async::<Option<(String, String, f64)>>(redis),
            )
            .await;
            match popped {
                Ok(Ok(Some((key, member, _score)))) => {
                    let Some((_, namespace, pool)) = keys.into_iter().find(|(k, _, _)| *k == key)
                    else {
                        continue;
                    };
                    match member.parse::<RunId>() {
                        Ok(run_id) => {
                            return Ready::Run {
                                run_id,
                                namespace,
                                pool,
                            };
                        }
                        Err(_) => {
                            tracing::warn!(%key, %member, "a member of an aiki queue is not a run id; skipped");
                        }
                    }
                }
                Ok(Ok(None)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "Redis failed; reconnecting (the store poll stands in)");
                    *connection = None;
                }
                Err(_) => {
                    tracing::warn!("Redis did not answer; reconnecting (the store poll stands in)");
                    *connection = None;
                }
            }
        }
    }
}
