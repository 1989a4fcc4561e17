//! Operations done once however often they are sent (see [`crate::operation`]): a repeat in
//! the same scope gets the first answer and writes nothing; a refused write records nothing;
//! the answers are forgotten after their time. The forgetting check forgets every answer
//! recorded before it on a shared database, so these checks hold [`SWEEPS`](super::SWEEPS).

use super::*;
use crate::operation::{self, KEPT_FOR_MS, OperationId};

/// A fresh operation id.
fn fresh() -> OperationId {
    OperationId::new(format!("conformance-{}", RunId::new())).expect("an operation id")
}

/// Runs `write` twice as operation `id`, as a client resending a request whose answer it lost
/// does: both answers.
async fn twice<T, F, Fut>(id: &OperationId, write: F) -> (T, T)
where
    F: Fn() -> Fut,
    Fut: Future<Output = T>,
{
    let first = operation::scope(id.clone(), write()).await;
    let again = operation::scope(id.clone(), write()).await;
    (first, again)
}

/// Each write that a repeat would otherwise do a second time (a new run, a claim, a
/// transition, an operator's action, an event, a fork, a child) gives its repeat the first
/// answer and writes nothing more, where the same write outside the scope is refused or done
/// again.
pub async fn check_a_repeated_write_gets_its_first_answer(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = LOCAL_TIME;
    let namespace = namespace();

    // A start without a reference id: one run, however often it is sent.
    let start = fresh();
    let new = new_run(&namespace, RunStatus::Queued, now);
    let (created, again) = twice(&start, || store.create_run(new.clone())).await;
    let created = created.expect("create_run");
    assert_eq!(again.expect("the repeat"), created, "the first answer");
    let CreateOutcome::Created(run) = created else {
        panic!("a new run, got {created:?}");
    };

    // A claim: the same runs, owner and revisions, though the run is no longer queued.
    let claim = fresh();
    let (claimed, again) = twice(&claim, || {
        store.claim(claim_request(&namespace, "w1", 5, now + 1))
    })
    .await;
    let claimed = claimed.expect("claim");
    assert_eq!(claimed.runs.len(), 1, "the run is claimed: {claimed:?}");
    assert_eq!(again.expect("the repeat"), claimed, "the same claim");
    let running = claimed.runs[0].clone();
    assert_eq!(running.id, run.id);
    let fresh_claim = store
        .claim(claim_request(&namespace, "w2", 5, now + 2))
        .await
        .expect("claim");
    assert!(fresh_claim.runs.is_empty(), "nothing else to claim");

    // An event without a reference id: one event.
    let send = fresh();
    let (sent, again) = twice(&send, || {
        store.append_event(event(run.id, "approved", json!({"by": "ops"}), now + 3))
    })
    .await;
    let sent = sent.expect("append_event");
    assert_eq!(again.expect("the repeat"), sent);
    let history = store.load_history(run.id).await.expect("load_history");
    assert_eq!(history.events.len(), 1, "one event: {:?}", history.events);

    // A transition: the same record, where a fresh one would conflict.
    let finish = fresh();
    let completed = || {
        store.transition(
            run.id,
            running.revision,
            Transition::to(RunStatus::Completed, now + 4).output(json!(7), "f"),
        )
    };
    let (done, again) = twice(&finish, completed).await;
    let done = done.expect("transition");
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(again.expect("the repeat"), done, "the first answer");
    assert_conflict(completed().await, run.id, running.revision, done.revision);

    // An operator's action: the same record, where a fresh one is refused.
    let queued = create(store, new_run(&namespace, RunStatus::Queued, now + 5)).await;
    let pause = fresh();
    let paused = || store.act(queued.id, RunAction::Pause, None, now + 6);
    let (first, again) = twice(&pause, paused).await;
    let first = first.expect("pause");
    assert_eq!(first.status, RunStatus::Paused);
    assert_eq!(again.expect("the repeat"), first);
    assert_invalid_transition(paused().await);

    // The same id for another kind of write is not a repeat.
    let other = operation::scope(pause.clone(), async {
        store
            .create_run(new_run(&namespace, RunStatus::Queued, now + 7))
            .await
    })
    .await
    .expect("create_run");
    assert!(
        matches!(other, CreateOutcome::Created(ref new) if new.id != queued.id),
        "a write of its own: {other:?}"
    );
}

/// A write that is refused records no answer: its repeat, the cause mended, is done.
pub async fn check_a_refused_write_records_no_answer(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = LOCAL_TIME;
    let run = running(store, "w1", now).await;
    let id = fresh();
    let finish = |expected| {
        operation::scope(
            id.clone(),
            store.transition(
                run.id,
                expected,
                Transition::to(RunStatus::Completed, now + 1).output(json!(1), "f"),
            ),
        )
    };
    assert_conflict(
        finish(run.revision + 5).await,
        run.id,
        run.revision + 5,
        run.revision,
    );
    let done = finish(run.revision).await.expect("the mended repeat");
    assert_eq!(done.status, RunStatus::Completed);
}

/// The leader's sweep forgets answers older than it is told, a batch at a time, and none
/// younger.
pub async fn check_answers_are_forgotten_after_their_time(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = LOCAL_TIME;
    let namespace = namespace();
    for _ in 0..3 {
        operation::scope(fresh(), async {
            store
                .create_run(new_run(&namespace, RunStatus::Queued, now))
                .await
                .expect("create_run")
        })
        .await;
    }
    let recorded = operation::wall_clock_ms();
    let lease = leader(store, recorded).await;
    let young = store
        .forget_operations(&lease, recorded + 1_000, KEPT_FOR_MS, 100)
        .await
        .expect("forget_operations");
    assert_eq!(young, 0, "answers younger than their time are kept");
    let later = recorded + 2 * KEPT_FOR_MS;
    let first = store
        .forget_operations(&lease, later, KEPT_FOR_MS, 2)
        .await
        .expect("forget_operations");
    assert_eq!(first, 2, "a batch at most");
    let rest = store
        .forget_operations(&lease, later, KEPT_FOR_MS, 1_000)
        .await
        .expect("forget_operations");
    // Other checks on a shared database may record answers meanwhile: at least these three.
    assert!(first + rest >= 3, "then the rest: {rest}");
}

/// A repeat sent as new ([`operation::fresh_scope`], which skips the look for an answer): the
/// write it does is rolled back, and it gets the first answer.
pub async fn check_a_repeat_sent_as_new_gets_the_first_answer(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = LOCAL_TIME;
    let namespace = namespace();
    let id = fresh();
    let first_run = new_run(&namespace, RunStatus::Queued, now);
    let first = operation::fresh_scope(id.clone(), store.create_run(first_run.clone()))
        .await
        .expect("create_run");
    // Rebuilt with another run id (a server, which hashes each request, refuses that as
    // another request: see `check_an_operation_id_reused_for_another_request_is_refused`).
    let second_run = if store.backend() == "http" {
        first_run
    } else {
        new_run(&namespace, RunStatus::Queued, now + 1)
    };
    let second_id = second_run.id;
    let again = operation::fresh_scope(id, store.create_run(second_run))
        .await
        .expect("the repeat");
    assert_eq!(again, first, "the first answer");
    if store.backend() != "http" {
        assert_not_found(store.get_run(second_id).await);
    }

    // A transition sent again as new: refused by the revision it moved, and answered with the
    // first answer instead of a conflict.
    let finish = fresh();
    let run = running(store, "w1", now).await;
    let completed = || {
        let done = Transition::to(RunStatus::Completed, now + 2).output(json!(7), "f");
        operation::fresh_scope(finish.clone(), store.transition(run.id, run.revision, done))
    };
    let done = completed().await.expect("transition");
    assert_eq!(
        completed().await.expect("the repeat"),
        done,
        "the first answer"
    );
}

/// An operation id sent again with another request (another digest, see
/// [`operation::request_scope`]) is not a repeat: refused with [`StoreError::KeyReused`] and
/// nothing written, whether sent as new or not, for a start and a transition; the same request
/// again gets the first answer, with or without its digest. A claim records its digest too (a
/// server sends none for claims, whose repeats are the claimer's next claims).
pub async fn check_an_operation_id_reused_for_another_request_is_refused(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let now = LOCAL_TIME;
    let namespace = namespace();
    let asked = |digest: &str| Some(digest.to_owned());
    let start = fresh();
    let run = new_run(&namespace, RunStatus::Queued, now);
    let first = operation::request_scope(
        start.clone(),
        true,
        asked("a"),
        store.create_run(run.clone()),
    )
    .await
    .expect("create_run");
    for fresh_send in [false, true] {
        let other = new_run(&namespace, RunStatus::Queued, now + 1);
        let other_id = other.id;
        let refused = operation::request_scope(
            start.clone(),
            fresh_send,
            asked("b"),
            store.create_run(other),
        )
        .await;
        assert!(
            matches!(refused, Err(StoreError::KeyReused { .. })),
            "sent as new: {fresh_send}: {refused:?}"
        );
        assert_not_found(store.get_run(other_id).await);
    }
    for digest in [asked("a"), None] {
        let again =
            operation::request_scope(start.clone(), false, digest, store.create_run(run.clone()))
                .await;
        assert_eq!(again.expect("the repeat"), first, "the first answer");
    }

    // A transition (PostgreSQL records its answer in its own statement).
    let finish = fresh();
    let run = running(store, "w1", now).await;
    let done = |output: i64, digest: &str| {
        let done = Transition::to(RunStatus::Completed, now + 4).output(json!(output), "f");
        operation::request_scope(
            finish.clone(),
            false,
            asked(digest),
            store.transition(run.id, run.revision, done),
        )
    };
    let completed = done(7, "a").await.expect("transition");
    let refused = done(8, "b").await;
    assert!(
        matches!(refused, Err(StoreError::KeyReused { .. })),
        "{refused:?}"
    );
    assert_eq!(done(7, "a").await.expect("the repeat"), completed);
    assert_eq!(store.get_run(run.id).await.unwrap().output, Some(json!(7)));

    // A claim (PostgreSQL records its answer in its own statement too).
    let claimer = fresh();
    store
        .create_run(new_run(&namespace, RunStatus::Queued, now + 5))
        .await
        .expect("create_run");
    let claim = |first: bool, digest: &str| {
        operation::request_scope(
            claimer.clone(),
            first,
            asked(digest),
            store.claim(claim_request(&namespace, "w9", 5, now + 6)),
        )
    };
    let claimed = claim(true, "a").await.expect("claim");
    assert!(!claimed.runs.is_empty(), "{claimed:?}");
    assert_eq!(claim(false, "a").await.expect("the repeat"), claimed);
    if store.backend() != "http" {
        let refused = claim(false, "b").await;
        assert!(
            matches!(refused, Err(StoreError::KeyReused { .. })),
            "{refused:?}"
        );
    }
}
