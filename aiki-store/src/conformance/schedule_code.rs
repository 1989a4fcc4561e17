//! Checks of schedules declared in code: reconciled at each worker's start, forward only, and
//! removed for good when no longer declared, even while paused.

use super::LOCAL_TIME;
use super::namespace;
use super::schedules::{HOUR, create, definition, delete, every};
use crate::schedule::Declared;
use crate::{
    Namespace, RunId, ScheduleAction, ScheduleOrigin, ScheduleRecord, ScheduleStatus, Store,
    StoreError,
};

fn in_code(name: &str, namespace: &Namespace, generation: i64) -> ScheduleRecord {
    let def = definition(namespace, every(HOUR));
    ScheduleRecord::new(name, def, ScheduleOrigin::Code, generation, LOCAL_TIME).expect("valid")
}

/// Schedules declared in code are reconciled forward only: created when new, redefined by a
/// higher generation and never by a lower one, made inactive when a worker serving their
/// version no longer declares them (still listed), active again when declared again; a
/// client's schedule of the same name is left alone; an invalid set writes nothing.
pub async fn check_schedules_in_code_are_reconciled_forward_only(store: &dyn Store) {
    let (v1, v2) = (namespace(), namespace());
    let a = format!("code-a-{}", RunId::new());
    let b = format!("code-b-{}", RunId::new());
    let now = LOCAL_TIME;
    let first = store
        .declare_schedules(
            vec![in_code(&a, &v1, 1), in_code(&b, &v1, 1)],
            vec![v1.clone()],
            "w1",
            now,
        )
        .await
        .expect("declare");
    assert_eq!(
        first,
        vec![
            Declared::Created { name: a.clone() },
            Declared::Created { name: b.clone() }
        ]
    );
    // A newer binary moves `a` to another version at generation 2.
    let newer = store
        .declare_schedules(
            vec![in_code(&a, &v2, 2), in_code(&b, &v1, 1)],
            vec![v1.clone(), v2.clone()],
            "w2",
            now + 1,
        )
        .await
        .expect("declare");
    assert_eq!(
        newer[0],
        Declared::Redefined {
            name: a.clone(),
            from: 1,
            to: 2
        }
    );
    assert!(matches!(&newer[1], Declared::Kept { differs: false, .. }));
    // An older binary still running declares generation 1: kept as stored.
    let older = store
        .declare_schedules(
            vec![in_code(&a, &v1, 1), in_code(&b, &v1, 1)],
            vec![v1.clone()],
            "w-old",
            now + 2,
        )
        .await
        .expect("declare");
    assert!(matches!(&older[0], Declared::Kept { stored: 2, .. }));
    let stored = store.schedule(&a).await.expect("a");
    assert_eq!(
        stored.definition.namespace, v2,
        "never overwritten by generation 1"
    );
    assert_eq!(stored.generation, 2);
    // A binary without `b`: inactive, still listed.
    let dropped = store
        .declare_schedules(
            vec![in_code(&a, &v2, 2)],
            vec![v1.clone(), v2.clone()],
            "w3",
            now + 3,
        )
        .await
        .expect("declare");
    assert!(dropped.contains(&Declared::Deactivated { name: b.clone() }));
    let listed = store.schedules().await.expect("list");
    let b_now = listed.iter().find(|s| s.name == b).expect("still listed");
    assert_eq!(b_now.status, ScheduleStatus::Inactive);
    // Declared again: active.
    let again = store
        .declare_schedules(
            vec![in_code(&a, &v2, 2), in_code(&b, &v1, 1)],
            vec![v1.clone(), v2.clone()],
            "w4",
            now + 4,
        )
        .await
        .expect("declare");
    assert_eq!(again[1], Declared::Reactivated { name: b.clone() });
    assert_eq!(
        store.schedule(&b).await.expect("b").status,
        ScheduleStatus::Active
    );
    // A client's schedule of a declared name is not the code's.
    let client = create(store, definition(&v1, every(HOUR)), now).await;
    let theirs = store
        .declare_schedules(vec![in_code(&client.name, &v1, 5)], vec![], "w5", now + 5)
        .await
        .expect("declare");
    assert_eq!(
        theirs,
        vec![Declared::NotOurs {
            name: client.name.clone()
        }]
    );
    assert_eq!(store.schedule(&client.name).await.expect("c").generation, 1);
    // Declared twice: refused, nothing written.
    let c = format!("code-c-{}", RunId::new());
    assert!(matches!(
        store
            .declare_schedules(
                vec![in_code(&c, &v1, 1), in_code(&c, &v1, 1)],
                vec![],
                "w6",
                now
            )
            .await,
        Err(StoreError::Invalid { .. })
    ));
    assert!(matches!(
        store.schedule(&c).await,
        Err(StoreError::NotFound { .. })
    ));
    for name in [&a, &b, &client.name] {
        delete(store, name).await;
    }
}

/// A schedule in code that an operator paused, then no longer declared by a worker serving
/// its version, becomes inactive as an active one does: resuming it is refused and no sweep
/// fires it. Declared again, it comes back paused, as the operator left it.
pub async fn check_a_paused_schedule_no_longer_declared_is_removed_for_good(store: &dyn Store) {
    let ns = namespace();
    let name = format!("code-paused-{}", RunId::new());
    let now = LOCAL_TIME;
    store
        .declare_schedules(vec![in_code(&name, &ns, 1)], vec![ns.clone()], "w1", now)
        .await
        .expect("declare");
    let pause = ScheduleAction::Pause {
        reason: Some("downstream down".to_owned()),
    };
    store
        .act_on_schedule(&name, pause, Some("ops".to_owned()), now + 1)
        .await
        .expect("pause");
    let dropped = store
        .declare_schedules(Vec::new(), vec![ns.clone()], "w2", now + 2)
        .await
        .expect("declare");
    assert_eq!(dropped, vec![Declared::Deactivated { name: name.clone() }]);
    let stored = store.schedule(&name).await.expect("still listed");
    assert_eq!(stored.status, ScheduleStatus::Inactive, "removal sticks");
    assert!(
        matches!(
            store
                .act_on_schedule(&name, ScheduleAction::Resume, None, now + 3)
                .await,
            Err(StoreError::Invalid { .. })
        ),
        "a schedule no code declares is not resumed"
    );
    let due = store
        .due_schedules(now + 1_000 * HOUR, 10_000)
        .await
        .expect("due");
    assert!(due.iter().all(|due| due.record.name != name), "never fired");
    // Declared again: the operator's pause stands.
    let again = store
        .declare_schedules(
            vec![in_code(&name, &ns, 1)],
            vec![ns.clone()],
            "w3",
            now + 4,
        )
        .await
        .expect("declare");
    assert_eq!(again, vec![Declared::Reactivated { name: name.clone() }]);
    assert_eq!(
        store.schedule(&name).await.expect("read").status,
        ScheduleStatus::Paused
    );
    let resumed = store
        .act_on_schedule(&name, ScheduleAction::Resume, None, now + 5)
        .await
        .expect("resume");
    assert_eq!(resumed.schedule.status, ScheduleStatus::Active);
    delete(store, &name).await;
}
