//! A purge stays indexed however many ended runs the store holds (SQLite): it reads the ended
//! runs down `aiki_runs_ended`, oldest first, stops at its limit, and finds each run of its
//! batch by id to delete it, instead of reading every ended run by status and sorting them all
//! (SQLite plans without statistics: the store never runs `ANALYZE`).

use crate::support;

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn a_sqlite_purge_reads_the_ended_runs_in_order_and_stops_at_its_limit() {
    use aiki_store::prelude::*;
    use aiki_store::sqlite::SqliteStore;
    use aiki_store::{Namespace, PurgeRuns, RunStatus, Transition};
    use serde_json::json;
    use support::records::{claim, lease, new_run};

    let file = support::TempFile::new();
    let store = SqliteStore::connect(&file.url()).await.expect("open");
    let namespace = Namespace::new("purge-plan", "1");
    let mut ended = Vec::new();
    for at in 1..=5 {
        store
            .create_run(new_run(&namespace, at))
            .await
            .expect("create");
        let run = store
            .claim(claim(&namespace, at))
            .await
            .expect("claim")
            .runs
            .pop()
            .expect("claimed");
        let done = store
            .transition(
                run.id,
                run.revision,
                Transition::to(RunStatus::Completed, at).output(json!(1), "f"),
            )
            .await
            .expect("end");
        ended.push((done.updated_at, done.id));
    }
    ended.sort_unstable();
    let now = 10 * 3_600_000;
    let lease = lease(&store, now).await;
    let purge = PurgeRuns::new(now).limit(2);
    let plan = store.purge_plan(&lease, now, purge).await.expect("plan");
    assert!(
        plan.contains("USING INDEX aiki_runs_ended"),
        "the batch is not read down the index of ended runs:\n{plan}"
    );
    assert!(
        !plan.contains("TEMP B-TREE"),
        "the ended runs are sorted:\n{plan}"
    );
    assert!(
        !plan.contains("aiki_runs_heartbeat") && !plan.contains("SCAN aiki_runs"),
        "runs are read by status, or all of them:\n{plan}"
    );
    let purged = store.purge_runs(&lease, now, purge).await.expect("purge");
    assert_eq!(
        purged,
        [ended[0].1, ended[1].1],
        "the two that ended first, and no more"
    );
}
