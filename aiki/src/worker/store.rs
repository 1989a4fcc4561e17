//! The roles of the store a worker works on.

use std::fmt;
use std::sync::Arc;

use aiki_store::{BoxStore, ExecutorStore, Sweeper};

/// The store a [`Worker`](crate::Worker) works on: the executor role it claims and executes
/// runs through, and the sweeper role when this process may run the daemons (wake-ups, claim
/// recovery, stalling).
///
/// A store with every role (a [`BoxStore`]: SQLite, PostgreSQL, memory) gives both; a store
/// that only executes (a remote worker's, whose server sweeps) gives the executor role alone,
/// and such a worker runs no daemons.
///
/// ```
/// # async fn demo() -> Result<(), aiki::ClientError> {
/// let store = aiki::connect("memory:").await?;
/// let worker = aiki::Worker::builder(store).build()?; // executor and sweeper
/// # drop(worker);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct WorkerStore {
    pub(super) executor: Arc<dyn ExecutorStore>,
    pub(super) sweeper: Option<Arc<dyn Sweeper>>,
}

impl WorkerStore {
    /// The store a URL names, with the roles it offers a worker: a database (`sqlite://…`,
    /// `postgres://…`, `memory:`; migrated as [`connect`](crate::connect) migrates) executes
    /// and sweeps; an aiki server (`http://host:port`, feature `http`) only executes, with the
    /// API key in `AIKI_API_KEY` and its claims long-polling the server for up to 5 s (so a
    /// graceful shutdown may wait that long for the claim in flight). The same worker code
    /// serves either: only the URL changes.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), aiki::ClientError> {
    /// let url = std::env::var("AIKI_URL").unwrap_or_else(|_| "sqlite://app.db".into());
    /// let worker = aiki::Worker::builder(aiki::WorkerStore::connect(&url).await?).build()?;
    /// # drop(worker);
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, aiki_store::StoreError> {
        if url.starts_with("http://") || url.starts_with("https://") {
            #[cfg(feature = "http")]
            {
                let mut store = aiki_store::http::HttpStore::new(url)?
                    .long_poll(std::time::Duration::from_secs(5));
                if let Ok(key) = std::env::var("AIKI_API_KEY")
                    && !key.is_empty()
                {
                    store = store.with_key(key);
                }
                return Ok(WorkerStore::executor(Arc::new(store)));
            }
        }
        // Anything else is a database's URL, or unsupported (which `connect` says).
        Ok(WorkerStore::from(aiki_store::connect(url).await?))
    }

    /// A store that executes and does not sweep: the worker runs no daemons.
    pub fn executor(executor: Arc<dyn ExecutorStore>) -> Self {
        WorkerStore {
            executor,
            sweeper: None,
        }
    }

    /// Adds the sweeper role, which the worker's daemons use.
    pub fn with_sweeper(mut self, sweeper: Arc<dyn Sweeper>) -> Self {
        self.sweeper = Some(sweeper);
        self
    }

    /// Whether the worker may run the daemons on this store.
    pub fn sweeps(&self) -> bool {
        self.sweeper.is_some()
    }
}

impl From<BoxStore> for WorkerStore {
    fn from(store: BoxStore) -> Self {
        WorkerStore {
            executor: store.clone(),
            sweeper: Some(store),
        }
    }
}

impl From<&BoxStore> for WorkerStore {
    fn from(store: &BoxStore) -> Self {
        WorkerStore::from(store.clone())
    }
}

impl From<Arc<dyn ExecutorStore>> for WorkerStore {
    fn from(executor: Arc<dyn ExecutorStore>) -> Self {
        WorkerStore::executor(executor)
    }
}

impl fmt::Debug for WorkerStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerStore")
            .field("backend", &self.executor.backend())
            .field("sweeps", &self.sweeps())
            .finish()
    }
}
