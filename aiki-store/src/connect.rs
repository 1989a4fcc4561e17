use std::sync::Arc;

use crate::{BoxStore, Connection, MigrationMode, StoreError};

/// Opens the database a URL names, with every role, applying migrations
/// ([`MigrationMode::Apply`]):
///
/// * `memory:` — [`MemoryStore`](crate::memory::MemoryStore), not durable;
/// * `sqlite://path/to/file.db` or `sqlite:path/to/file.db` (created if missing), or
///   `sqlite::memory:` — feature `sqlite`;
/// * `postgres://user@host:port/db` or `postgresql://…` — feature `postgres`.
///
/// An aiki server's URL is [`open`]'s business: a server serves some roles, not a whole store.
/// An unknown scheme, or one whose feature is off, is [`StoreError::UnsupportedUrl`]; a
/// database server that does not answer is [`StoreError::Unavailable`].
pub async fn connect(url: &str) -> Result<BoxStore, StoreError> {
    connect_with_mode(url, MigrationMode::Apply).await
}

/// Opens the database a URL names, doing with its schema what `mode` says: operator tools
/// pass [`MigrationMode::Check`], so that they never migrate a database that workers of another
/// release use, and refuse a schema they would misread.
pub async fn connect_with_mode(url: &str, mode: MigrationMode) -> Result<BoxStore, StoreError> {
    if is_server(url) {
        return Err(unsupported(
            url,
            "an aiki server serves the executor, client and read roles, not a whole store: \
             open it with `aiki::connect` or `aiki_store::open`",
        ));
    }
    Ok(open(url, mode)
        .await?
        .whole()
        .expect("a database has every role"))
}

/// What a URL reaches, as clients, workers and operator tools take it: the database
/// [`connect_with_mode`] opens (every role), or, for `http://host:port` (feature `http`;
/// `https://` with `http-tls`), an [`HttpStore`](crate::http::HttpStore) on an `aiki-server`
/// (the executor, client and read roles; its schema is the server's business, so `mode` does
/// not apply), sending the API key in the `AIKI_API_KEY` environment variable if set, its
/// claims long-polling the server for up to 5 s.
pub async fn open(url: &str, mode: MigrationMode) -> Result<Connection, StoreError> {
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    let _ = mode; // only the databases migrate
    if url == "memory:" {
        return Ok(Arc::new(crate::memory::MemoryStore::new()));
    }
    if url.starts_with("sqlite:") {
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(
            crate::sqlite::SqliteStore::connect_with(
                crate::sqlite::SqliteOptions::new(url).migration(mode),
            )
            .await?,
        ));
        #[cfg(not(feature = "sqlite"))]
        return Err(unsupported(
            url,
            "this build has no SQLite support: enable the `sqlite` feature of `aiki` \
             (on by default; `features = [\"sqlite\"]` on the `aiki` dependency)",
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(
            crate::postgres::PostgresStore::connect_with(
                crate::postgres::PostgresOptions::new(url).migration(mode),
            )
            .await?,
        ));
        #[cfg(not(feature = "postgres"))]
        return Err(unsupported(
            url,
            "this build has no PostgreSQL support: enable the `postgres` feature of `aiki` \
             (`features = [\"postgres\"]` on the `aiki` dependency in Cargo.toml)",
        ));
    }
    if is_server(url) {
        #[cfg(feature = "http")]
        {
            let store =
                crate::http::HttpStore::new(url)?.long_poll(std::time::Duration::from_secs(5));
            return Ok(Arc::new(match std::env::var("AIKI_API_KEY") {
                Ok(key) if !key.is_empty() => store.with_key(key),
                _ => store,
            }));
        }
        #[cfg(not(feature = "http"))]
        return Err(unsupported(
            url,
            "this build cannot reach an aiki server: enable the `http` feature of `aiki` \
             (`features = [\"http\"]` on the `aiki` dependency in Cargo.toml)",
        ));
    }
    Err(unsupported(url, "no enabled backend serves this scheme"))
}

fn is_server(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

fn unsupported(url: &str, reason: &str) -> StoreError {
    StoreError::UnsupportedUrl {
        url: crate::error::redact(url),
        reason: reason.to_owned(),
    }
}

/// Brings the schema of the store a URL names up to this release's (what `aiki migrate`
/// does), and says what it found and applied. A schema a newer release migrated is left as it
/// is when it admits this release (see [`MigrationReport`](crate::MigrationReport)).
pub async fn migrate(url: &str) -> Result<crate::MigrationReport, StoreError> {
    if url.starts_with("sqlite:") {
        #[cfg(feature = "sqlite")]
        {
            let store = crate::sqlite::SqliteStore::connect(url).await?;
            let report = store.migration_report().clone();
            store.close().await;
            return Ok(report);
        }
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        {
            let store = crate::postgres::PostgresStore::connect(url).await?;
            let report = store.migration_report().clone();
            store.close().await;
            return Ok(report);
        }
    }
    // The memory store has no schema; an unsupported URL says why.
    connect_with_mode(url, MigrationMode::Apply).await?;
    Ok(crate::MigrationReport::default())
}
