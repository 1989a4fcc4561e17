//! The conformance suite through `HttpStore` and a real server, on every backend: memory,
//! a SQLite file, and PostgreSQL (skipped without a server unless `CI=true`). The servers run
//! in the test process and stamp every request by a clock shared with the checks, which each
//! call sets to the time the check gives it (the API has no clock route: a remote caller's
//! times are never taken). The servers check no key (`auth.rs` tests the keys); the sweeper
//! group goes to the backing store.

use crate::support;

use aiki_server::ServerConfig;
use support::remote::Remote;
use support::shared_time::SharedTime;

/// How the servers in front of `backing` are started.
#[derive(Clone, Copy)]
enum Servers {
    One,
    Two,
    /// One, behind a fault layer dropping every tenth write's answer.
    Faulty,
}

/// `servers` in front of `backing`, stamping requests by a clock the checks' calls set.
async fn behind(backing: aiki_store::BoxStore, servers: Servers) -> Remote {
    let time = SharedTime::new();
    let config = ServerConfig::default()
        .clock(time.clone())
        .insecure_no_auth();
    let remote = match servers {
        Servers::One => Remote::start(backing, config).await,
        Servers::Two => Remote::start_two(backing, config).await,
        Servers::Faulty => Remote::start_with_faults(backing, config, 10).await,
    };
    remote.sharing(time)
}

mod memory {
    use super::*;

    aiki_store::conformance_tests!(async {
        behind(aiki_store::connect("memory:").await.unwrap(), Servers::One).await
    });
}

/// On memory, behind a fault layer that drops the answer of every tenth write after the server
/// did it: every check passes as it does without faults, each write done once.
mod memory_through_faults {
    use super::*;

    aiki_store::conformance_tests!(async {
        behind(
            aiki_store::connect("memory:").await.unwrap(),
            Servers::Faulty,
        )
        .await
    });
}

mod sqlite {
    use super::*;

    /// A SQLite file removed when the test ends, behind a server.
    struct FileBehindServer {
        remote: Remote,
        path: std::path::PathBuf,
    }

    impl aiki_store::conformance::Fixture for FileBehindServer {
        fn store(&self) -> Option<&dyn aiki_store::Store> {
            self.remote.store()
        }
    }

    impl Drop for FileBehindServer {
        fn drop(&mut self) {
            for suffix in ["", "-wal", "-shm"] {
                let mut path = self.path.clone().into_os_string();
                path.push(suffix);
                let _ = std::fs::remove_file(path);
            }
        }
    }

    async fn file_behind_server() -> FileBehindServer {
        file_behind_servers(Servers::One).await
    }

    /// `servers` servers (one or two) in front of one SQLite file.
    async fn file_behind_servers(servers: Servers) -> FileBehindServer {
        let path = std::env::temp_dir().join(format!(
            "aiki-server-conformance-{}.db",
            aiki_store::RunId::new()
        ));
        let store = aiki_store::connect(&format!("sqlite://{}", path.display()))
            .await
            .expect("the SQLite store opens");
        let remote = behind(store, servers).await;
        FileBehindServer { remote, path }
    }

    aiki_store::conformance_tests!(file_behind_server());

    /// Two servers in front of the file, taking the calls in turn: each repeat of an
    /// operation reaches the server that did not do it.
    mod two_servers {
        use super::*;

        aiki_store::conformance_tests!(file_behind_servers(Servers::Two));
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use aiki_store::postgres::{ClaimClock, PostgresOptions, PostgresStore};

    async fn database_behind_server() -> Option<Remote> {
        database_behind_servers(Servers::One).await
    }

    /// `servers` servers (one or two) in front of the shared database.
    async fn database_behind_servers(servers: Servers) -> Option<Remote> {
        let url = support::postgres::shared_database().await?;
        // The suite passes its own times; the database's clock would not follow them.
        let store =
            PostgresStore::connect_with(PostgresOptions::new(url).claim_clock(ClaimClock::Caller))
                .await
                .expect("the PostgreSQL store opens");
        let store: aiki_store::BoxStore = std::sync::Arc::new(store);
        Some(behind(store, servers).await)
    }

    aiki_store::conformance_tests!(database_behind_server());

    /// Two servers in front of the database, taking the calls in turn.
    mod two_servers {
        use super::*;

        aiki_store::conformance_tests!(database_behind_servers(Servers::Two));
    }
}
