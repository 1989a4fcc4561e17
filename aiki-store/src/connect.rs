use std::sync::Arc;

use crate::{BoxStore, MigrationMode, StoreError};

/// Opens the store a URL names, applying migrations ([`MigrationMode::Apply`]):
///
/// * `memory:` — [`MemoryStore`](crate::memory::MemoryStore), not durable;
/// * `sqlite://path/to/file.db` or `sqlite:path/to/file.db` (created if missing), or
///   `sqlite::memory:` — feature `sqlite`;
/// * `postgres://user@host:port/db` or `postgresql://…` — feature `postgres`.
///
/// An unknown scheme, or one whose feature is off, is [`StoreError::UnsupportedUrl`]; a
/// database server that does not answer is [`StoreError::Unavailable`].
pub async fn connect(url: &str) -> Result<BoxStore, StoreError> {
    connect_with_mode(url, MigrationMode::Apply).await
}

/// Opens the store a URL names, doing with its schema what `mode` says: operator tools pass
/// [`MigrationMode::Check`], so that they never migrate a database that workers of another
/// release use, and refuse a schema they would misread.
pub async fn connect_with_mode(url: &str, mode: MigrationMode) -> Result<BoxStore, StoreError> {
    let unsupported = |reason: &str| StoreError::UnsupportedUrl {
        url: crate::error::redact(url),
        reason: reason.to_owned(),
    };
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
            "SQLite support is off: enable the `sqlite` feature of aiki-store",
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
            "PostgreSQL support is off: enable the `postgres` feature of aiki-store",
        ));
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Err(unsupported(
            "an aiki server serves the executor, client and read roles, not a whole store: \
             open it with `aiki_store::connect_client` (clients) or `aiki::WorkerStore::connect` \
             (workers), with the `http` feature",
        ));
    }
    Err(unsupported("no enabled backend serves this scheme"))
}

/// Opens the client and read roles of the store a URL names: what [`connect_with_mode`] opens,
/// or, for `http://host:port` (feature `http`; `https://` with `http-tls`), an
/// [`HttpStore`](crate::http::HttpStore) on an `aiki-server`, whose schema is the server's
/// business (`mode` does not apply), sending the API key in the `AIKI_API_KEY` environment
/// variable if set.
pub async fn connect_client(
    url: &str,
    mode: MigrationMode,
) -> Result<Arc<dyn crate::ClientStore>, StoreError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        #[cfg(feature = "http")]
        {
            let store = crate::http::HttpStore::new(url)?;
            return Ok(Arc::new(match std::env::var("AIKI_API_KEY") {
                Ok(key) if !key.is_empty() => store.with_key(key),
                _ => store,
            }));
        }
        #[cfg(not(feature = "http"))]
        return Err(StoreError::UnsupportedUrl {
            url: crate::error::redact(url),
            reason: "reaching an aiki server is off: enable the `http` feature of aiki-store"
                .to_owned(),
        });
    }
    Ok(connect_with_mode(url, mode).await?)
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
