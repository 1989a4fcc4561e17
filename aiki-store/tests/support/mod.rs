//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod cancel;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod records;

use std::path::{Path, PathBuf};

use aiki_store::RunId;

/// A temporary database file, removed (with its WAL files) when dropped.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new() -> Self {
        TempFile(std::env::temp_dir().join(format!("aiki-sqlite-{}.db", RunId::new())))
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(Path::new(&path));
        }
    }
}
