//! The chaos soak (issue 10, item 15) on the SQL stores: 4 `aiki_test_worker` processes,
//! `AIKI_SOAK_RUNS` runs (200 by default, the short mode CI runs) × 5 tasks under
//! `fixed(max_attempts = 20, delay_ms = 5)`, a random worker `kill -9`ed every 200–500 ms and
//! started again, and on PostgreSQL one outage mid-load (a fault proxy in front of the server
//! drops every connection and refuses new ones for 2 s; the server is never stopped). The
//! handlers log their starts to a
//! side table: on PostgreSQL in the store's own schema, on SQLite in a file of its own next to
//! the store's. Prints the counts as a table and asserts them (see `aiki_tests::chaos`).
//! Workers talk to 127.0.0.1 only. The two soaks run one after the other.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use aiki_tests::Backend;
use aiki_tests::chaos::{Soak, WorkerCommand, WorkerSpec};
use aiki_tests::proxy::{FaultProxy, postgres_server};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Starts an `aiki_test_worker` serving the soak workflow.
fn test_worker() -> WorkerCommand {
    Box::new(|spec: WorkerSpec<'_>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_aiki_test_worker"));
        command
            .env("AIKI_WORKER_STORE_URL", spec.store_url)
            .env("AIKI_SOAK_SIDE_TABLE_URL", spec.side_table_url)
            .env("AIKI_WORKER_ID", spec.id);
        command
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_soak_under_kill_9() {
    let _serial = SERIAL.lock().await;
    let url = Backend::Sqlite.fresh_url().await;
    let side_table = format!("{url}.starts.db");
    let soak = Soak::new("SQLite", &url, &side_table, test_worker());
    let counts = soak.run().await;
    println!("{}", counts.table());
    counts.assert_clean(false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_soak_under_kill_9_and_an_outage() {
    if !aiki_tests::postgres_available().await {
        return;
    }
    let _serial = SERIAL.lock().await;
    let url = Backend::Postgres.fresh_url().await;
    assert!(
        url.contains("127.0.0.1") || url.contains("localhost"),
        "the soak's workers talk to 127.0.0.1 only: {url}"
    );
    // The workers reach the store through a fault proxy, which stands in for a restart mid-load
    // (every connection dropped, the server unreachable for a while); the side table is reached
    // directly, so that the outage never hides a start. The shared server is never stopped.
    let proxy = Arc::new(
        FaultProxy::start(postgres_server())
            .await
            .expect("the fault proxy starts"),
    );
    let mut soak = Soak::new("PostgreSQL", proxy.url_through(&url), &url, test_worker());
    // The proxy lives as long as the test: the disruption holds only a clone.
    let outage = proxy.clone();
    soak.disruption = Some(Box::new(move || {
        outage.cut();
        std::thread::sleep(Duration::from_secs(2));
        outage.restore();
        "PostgreSQL unreachable for 2 s (every connection dropped), half the runs started"
            .to_owned()
    }) as aiki_tests::chaos::Disruption);
    let counts = soak.run().await;
    drop(proxy);
    println!("{}", counts.table());
    counts.assert_clean(true);
}
