//! API keys: no key or a bad one is 401, a key without the route's scope 403, and neither
//! changes anything; health and readiness need no key; what an operator's key does is recorded
//! with the key's id as its actor; a revoked key stops working within the cache's lifetime.

use crate::support;

mod edges;

use aiki_server::ServerConfig;
use aiki_server::keys::{NewKey, generate};
use aiki_store::http::HttpStore;
use aiki_store::prelude::*;
use aiki_store::{
    CreateOutcome, ErrorBody, Namespace, NewRun, RunAction, RunId, RunStatus, Scope, StoreError,
};
use serde_json::json;
use support::remote::Remote;

const NOW: i64 = 4_000_000_000_000;

async fn server() -> Remote {
    let config = ServerConfig::default().clock(aiki::ManualClock::new(NOW));
    Remote::start(aiki_store::connect("memory:").await.unwrap(), config).await
}

async fn key(remote: &Remote, scopes: &[Scope]) -> NewKey {
    let key = generate("test", scopes.to_vec(), NOW);
    remote
        .backing()
        .create_key(key.record.clone())
        .await
        .unwrap();
    key
}

fn new_run() -> NewRun {
    NewRun::new(
        Namespace::new(format!("auth-{}", RunId::new()), "1.0.0"),
        json!({}),
        support::routes::hash(&json!({})),
        NOW,
    )
}

/// A store reaching `remote` with `token`.
fn keyed(remote: &Remote, token: &str) -> HttpStore {
    HttpStore::new(&remote.url())
        .unwrap()
        .with_key(token.to_owned())
}

/// A new run, claimed by `executor`.
async fn claimed(remote: &Remote, executor: &HttpStore) -> aiki_store::RunRecord {
    let new = new_run();
    let namespace = new.namespace.clone();
    remote.backing().create_run(new).await.unwrap();
    let request = aiki_store::ClaimRequest::new("w", vec![namespace], "default", 1, NOW);
    let claimed = executor.claim(request).await.unwrap().runs;
    claimed.into_iter().next().expect("the run is claimed")
}

/// `GET path` with `authorization` (if any): the status and the error body, if one.
async fn get(remote: &Remote, path: &str, authorization: Option<&str>) -> (u16, Option<ErrorBody>) {
    let mut request = reqwest::Client::new().get(format!("{}/api/v1{path}", remote.url()));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json::<ErrorBody>().await.ok())
}

#[tokio::test]
async fn no_key_or_a_bad_key_is_401_and_changes_nothing() {
    let remote = server().await;
    let good = key(&remote, &[Scope::Operator]).await;
    let (id, secret) = aiki_server::keys::parse(&good.token).unwrap();
    let wrong_secret = format!("aiki_{id}_{}", "0".repeat(secret.len()));
    let unknown = generate("never stored", vec![Scope::Operator], NOW).token;
    for (authorization, case) in [
        (None, "no header"),
        (Some("Basic dXNlcjpwYXNz".to_owned()), "another scheme"),
        (Some("Bearer not-a-key".to_owned()), "not shaped like a key"),
        (Some(format!("Bearer {wrong_secret}")), "a wrong secret"),
        (Some(format!("Bearer {unknown}")), "an unknown id"),
    ] {
        let (status, body) = get(&remote, "/runs/counts", authorization.as_deref()).await;
        assert_eq!(status, 401, "{case}");
        assert_eq!(
            body.map(|body| body.code),
            Some("unauthorized".into()),
            "{case}"
        );
        let mut request = reqwest::Client::new()
            .post(format!("{}/api/v1/runs", remote.url()))
            .json(&new_run());
        if let Some(value) = &authorization {
            request = request.header("authorization", value);
        }
        assert_eq!(
            request.send().await.unwrap().status().as_u16(),
            401,
            "{case}"
        );
    }
    assert!(
        remote.backing().run_counts().await.unwrap().is_empty(),
        "no run was created"
    );
    // The same through HttpStore: a typed error, not a transient one.
    let store = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(wrong_secret);
    let error = store.create_run(new_run()).await.expect_err("refused");
    assert!(
        matches!(error, StoreError::Unauthorized { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("not one this store knows"),
        "{error}"
    );
}

#[tokio::test]
async fn a_key_without_the_routes_scope_is_403_and_changes_nothing() {
    let remote = server().await;
    let operator = key(&remote, &[Scope::Operator]).await;
    let CreateOutcome::Created(run) = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(&operator.token)
        .create_run(new_run())
        .await
        .unwrap()
    else {
        panic!("a new run");
    };
    let reader = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(key(&remote, &[Scope::Read]).await.token);
    assert_eq!(
        reader.get_run(run.id).await.unwrap().id,
        run.id,
        "a read key reads"
    );
    let refused = reader
        .act(run.id, RunAction::Cancel, None, NOW)
        .await
        .expect_err("a read key does not act");
    assert!(
        matches!(refused, StoreError::Forbidden { .. }),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("`operator` scope"),
        "{refused}"
    );
    assert!(
        refused.to_string().starts_with("forbidden: API key ")
            && refused.to_string().matches("forbidden").count() == 1,
        "said once: {refused}"
    );
    let executor = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(key(&remote, &[Scope::Executor]).await.token);
    assert_eq!(
        executor.get_run(run.id).await.unwrap().id,
        run.id,
        "an executor key reads"
    );
    let refused = executor
        .create_run(new_run())
        .await
        .expect_err("not a client");
    assert!(
        refused.to_string().contains("`operator` scope"),
        "{refused}"
    );
    let operator_store = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(&operator.token);
    let refused = operator_store
        .claim(aiki_store::ClaimRequest::new(
            "w",
            vec![run.namespace.clone()],
            "default",
            1,
            NOW,
        ))
        .await
        .expect_err("an operator key does not claim");
    assert!(
        refused.to_string().contains("`executor` scope"),
        "{refused}"
    );
    let after = remote.backing().get_run(run.id).await.unwrap();
    assert_eq!(after, run, "the run is as it was");
    let counts = remote.backing().run_counts().await.unwrap();
    assert_eq!(counts.len(), 1, "{counts:?}");
    assert_eq!(
        counts[0].by_status,
        [(RunStatus::Queued, 1)],
        "no run was created"
    );
}

#[tokio::test]
async fn health_needs_no_key_and_an_operators_key_is_the_actor() {
    let remote = server().await;
    assert_eq!(get(&remote, "/health", None).await.0, 200);
    assert_eq!(get(&remote, "/ready", None).await.0, 200);
    let operator = key(&remote, &[Scope::Operator]).await;
    let store = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(&operator.token);
    let me = store.whoami().await.unwrap();
    assert_eq!(me.key.as_deref(), Some(operator.record.id.as_str()));
    assert_eq!(me.name.as_deref(), Some("test"));
    assert_eq!((me.scopes, me.auth), (vec![Scope::Operator], true));
    assert_eq!(
        get(&remote, "/whoami", None).await.0,
        401,
        "whoami needs a key"
    );
    let CreateOutcome::Created(run) = store.create_run(new_run()).await.unwrap() else {
        panic!("a new run");
    };
    let cancelled = store
        .act(run.id, RunAction::Cancel, Some("alice".into()), NOW)
        .await
        .unwrap();
    assert_eq!(cancelled.status, RunStatus::Cancelled);
    let timeline = remote.backing().timeline(run.id).await.unwrap();
    let actors: Vec<_> = timeline.iter().map(|change| change.actor.clone()).collect();
    let id = &operator.record.id;
    assert_eq!(
        actors,
        [
            Some(format!("key:{id} (test)")),
            Some(format!("key:{id} (test) as alice"))
        ],
        "{timeline:?}"
    );
}

#[tokio::test]
async fn a_revoked_key_is_refused_once_the_cache_lets_it_go() {
    let remote = server().await;
    let reader = key(&remote, &[Scope::Read]).await;
    let store = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(&reader.token);
    store.run_counts().await.expect("a key in force reads");
    remote
        .backing()
        .revoke_key(&reader.record.id, NOW)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + aiki_server::KEY_CACHE_TTL * 3;
    let error = loop {
        match store.run_counts().await {
            Err(error) => break error,
            Ok(_) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the revocation took hold"
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    assert!(
        matches!(error, StoreError::Unauthorized { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("revoked"), "{error}");
}

#[tokio::test]
async fn a_key_over_its_rate_is_429_and_other_keys_are_not_slowed() {
    let one = std::num::NonZeroU32::new(1).unwrap();
    let three = std::num::NonZeroU32::new(3).unwrap();
    let config = ServerConfig::default()
        .clock(aiki::ManualClock::new(NOW))
        .rate_limit(one, three);
    let remote = Remote::start(aiki_store::connect("memory:").await.unwrap(), config).await;
    let busy = key(&remote, &[Scope::Read]).await;
    let calm = key(&remote, &[Scope::Read]).await;
    let authorization = format!("Bearer {}", busy.token);
    for _ in 0..3 {
        assert_eq!(
            get(&remote, "/runs/counts", Some(&authorization)).await.0,
            200,
            "the burst"
        );
    }
    let response = reqwest::Client::new()
        .get(format!("{}/api/v1/runs/counts", remote.url()))
        .header("authorization", &authorization)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().contains_key("retry-after"));
    let body: ErrorBody = response.json().await.unwrap();
    assert_eq!(body.code, "rate_limited", "{body:?}");
    let calm_authorization = format!("Bearer {}", calm.token);
    assert_eq!(
        get(&remote, "/runs/counts", Some(&calm_authorization))
            .await
            .0,
        200,
        "another key has its own rate"
    );
    let error = HttpStore::new(&remote.url())
        .unwrap()
        .with_key(&busy.token)
        .run_counts()
        .await
        .expect_err("still over the rate");
    assert!(matches!(error, StoreError::RateLimited { .. }), "{error:?}");
    assert!(error.is_transient(), "retried after a pause, as an outage");
}

/// Continuing a run is the executor's: without a key it is 401, with an operator's or a
/// reader's key 403, and neither ends the run or creates a successor; an executor's key does.
#[tokio::test]
async fn continuing_a_run_needs_the_executor_scope() {
    let remote = server().await;
    let store = |token: &str| keyed(&remote, token);
    let executor = store(&key(&remote, &[Scope::Executor]).await.token);
    let run = claimed(&remote, &executor).await;
    let namespace = run.namespace.clone();
    let continuation = || {
        let successor = support::routes::new_run(&namespace, json!({"n": 2}));
        aiki_store::Continuation::new(successor, Default::default(), NOW)
    };
    let body = json!({"expected": run.revision, "continuation": continuation()});
    let response = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/runs/{}/continuation",
            remote.url(),
            run.id
        ))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401, "no key");
    for scope in [Scope::Operator, Scope::Read] {
        let refused = store(&key(&remote, &[scope]).await.token)
            .continue_run(run.id, run.revision, continuation())
            .await
            .expect_err("not an executor");
        assert!(
            matches!(refused, StoreError::Forbidden { .. }),
            "{scope:?}: {refused:?}"
        );
        assert!(
            refused.to_string().contains("`executor` scope"),
            "{refused}"
        );
    }
    assert_eq!(
        remote.backing().get_run(run.id).await.unwrap(),
        run,
        "the run is as it was"
    );
    let counts = remote.backing().run_counts().await.unwrap();
    assert_eq!(
        counts[0].by_status,
        [(RunStatus::Running, 1)],
        "no successor"
    );
    let continued = executor
        .continue_run(run.id, run.revision, continuation())
        .await
        .expect("an executor continues it");
    assert_eq!(
        continued.predecessor.continued_as,
        Some(continued.successor.id)
    );
}

/// The batch of entries a remote executor sends per task step, and the writes of several runs
/// it sends at once, are the executor's: without a key they are 401, with an operator's or a reader's key 403, and neither writes an entry; an
/// executor's key does.
#[tokio::test]
async fn writing_a_batch_of_entries_needs_the_executor_scope() {
    let remote = server().await;
    let store = |token: &str| keyed(&remote, token);
    let executor = store(&key(&remote, &[Scope::Executor]).await.token);
    let run = claimed(&remote, &executor).await;
    let entries = || {
        vec![
            aiki_store::EntryRecord::new(
                run.id,
                "charge:aa",
                0,
                aiki_store::EntryKind::Task,
                aiki_store::EntryStatus::Running,
                NOW,
            )
            .attempts(1),
        ]
    };
    let response = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/runs/{}/entries/batch",
            remote.url(),
            run.id
        ))
        .json(&json!({"expected": run.revision, "entries": entries()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401, "no key");
    let writes: Vec<_> = entries()
        .into_iter()
        .map(|entry| json!({"expected": run.revision, "entry": entry}))
        .collect();
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1/entries", remote.url()))
        .json(&json!({ "writes": writes }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        401,
        "no key, several runs' writes"
    );
    for scope in [Scope::Operator, Scope::Read] {
        let refused = store(&key(&remote, &[scope]).await.token)
            .put_entries(run.revision, entries())
            .await
            .expect_err("not an executor");
        assert!(
            matches!(refused, StoreError::Forbidden { .. }),
            "{scope:?}: {refused:?}"
        );
    }
    let history = remote.backing().load_history(run.id).await.unwrap();
    assert!(history.entries.is_empty(), "nothing was written");
    executor
        .put_entries(run.revision, entries())
        .await
        .expect("an executor writes them");
    let history = remote.backing().load_history(run.id).await.unwrap();
    assert_eq!(history.entries.len(), 1);
}
