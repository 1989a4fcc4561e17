//! Leases: one holder at a time, renewal, takeover after expiry with a new token, giving up,
//! and the fence on sweeps. The fenced sweep holds [`SWEEPS`](super::SWEEPS) and works at
//! [`GLOBAL_TIME`](super::GLOBAL_TIME).

use super::*;

/// A lease has one holder until it expires; its holder renews it with the same token; another
/// takes it over after expiry with a new token, or at once when it was given up.
pub async fn check_a_lease_has_one_holder_at_a_time(store: &dyn Store) {
    let now = LOCAL_TIME;
    let name = format!("lease-{}", RunId::new());
    let a = store
        .acquire_lease(&name, "a", 1_000, now)
        .await
        .expect("a");
    assert_eq!((a.holder.as_str(), a.expires_at), ("a", now + 1_000));
    let refused = store
        .acquire_lease(&name, "b", 1_000, now + 10)
        .await
        .expect("b");
    assert_eq!(refused, a, "b sees a's lease and does not take it");
    let renewed = store
        .acquire_lease(&name, "a", 1_000, now + 500)
        .await
        .expect("renew");
    assert_eq!(
        (renewed.holder.as_str(), renewed.token, renewed.expires_at),
        ("a", a.token, now + 1_500),
        "renewal keeps the token"
    );
    let b = store
        .acquire_lease(&name, "b", 1_000, now + 1_500)
        .await
        .expect("takeover");
    assert_eq!(b.holder, "b", "an expired lease is taken over");
    assert!(b.token > a.token, "with a new token: {b:?} after {a:?}");
    store
        .release_lease(&renewed, now + 1_600)
        .await
        .expect("a lapsed holder gives up");
    assert_eq!(
        store
            .acquire_lease(&name, "c", 1_000, now + 1_700)
            .await
            .expect("c")
            .holder,
        "b",
        "giving up a lease that changed hands does nothing"
    );
    store
        .release_lease(&b, now + 1_800)
        .await
        .expect("b gives up");
    let c = store
        .acquire_lease(&name, "c", 1_000, now + 1_900)
        .await
        .expect("c");
    assert_eq!(c.holder, "c", "a lease given up is free at once");
    assert!(c.token > b.token);
}

/// A sweep under a lease that changed hands does nothing; under the current one it sweeps.
pub async fn check_a_lapsed_leases_sweeps_do_nothing(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = GLOBAL_TIME;
    let name = format!("lease-{}", RunId::new());
    let frozen = store
        .acquire_lease(&name, "frozen", 1_000, now)
        .await
        .expect("frozen");
    let successor = store
        .acquire_lease(&name, "successor", 1_000, now + 1_000)
        .await
        .expect("successor");
    assert_eq!(successor.holder, "successor");
    let mut due = new_run(&namespace(), RunStatus::Scheduled, now);
    due.due_at = Some(now + 100);
    let due = create(store, due).await;
    assert_eq!(
        store
            .wake_due(&frozen, now + 1_100, 100)
            .await
            .expect("fenced sweep"),
        0,
        "the lapsed holder's sweep moves nothing"
    );
    assert_eq!(store.get_run(due.id).await.expect("get_run"), due);
    assert!(
        store
            .wake_due(&successor, now + 1_100, 100)
            .await
            .expect("sweep")
            >= 1
    );
    assert_eq!(
        store.get_run(due.id).await.expect("get_run").status,
        RunStatus::Queued
    );
}
