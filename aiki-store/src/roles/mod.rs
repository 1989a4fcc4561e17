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
mod endpoints;
mod executor;
mod keys;
mod read;
mod sweeper;

use std::sync::Arc;

pub use client::ClientStore;
pub use endpoints::EndpointStore;
pub use executor::ExecutorStore;
pub use keys::KeyStore;
pub use read::ReadStore;
pub use sweeper::Sweeper;

/// The role traits, for calling their methods on a [`Store`] (or on any role): `use
/// aiki_store::prelude::*;`.
pub mod prelude {
    pub use super::{
        ClientStore, Connected, EndpointStore, ExecutorStore, KeyStore, ReadStore, Store, Sweeper,
    };
}

/// A shared, type-erased store offering every role.
pub type BoxStore = Arc<dyn Store>;

/// The whole store contract: every role. It has no methods of its own; any type implementing
/// the roles is a `Store`.
pub trait Store: ExecutorStore + ClientStore + Sweeper + KeyStore + EndpointStore {}

impl<T: ExecutorStore + ClientStore + Sweeper + KeyStore + EndpointStore + ?Sized> Store for T {}

/// A store as a URL reaches it ([`open`](crate::open)), as clients and workers take it: a
/// database offers every role, an aiki server ([`HttpStore`](crate::http::HttpStore)) the
/// executor, client and read roles. A [`Connection`] is a `ClientStore` and an
/// `ExecutorStore` as it is; [`whole`](Connected::whole) says whether it is also the rest.
pub trait Connected: ExecutorStore + ClientStore {
    /// The whole store when this is a database, so the daemons may sweep it and keys be
    /// written to it; `None` for a server, whose own leader sweeps.
    fn whole(self: Arc<Self>) -> Option<BoxStore>;
}

/// A shared, type-erased [`Connected`] store: what [`open`](crate::open) gives.
pub type Connection = Arc<dyn Connected>;

impl<T: Store> Connected for T {
    fn whole(self: Arc<Self>) -> Option<BoxStore> {
        Some(self)
    }
}
