//! Checks of the payload size limit (see [`crate::limit`]): every write holding a payload over
//! the limit is refused with [`StoreError::TooLarge`] and stores nothing, and a payload at the
//! limit is kept. The checks expect the default limit,
//! [`DEFAULT_PAYLOAD_LIMIT`](crate::limit::DEFAULT_PAYLOAD_LIMIT).

use serde_json::{Value, json};

use super::schedules::{HOUR, definition, every, published};
use super::{LOCAL_TIME, create, entry, event, namespace, new_run, running};
use crate::limit::DEFAULT_PAYLOAD_LIMIT;
use crate::{
    AppendOutcome, EntryKind, EntryStatus, Move, NewFork, ParentLink, RunId, RunStatus,
    ScheduleAction, ScheduleCreated, ScheduleOrigin, ScheduleRecord, Store, StoreError, Transition,
};

/// A JSON string whose text is exactly the limit.
fn at_limit() -> Value {
    Value::String("a".repeat(DEFAULT_PAYLOAD_LIMIT - 2))
}

/// A JSON string whose text is one byte over the limit.
fn over_limit() -> Value {
    Value::String("o".repeat(DEFAULT_PAYLOAD_LIMIT - 1))
}

/// Asserts `result` is the typed refusal of a payload one byte over the default limit.
#[track_caller]
fn assert_too_large<T: std::fmt::Debug>(result: Result<T, StoreError>, doing: &str) {
    match result {
        Err(StoreError::TooLarge { bytes, limit, .. }) => assert_eq!(
            (bytes, limit),
            (
                DEFAULT_PAYLOAD_LIMIT as u64 + 1,
                DEFAULT_PAYLOAD_LIMIT as u64
            ),
            "{doing}: the payload's size and the limit"
        ),
        Err(other) => panic!("{doing}: expected TooLarge, got {other:?}"),
        Ok(value) => panic!("{doing}: expected TooLarge, got {value:?}"),
    }
}

/// An executor's writes holding a payload over the limit are refused with `TooLarge` and write
/// nothing: a task's output (`put_entry`), a run's output (`transition`), a child's input
/// (`start_child`, neither the parent's entry nor the child) and a successor's input
/// (`continue_run`); payloads at the limit are kept.
pub async fn check_executor_writes_over_the_payload_limit_are_refused(store: &dyn Store) {
    let now = LOCAL_TIME;
    let run = running(store, "worker-limits", now).await;

    let mut done = entry(run.id, "big:1", 0, now);
    done.status = EntryStatus::Completed;
    done.output = Some(over_limit());
    assert_too_large(
        store.put_entry(run.revision, done.clone()).await,
        "put_entry",
    );
    let history = store.load_history(run.id).await.expect("history");
    assert!(
        history.entries.is_empty(),
        "no entry: {:?}",
        history.entries
    );
    assert_eq!(history.run.revision, run.revision);

    done.output = Some(at_limit());
    store
        .put_entry(run.revision, done.clone())
        .await
        .expect("an output at the limit is kept");
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.entries.len(), 1);
    assert_eq!(history.entries[0].output, Some(at_limit()), "kept whole");

    let address = "child:1.0.0:big".to_owned();
    let mut child = new_run(&namespace(), RunStatus::Queued, now);
    child.input = over_limit();
    child.parent = Some(ParentLink {
        run_id: run.id,
        address: address.clone(),
    });
    let mut start = entry(run.id, &address, 0, now);
    start.kind = EntryKind::Child;
    start.status = EntryStatus::Completed;
    let child_id = child.id;
    assert_too_large(
        store.start_child(run.revision, start, child).await,
        "start_child",
    );
    assert!(
        matches!(
            store.get_run(child_id).await,
            Err(StoreError::NotFound { .. })
        ),
        "no child run"
    );
    let history = store.load_history(run.id).await.expect("history");
    assert_eq!(history.entries.len(), 1, "no child entry in the parent");
    assert!(history.children.is_empty());

    let successor =
        crate::NewRun::new(run.namespace.clone(), over_limit(), "2".repeat(64), now + 1);
    let successor_id = successor.id;
    let continuation = crate::Continuation::new(successor, Default::default(), now + 1);
    assert_too_large(
        store.continue_run(run.id, run.revision, continuation).await,
        "continue_run",
    );
    assert!(
        matches!(
            store.get_run(successor_id).await,
            Err(StoreError::NotFound { .. })
        ),
        "no successor"
    );
    let completed = Transition::to(RunStatus::Completed, now + 1).output(over_limit(), "fp");
    assert_too_large(
        store.transition(run.id, run.revision, completed).await,
        "transition",
    );
    let unchanged = store.get_run(run.id).await.expect("run");
    assert_eq!(
        (unchanged.status, unchanged.revision, &unchanged.output),
        (RunStatus::Running, run.revision, &None),
        "the run is as it was"
    );
    let completed = Transition::to(RunStatus::Completed, now + 2).output(at_limit(), "fp");
    let ended = store
        .transition(run.id, run.revision, completed)
        .await
        .expect("an output at the limit is kept");
    assert_eq!(ended.status, RunStatus::Completed);
    assert_eq!(
        store.get_run(run.id).await.expect("run").output,
        Some(at_limit())
    );
}

/// A client's writes holding a payload over the limit are refused with `TooLarge` and write
/// nothing: a run's input (`create_run`), an event's payload (`append_event`), a fork's input
/// (`fork_run`) and an output among several moves (`transition_all`: none applies); payloads
/// at the limit are kept.
pub async fn check_client_writes_over_the_payload_limit_are_refused(store: &dyn Store) {
    let now = LOCAL_TIME;
    let ns = namespace();

    let mut big = new_run(&ns, RunStatus::Queued, now);
    big.input = over_limit();
    let id = big.id;
    assert_too_large(store.create_run(big).await, "create_run");
    assert!(
        matches!(store.get_run(id).await, Err(StoreError::NotFound { .. })),
        "no run"
    );
    let mut fits = new_run(&ns, RunStatus::Queued, now);
    fits.input = at_limit();
    let run = create(store, super::rehashed(fits)).await;
    assert_eq!(
        store.get_run(run.id).await.expect("run").input,
        at_limit(),
        "an input at the limit is kept whole"
    );

    assert_too_large(
        store
            .append_event(event(run.id, "upload", over_limit(), now + 1))
            .await,
        "append_event",
    );
    assert!(
        store
            .load_history(run.id)
            .await
            .expect("history")
            .events
            .is_empty(),
        "no event"
    );
    let appended = store
        .append_event(event(run.id, "upload", at_limit(), now + 2))
        .await
        .expect("a payload at the limit is kept");
    assert!(matches!(appended, AppendOutcome::Appended { .. }));
    let events = store.load_history(run.id).await.expect("history").events;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, Some(at_limit()));

    let source = running(store, "worker-limits", now).await;
    let lineage = crate::Lineage {
        forked_from: source.id,
        root: source.id,
    };
    let mut fork = new_run(&source.namespace, RunStatus::Queued, now + 3)
        .reference_id(Some(format!("fork:{}", source.id)))
        .lineage(lineage);
    fork.input = over_limit();
    let fork_id = fork.id;
    let mut carried = entry(fork_id, "charge:1", 0, now);
    carried.status = EntryStatus::Completed;
    carried.output = Some(json!({"receipt": 7}));
    assert_too_large(
        store
            .fork_run(NewFork::new(fork, vec![carried], Vec::new(), Vec::new()))
            .await,
        "fork_run",
    );
    assert!(
        matches!(
            store.get_run(fork_id).await,
            Err(StoreError::NotFound { .. })
        ),
        "no fork"
    );

    let other = running(store, "worker-limits", now).await;
    let moves = vec![
        Move::new(
            source.id,
            source.revision,
            Transition::to(RunStatus::Completed, now + 4).output(json!(1), "fp"),
        ),
        Move::new(
            other.id,
            other.revision,
            Transition::to(RunStatus::Completed, now + 4).output(over_limit(), "fp"),
        ),
    ];
    assert_too_large(store.transition_all(moves).await, "transition_all");
    for (was, label) in [(&source, "the first run"), (&other, "the second run")] {
        let now = store.get_run(was.id).await.expect("run");
        assert_eq!(
            (now.status, now.revision, &now.output),
            (RunStatus::Running, was.revision, &None),
            "{label} is as it was"
        );
    }
}

/// Schedule writes holding an input over the limit are refused with `TooLarge` and write
/// nothing: a new schedule (`create_schedule`), a redefinition (`act_on_schedule`) and a set
/// declared in code (`declare_schedules`: none of the set is written).
pub async fn check_schedule_writes_over_the_payload_limit_are_refused(store: &dyn Store) {
    let ns = namespace();
    published(store, &ns).await;
    let mut big = definition(&ns, every(HOUR));
    big.input = over_limit();
    let name = format!("limits-{}", RunId::new());
    let record = ScheduleRecord::new(
        name.clone(),
        big.clone(),
        ScheduleOrigin::Client,
        1,
        LOCAL_TIME,
    )
    .expect("valid");
    assert_too_large(store.create_schedule(record, None).await, "create_schedule");
    assert!(
        matches!(
            store.schedule(&name).await,
            Err(StoreError::NotFound { .. })
        ),
        "no schedule"
    );

    let small = ScheduleRecord::new(
        name.clone(),
        definition(&ns, every(HOUR)),
        ScheduleOrigin::Client,
        1,
        LOCAL_TIME,
    )
    .expect("valid");
    let created = match store.create_schedule(small, None).await.expect("create") {
        ScheduleCreated::Created(record) => record,
        existing => panic!("a new name found {existing:?}"),
    };
    let redefine = ScheduleAction::Redefine {
        definition: Box::new(big.clone()),
        generation: 2,
    };
    assert_too_large(
        store
            .act_on_schedule(&name, redefine, None, LOCAL_TIME + 1)
            .await,
        "act_on_schedule",
    );
    assert_eq!(
        store.schedule(&name).await.expect("schedule"),
        created,
        "the schedule is as it was"
    );
    super::schedules::delete(store, &name).await;

    let (fits, too_big) = (
        format!("limits-code-{}", RunId::new()),
        format!("limits-code-{}", RunId::new()),
    );
    let in_code = |name: &str, definition| {
        ScheduleRecord::new(name, definition, ScheduleOrigin::Code, 1, LOCAL_TIME).expect("valid")
    };
    assert_too_large(
        store
            .declare_schedules(
                vec![
                    in_code(&fits, definition(&ns, every(HOUR))),
                    in_code(&too_big, big),
                ],
                vec![ns.clone()],
                "worker-limits",
                LOCAL_TIME,
            )
            .await,
        "declare_schedules",
    );
    for name in [&fits, &too_big] {
        assert!(
            matches!(store.schedule(name).await, Err(StoreError::NotFound { .. })),
            "no schedule of the set is written ({name})"
        );
    }
}
