//! The conformance suite against SQLite: a fresh temporary file per test, and the in-memory
//! database.

use std::path::PathBuf;

use aiki_store::conformance::Fixture;
use aiki_store::{BoxStore, RunId, Store};

/// A store on a temporary database file, removed when the test ends.
struct TempDatabase {
    store: BoxStore,
    path: PathBuf,
}

impl Fixture for TempDatabase {
    fn store(&self) -> Option<&dyn Store> {
        Some(&*self.store)
    }
}

impl Drop for TempDatabase {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

async fn temp_database() -> TempDatabase {
    let path = std::env::temp_dir().join(format!("aiki-conformance-{}.db", RunId::new()));
    let store = aiki_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("the SQLite store opens");
    TempDatabase { store, path }
}

mod file {
    use super::temp_database;

    aiki_store::conformance_tests!(temp_database());
}

mod in_memory {
    aiki_store::conformance_tests!(async {
        aiki_store::connect("sqlite::memory:")
            .await
            .expect("the in-memory SQLite store opens")
    });
}
