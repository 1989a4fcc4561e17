//! The roles of the store a worker works on.

use std::fmt;
use std::sync::Arc;

use aiki_store::{BoxStore, Connection, ExecutorStore, Sweeper};

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

/// A database's connection executes and sweeps; a server's only executes (its leader sweeps).
impl From<Connection> for WorkerStore {
    fn from(store: Connection) -> Self {
        WorkerStore {
            executor: store.clone(),
            sweeper: store.whole().map(|whole| whole as Arc<dyn Sweeper>),
        }
    }
}

impl From<&Connection> for WorkerStore {
    fn from(store: &Connection) -> Self {
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
