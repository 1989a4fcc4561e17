//! The publisher: follows the store's change stream and mirrors the queued runs into Redis.

use std::sync::Arc;
use std::time::Duration;

use aiki_store::{ChangeCursor, ExecutorStore, ListRuns, MAX_PAGE, RunFilter, RunStatus};

use super::queue_key;

/// How long the publisher waits for Redis to connect or answer (its connection's timeouts).
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);

/// Mirrors the runs that become `queued` into Redis, one sorted set per workflow version and
/// pool (see the [module](super) docs). On (re)connecting to Redis, and after any failure of
/// Redis or the store, it republishes every run queued at that moment and follows the change
/// stream from there, so a Redis restarted empty is filled again and nothing queued is left out.
/// While caught up it waits for the store's ready hints (PostgreSQL) or reads the stream every
/// 10 ms (SQLite), and pings Redis every second, so a restart is noticed while idle too.
/// Several publishers on one store publish the same runs again, which changes nothing.
pub struct RedisPublisher {
    client: redis::Client,
    store: Arc<dyn ExecutorStore>,
}

impl std::fmt::Debug for RedisPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisPublisher")
            .field("redis", &self.client.get_connection_info().addr)
            .field("store", &self.store.backend())
            .finish()
    }
}

/// A started publisher: dropping it (or [`stop`](RedisPublisherHandle::stop)) stops it.
#[derive(Debug)]
pub struct RedisPublisherHandle {
    task: tokio::task::JoinHandle<()>,
}

impl RedisPublisherHandle {
    /// Stops publishing.
    pub fn stop(self) {}
}

impl Drop for RedisPublisherHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why a publishing session ended.
#[derive(Debug, thiserror::Error)]
enum SessionEnd {
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("the store: {0}")]
    Store(#[from] aiki_store::StoreError),
}

impl RedisPublisher {
    /// A publisher from `store` into the Redis at `url` (`redis://host:port/db`). Fails only
    /// on a malformed URL; Redis need not be up yet.
    pub fn new(url: &str, store: Arc<dyn ExecutorStore>) -> Result<Self, redis::RedisError> {
        Ok(RedisPublisher {
            client: redis::Client::open(url)?,
            store,
        })
    }

    /// Starts publishing on the current tokio runtime.
    pub fn start(self) -> RedisPublisherHandle {
        RedisPublisherHandle {
            task: tokio::spawn(self.run()),
        }
    }

    async fn run(self) {
        let mut backoff = Duration::from_millis(50);
        loop {
            let started = tokio::time::Instant::now();
            let Err(end) = self.publish().await;
            tracing::warn!(error = %end, "the Redis publisher stopped; republishing once it can");
            if started.elapsed() > Duration::from_secs(10) {
                backoff = Duration::from_millis(50);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// Publishes until something fails.
    async fn publish(&self) -> Result<std::convert::Infallible, SessionEnd> {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(REDIS_TIMEOUT)
            .set_response_timeout(REDIS_TIMEOUT);
        let mut redis = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        // Where the stream stands before the queued runs are listed: a run queued after the
        // listing is in the stream from here.
        let mut cursor = self
            .store
            .changes_since(&ChangeCursor::start(), 0)
            .await?
            .next;
        let republished = self.republish(&mut redis).await?;
        tracing::info!(
            runs = republished,
            "the Redis publisher published the queued runs"
        );
        let mut hints = self
            .store
            .ready_signals()
            .map(|signals| signals.subscribe());
        let mut pinged = tokio::time::Instant::now();
        loop {
            let page = self.store.changes_since(&cursor, 256).await?;
            let mut pipe = redis::pipe();
            let mut commands = 0;
            for change in &page.changes {
                let key = queue_key(&change.namespace, &change.pool);
                let member = change.run_id.to_string();
                if change.to == RunStatus::Queued {
                    pipe.zadd(key, member, change.at).ignore();
                    commands += 1;
                } else if change.from == Some(RunStatus::Queued) {
                    pipe.zrem(key, member).ignore();
                    commands += 1;
                }
            }
            if commands > 0 {
                pipe.query_async::<()>(&mut redis).await?;
            }
            cursor = page.next;
            if !page.changes.is_empty() {
                continue;
            }
            if pinged.elapsed() >= Duration::from_secs(1) {
                redis::cmd("PING").query_async::<()>(&mut redis).await?;
                pinged = tokio::time::Instant::now();
            }
            match &mut hints {
                Some(hints) => {
                    let _ = tokio::time::timeout(Duration::from_secs(1), hints.recv()).await;
                }
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// Adds every run queued now to its set; how many.
    async fn republish(
        &self,
        redis: &mut redis::aio::MultiplexedConnection,
    ) -> Result<usize, SessionEnd> {
        let mut request = ListRuns::new(RunFilter::default().status(RunStatus::Queued), MAX_PAGE);
        let mut published = 0;
        loop {
            let page = self.store.list_runs(request.clone()).await?;
            let mut pipe = redis::pipe();
            for run in &page.runs {
                let at = run.queued_at.unwrap_or(run.created_at);
                pipe.zadd(queue_key(&run.namespace, &run.pool), run.id.to_string(), at)
                    .ignore();
            }
            if !page.runs.is_empty() {
                pipe.query_async::<()>(redis).await?;
            }
            published += page.runs.len();
            match page.next {
                Some(next) => request = request.after(Some(next)),
                None => return Ok(published),
            }
        }
    }
}
