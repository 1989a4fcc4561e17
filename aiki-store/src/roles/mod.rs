//! The store contract, split by role: what an executor, a client, a reader and the daemons
//! each do. Every method lives in exactly one role; [`Store`] is their union, so a consumer
//! takes the roles it uses (a remote worker the executor's, a dashboard the reader's) and an API
//! key's scopes map onto them.
//!
//! Every method is one atomic operation: SQL backends implement each as one statement or one
//! transaction. Writes an executor makes carry the revision it last saw (`expected`); the store
//! compares it with the run's revision in the same operation and returns
//! [`StoreError::RevisionConflict`](crate::StoreError::RevisionConflict) on a mismatch, writing
//! nothing.

mod client;
mod executor;
mod keys;
mod read;
mod sweeper;

use std::sync::Arc;

pub use client::ClientStore;
pub use executor::ExecutorStore;
pub use keys::KeyStore;
pub use read::ReadStore;
pub use sweeper::Sweeper;

/// The role traits, for calling their methods on a [`Store`] (or on any role): `use
/// aiki_store::prelude::*;`.
pub mod prelude {
    pub use super::{ClientStore, ExecutorStore, KeyStore, ReadStore, Store, Sweeper};
}

/// A shared, type-erased store offering every role.
pub type BoxStore = Arc<dyn Store>;

/// The whole store contract: every role. It has no methods of its own; any type implementing
/// the roles is a `Store`.
pub trait Store: ExecutorStore + ClientStore + Sweeper + KeyStore {}

impl<T: ExecutorStore + ClientStore + Sweeper + KeyStore + ?Sized> Store for T {}
