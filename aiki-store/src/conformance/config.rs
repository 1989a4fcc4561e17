//! The runtime configuration: its defaults, one key set at a time and read back, bad values
//! refused, and the claim idle timeout told with every claim. The configuration is store-wide,
//! so these checks hold [`SWEEPS`](super::SWEEPS) and set back what they change.

use super::*;
use crate::ConfigKey;

/// Setting a key changes that key only, reads back, and survives as the configuration in
/// force; a value out of the key's range is refused and changes nothing.
pub async fn check_runtime_config_is_set_one_key_at_a_time(store: &dyn Store) {
    let _sweeps = SWEEPS.lock().await;
    let before = store
        .runtime_config()
        .await
        .expect("read the configuration");
    let key = ConfigKey::DaemonsLimit;
    let value = if before.daemons_limit == 123 {
        124
    } else {
        123
    };
    let after = store
        .set_config(key, value, LOCAL_TIME)
        .await
        .expect("set a key");
    assert_eq!(after, before.with(key, value).expect("in range"));
    assert_eq!(store.runtime_config().await.expect("read back"), after);
    for bad in [0, -5, 10_001] {
        let refused = store.set_config(key, bad, LOCAL_TIME + 1).await;
        assert!(
            matches!(refused, Err(StoreError::Invalid { .. })),
            "{bad} is out of range: {refused:?}"
        );
    }
    assert_eq!(
        store.runtime_config().await.expect("read again"),
        after,
        "a refused value changes nothing"
    );
    store
        .set_config(key, before.daemons_limit, LOCAL_TIME + 2)
        .await
        .expect("set it back");
}

/// A claim tells the claim idle timeout in force with the runs it took (and the store's time
/// of the claim, their heartbeat); a claim that took nothing tells nothing.
pub async fn check_a_claim_tells_the_idle_timeout_in_force(store: &dyn Store) {
    let _sweeps = SWEEPS.lock().await;
    let now = LOCAL_TIME;
    let key = ConfigKey::ClaimIdleTimeout;
    let before = store
        .runtime_config()
        .await
        .expect("read the configuration");
    let idle = if before.claim_idle_timeout_ms == 45_000 {
        46_000
    } else {
        45_000
    };
    store
        .set_config(key, idle, now)
        .await
        .expect("set the timeout");
    let namespace = namespace();
    let queued = create(store, new_run(&namespace, RunStatus::Queued, now)).await;
    let claimed = store
        .claim(claim_request(&namespace, "worker", 5, now + 1))
        .await
        .expect("claim");
    assert_eq!(claimed.runs.len(), 1);
    assert_eq!(claimed.runs[0].id, queued.id);
    assert_eq!(claimed.claim_idle_timeout_ms, Some(idle));
    assert_eq!(claimed.now(), claimed.runs[0].heartbeat_at);
    let nothing = store
        .claim(claim_request(&namespace, "worker", 5, now + 2))
        .await
        .expect("claim again");
    assert_eq!(
        (nothing.runs.len(), nothing.claim_idle_timeout_ms),
        (0, None)
    );
    store
        .set_config(key, before.claim_idle_timeout_ms, now + 3)
        .await
        .expect("set it back");
}
