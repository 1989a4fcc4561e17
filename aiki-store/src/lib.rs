//! Storage for [Aiki](https://docs.rs/aiki) durable workflows.
//!
//! This crate owns the data model (run ids, revisions, statuses and the records a run's
//! history is made of), the [`Store`] trait every backend implements, and the backends:
//!
//! * [`memory::MemoryStore`]: in process, for fast tests. Always available.
//! * `sqlite::SqliteStore` (feature `sqlite`, on by default): the embedded default.
//! * `postgres::PostgresStore` (feature `postgres`): many worker machines, one database.
//!
//! [`connect`] picks a backend from a URL; [`open`] also reaches an aiki server. The
//! `conformance` module (feature `conformance`) is the one test suite every backend must pass.
//! [`api`] names the routes and bodies of the HTTP API an `aiki-server` serves the contract
//! with, and `http::HttpStore` (feature `http`) is its client: the executor, client and read
//! roles over HTTP ([`open`] opens one from a URL).
//!
//! The store knows nothing of workflow semantics beyond what must be atomic: every write an
//! executor makes carries the revision it last saw, and the store checks it (and, for run
//! transitions, increments it) in the same statement or transaction that applies the write.

pub mod api;
pub mod batch;
pub mod bounds;
mod connect;
mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod limit;
pub mod memory;
mod migration;
mod model;
pub mod operation;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "push")]
pub mod push;
mod ready;
// `SqlStore<D>`'s impls are bounded by the crate's own `Dialect` trait: users name
// `SqliteStore` and `PostgresStore`, never a dialect of their own (the trait is sealed).
mod roles;
pub mod schedule;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[allow(private_bounds)]
mod sql;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod status;
mod wire;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use connect::{connect, connect_with_mode, migrate, open};
pub use error::StoreError;
pub use migration::{AppliedMigration, MigrationMode, MigrationReport};
pub use model::*;
pub use ready::{Ready, ReadyReceiver, ReadySignals};
pub use roles::{
    BoxStore, ClientStore, Connected, Connection, EndpointStore, ExecutorStore, KeyStore,
    ReadStore, Store, Sweeper, prelude,
};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use sql::SqlStore;
pub use status::{RunStatus, UnknownStatus};
pub use wire::{ErrorBody, RUNTIME_CODES};
