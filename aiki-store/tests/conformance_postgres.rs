//! The conformance suite against PostgreSQL, in a fresh database per run of this test binary
//! (`aiki_store_test_<pid>_<random>`, created through `AIKI_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`). Databases left by earlier runs whose process
//! is gone are dropped first. Without a server the tests are skipped with a loud message,
//! unless `CI=true`, where they fail.
#![cfg(feature = "postgres")]

mod support;

use aiki_store::Store;
use aiki_store::conformance::Fixture;
use aiki_store::postgres::{ClaimClock, PostgresOptions, PostgresStore};

/// A store on this binary's test database, or `None` (skipped) without a server.
struct TestDatabase(Option<PostgresStore>);

impl Fixture for TestDatabase {
    fn store(&self) -> Option<&dyn Store> {
        self.0.as_ref().map(|store| store as &dyn Store)
    }
}

async fn test_database() -> TestDatabase {
    let Some(url) = support::postgres::shared_database().await else {
        return TestDatabase(None);
    };
    TestDatabase(Some(
        // The suite passes its own times; the server's clock would not follow them.
        PostgresStore::connect_with(PostgresOptions::new(url).claim_clock(ClaimClock::Caller))
            .await
            .expect("the PostgreSQL store opens"),
    ))
}

aiki_store::conformance_tests!(test_database());
