//! Reaching a store by its URL.

use aiki_store::{Connection, MigrationMode, StoreError};

/// Opens what a URL names, for a [`Client`](crate::Client) and a [`Worker`](crate::Worker)
/// alike; only the URL changes between an embedded program and a fleet:
///
/// * `sqlite://app.db` (embedded, created if missing; feature `sqlite`, on by default),
///   `postgres://user@host/db` (many worker machines on one database; feature `postgres`) or
///   `memory:` (tests): the database itself, migrated to this release's schema. A worker on it
///   also runs the daemons (wake-ups, claim recovery, stalling) under one leader.
/// * `http://host:9850` (feature `http`; `https://` with `http-tls`): an `aiki-server` in
///   front of the database, with the API key in the `AIKI_API_KEY` environment variable. A
///   worker on it claims over HTTP, long-polling for up to 5 s (so a graceful shutdown may
///   wait that long for the claim in flight), and runs no daemons: the server's leader does.
///
/// ```
/// # async fn demo() -> Result<(), aiki::ClientError> {
/// let url = std::env::var("AIKI_URL").unwrap_or_else(|_| "memory:".into());
/// let store = aiki::connect(&url).await?;
/// let client = aiki::Client::new(store.clone());
/// let worker = aiki::Worker::builder(store).build()?;
/// # drop((client, worker));
/// # Ok(()) }
/// ```
///
/// An unknown scheme, or one whose feature is off, is [`StoreError::UnsupportedUrl`]; a
/// database that does not answer is [`StoreError::Unavailable`]. What a [`Connection`] is
/// beyond the executor and client roles (a database's sweeper and key roles) is
/// [`Connected::whole`](aiki_store::Connected::whole);
/// [`aiki::store::connect`](crate::store::connect) opens a database with every role directly.
pub async fn connect(url: &str) -> Result<Connection, StoreError> {
    aiki_store::open(url, MigrationMode::Apply).await
}
