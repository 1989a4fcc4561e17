//! The schedule routes: no key is 401 and a key without the route's scope 403, neither
//! changing anything; bad bodies (malformed JSON, an unknown action, an invalid cron
//! expression, a backfill into the future, an unknown schedule) get the error body with the
//! right status, and the store keeps what it had.

use crate::support;

use aiki_server::ServerConfig;
use aiki_server::keys::generate;
use aiki_store::http::HttpStore;
use aiki_store::prelude::*;
use aiki_store::{
    ErrorBody, Namespace, OverlapPolicy, RunId, ScheduleAction, ScheduleDefinition, ScheduleOrigin,
    ScheduleRecord, ScheduleSpec, Scope, StoreError,
};
use serde_json::json;
use support::remote::Remote;

const NOW: i64 = 4_000_000_000_000;

/// The workflow version the schedules of these tests start, published in the catalog.
fn routes() -> Namespace {
    Namespace::new("routes", "1")
}

/// A server on a fresh store whose catalog holds [`routes`] (any input).
async fn server() -> Remote {
    let config = ServerConfig::default().clock(aiki::ManualClock::new(NOW));
    let remote = Remote::start(aiki_store::connect("memory:").await.unwrap(), config).await;
    publish(&remote, &routes(), json!({})).await;
    remote
}

/// The token of a new key of `scopes` on the server's store.
async fn token(remote: &Remote, scopes: &[Scope]) -> String {
    let key = generate("test", scopes.to_vec(), NOW);
    remote
        .backing()
        .create_key(key.record.clone())
        .await
        .unwrap();
    key.token
}

/// A client on the server with a new key of `scopes`.
async fn client(remote: &Remote, scopes: &[Scope]) -> HttpStore {
    let token = token(remote, scopes).await;
    HttpStore::new(&remote.url()).unwrap().with_key(token)
}

fn schedule(origin: ScheduleOrigin) -> ScheduleRecord {
    let definition = ScheduleDefinition {
        spec: ScheduleSpec::cron_in("0 9 * * *", "Europe/Berlin"),
        namespace: routes(),
        input: json!({}),
        input_hash: support::routes::hash(&json!({})),
        pool: "default".to_owned(),
        overlap: OverlapPolicy::Skip,
        catchup_window_ms: None,
        jitter_ms: 0,
    };
    ScheduleRecord::new(format!("s-{}", RunId::new()), definition, origin, 1, NOW).unwrap()
}

/// `POST path` with `body` and `authorization` (if any): the status and the error body.
async fn post(
    remote: &Remote,
    path: &str,
    body: &str,
    authorization: Option<&str>,
) -> (u16, Option<ErrorBody>) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/api/v1{path}", remote.url()))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json::<ErrorBody>().await.ok())
}

#[tokio::test]
async fn schedule_routes_need_their_scope_and_refusals_change_nothing() {
    let remote = server().await;
    let operator = client(&remote, &[Scope::Operator]).await;
    let kept = schedule(ScheduleOrigin::Client);
    operator
        .create_schedule(kept.clone(), None)
        .await
        .expect("an operator creates");
    let before = remote.backing().schedule(&kept.name).await.unwrap();
    // No key: 401 on every schedule route, reads included.
    let body =
        serde_json::to_string(&json!({"schedule": schedule(ScheduleOrigin::Client)})).unwrap();
    for (path, body) in [
        ("/schedules", body.as_str()),
        (
            "/schedules/show",
            &format!(r#"{{"name": "{}"}}"#, kept.name),
        ),
        (
            "/schedules/actions",
            &format!(
                r#"{{"name": "{}", "action": {{"action": "trigger"}}, "now": 0}}"#,
                kept.name
            ),
        ),
    ] {
        let (status, error) = post(&remote, path, body, None).await;
        assert_eq!(status, 401, "{path}");
        assert_eq!(error.map(|e| e.code), Some("unauthorized".into()), "{path}");
    }
    // Wrong scopes: 403, typed, nothing written.
    let reader = client(&remote, &[Scope::Read]).await;
    assert_eq!(
        reader.schedules().await.unwrap().len(),
        1,
        "a read key lists"
    );
    let refusals = [
        reader
            .create_schedule(schedule(ScheduleOrigin::Client), None)
            .await
            .map(drop),
        reader
            .act_on_schedule(&kept.name, ScheduleAction::Trigger, None, NOW)
            .await
            .map(drop),
        operator
            .declare_schedules(vec![schedule(ScheduleOrigin::Code)], vec![], "w", NOW)
            .await
            .map(drop),
        client(&remote, &[Scope::Executor])
            .await
            .act_on_schedule(
                &kept.name,
                ScheduleAction::Pause { reason: None },
                None,
                NOW,
            )
            .await
            .map(drop),
    ];
    for refused in refusals {
        assert!(
            matches!(refused, Err(StoreError::Forbidden { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(
        remote.backing().schedules().await.unwrap(),
        vec![before.clone()]
    );
    assert_eq!(
        remote
            .backing()
            .schedule_log(&kept.name, 100)
            .await
            .unwrap()
            .len(),
        1,
        "only its creation"
    );
    assert_eq!(remote.backing().run_counts().await.unwrap(), vec![]);
}

#[tokio::test]
async fn bad_schedule_requests_are_refused_and_change_nothing() {
    let remote = server().await;
    let operator = client(&remote, &[Scope::Operator]).await;
    let kept = schedule(ScheduleOrigin::Client);
    operator.create_schedule(kept.clone(), None).await.unwrap();
    let before = remote.backing().schedules().await.unwrap();
    let bearer = format!("Bearer {}", token(&remote, &[Scope::Operator]).await);
    let mut invalid = schedule(ScheduleOrigin::Client);
    invalid.definition.spec = ScheduleSpec::cron("0 25 * * *");
    let invalid = serde_json::to_string(&json!({ "schedule": invalid })).unwrap();
    let name = &kept.name;
    for (path, body, status, says) in [
        ("/schedules", "{not json", 400, "json"),
        ("/schedules", r#"{"schedule": 1}"#, 422, "schedule"),
        (
            "/schedules",
            invalid.as_str(),
            400,
            "cron expression `0 25 * * *`",
        ),
        (
            "/schedules/actions",
            &format!(r#"{{"name": "{name}", "action": {{"action": "explode"}}, "now": 0}}"#),
            422,
            "explode",
        ),
        (
            "/schedules/actions",
            &format!(
                r#"{{"name": "{name}", "action": {{"action": "backfill", "from": 0, "to": {}}}, "now": 0}}"#,
                NOW + 86_400_000
            ),
            400,
            "covers the past",
        ),
        (
            "/schedules/actions",
            r#"{"name": "no-such", "action": {"action": "trigger"}, "now": 0}"#,
            404,
            "schedule `no-such`",
        ),
        (
            "/schedules/show",
            r#"{"name": "no-such"}"#,
            404,
            "schedule `no-such`",
        ),
    ] {
        let (got, error) = post(&remote, path, body, Some(&bearer)).await;
        let error = error.unwrap_or_else(|| panic!("{path} {body}: an error body"));
        assert_eq!(got, status, "{path} {body}: {error:?}");
        assert!(
            error.message.to_lowercase().contains(&says.to_lowercase()),
            "{path} {body}: {}",
            error.message
        );
    }
    assert_eq!(remote.backing().schedules().await.unwrap(), before);
    assert_eq!(remote.backing().run_counts().await.unwrap(), vec![]);
}

/// The catalog's build of `typed-input@1` takes an integer; the client's code below a string.
#[aiki::workflow(name = "typed-input", version = "1")]
async fn typed_input(_run: &aiki::Run, _team: String) -> Result<(), aiki::WorkflowError> {
    Ok(())
}

/// Publishes `namespace` in the catalog, its input as `input` (a JSON schema) says.
async fn publish(remote: &Remote, namespace: &Namespace, input: serde_json::Value) {
    let schema = |value| aiki_store::SchemaRecord::new(value, "f");
    let entry = aiki_store::CatalogEntry::new(namespace.clone(), schema(input), schema(json!({})));
    remote.backing().publish_catalog(entry, NOW).await.unwrap();
}

/// A schedule, and a start, whose input the server's catalog refuses come back to a client as
/// the typed `ClientError::InvalidInput` naming the input, as they do on a store without a
/// server, never as a backend error; nothing is written.
#[tokio::test]
async fn an_input_the_catalog_refuses_comes_back_to_a_client_typed() {
    let remote = server().await;
    let namespace = Namespace::new("typed-input", "1");
    publish(&remote, &namespace, json!({"type": "integer"})).await;
    let operator = client(&remote, &[Scope::Operator]).await;
    let client = aiki::Client::new(std::sync::Arc::new(operator));
    let every_hour = ScheduleSpec::every(std::time::Duration::from_secs(3600));
    let refused = client
        .schedule::<TypedInput>("typed", every_hour, "ops".to_owned())
        .await
        .expect_err("the catalog takes an integer");
    assert!(
        matches!(&refused, aiki::ClientError::InvalidInput { what, .. }
            if what.contains("typed-input@1")),
        "{refused:?}"
    );
    let refused = client
        .start::<TypedInput>("ops".to_owned())
        .await
        .expect_err("the catalog takes an integer");
    assert!(
        matches!(&refused, aiki::ClientError::InvalidInput { .. }),
        "{refused:?}"
    );
    assert!(remote.backing().schedules().await.unwrap().is_empty());
    assert_eq!(remote.backing().run_counts().await.unwrap(), vec![]);
}

/// A schedule of a workflow version no worker has published yet is refused (422
/// `not_in_catalog`, read back by a client as `ClientError::NotInCatalog`), and so is a
/// redefinition onto one: its input cannot be checked, and its runs would fail later with no
/// one watching. Nothing is written. Once a worker has published the version the same schedule
/// is created, its input hash the server's own (not the caller's).
#[tokio::test]
async fn a_schedule_of_a_version_no_worker_published_is_refused() {
    let remote = server().await;
    let operator = client(&remote, &[Scope::Operator]).await;
    let mut unpublished = schedule(ScheduleOrigin::Client);
    unpublished.definition.namespace = Namespace::new(format!("later-{}", RunId::new()), "1");
    unpublished.definition.input = json!({"team": "ops"});
    let body = serde_json::to_string(&json!({"schedule": unpublished})).unwrap();
    let bearer = format!("Bearer {}", token(&remote, &[Scope::Operator]).await);
    let (status, error) = post(&remote, "/schedules", &body, Some(&bearer)).await;
    let error = error.expect("an error body");
    assert_eq!(
        (status, error.code.as_str()),
        (422, "not_in_catalog"),
        "{error:?}"
    );
    assert!(
        error.message.contains("start a worker"),
        "{}",
        error.message
    );
    let client = aiki::Client::new(std::sync::Arc::new(operator));
    let refused = client
        .store()
        .create_schedule(unpublished.clone(), None)
        .await
        .map(drop)
        .map_err(aiki::ClientError::from);
    assert!(
        matches!(&refused, Err(aiki::ClientError::NotInCatalog { namespace, .. })
            if *namespace == unpublished.definition.namespace.to_string()),
        "{refused:?}"
    );
    assert!(remote.backing().schedules().await.unwrap().is_empty());
    // Published: created, with the input hash of a start of it.
    publish(
        &remote,
        &unpublished.definition.namespace,
        json!({"type": "object"}),
    )
    .await;
    let created = client
        .store()
        .create_schedule(unpublished.clone(), None)
        .await
        .expect("created once published");
    let hash = aiki::input_hash(&json!({"team": "ops"})).unwrap();
    assert_eq!(created.record().definition.input_hash, hash);
    assert_ne!(unpublished.definition.input_hash, hash, "not the caller's");
    // A redefinition onto a version no worker has published: refused, nothing changed.
    let before = remote.backing().schedule(&unpublished.name).await.unwrap();
    let mut onto = before.definition.clone();
    onto.namespace = Namespace::new(format!("later-{}", RunId::new()), "2");
    let redefine = ScheduleAction::Redefine {
        definition: Box::new(onto),
        generation: 2,
    };
    let refused = client
        .store()
        .act_on_schedule(&unpublished.name, redefine, None, NOW)
        .await
        .map(drop)
        .map_err(aiki::ClientError::from);
    assert!(
        matches!(refused, Err(aiki::ClientError::NotInCatalog { .. })),
        "{refused:?}"
    );
    assert_eq!(
        remote.backing().schedule(&unpublished.name).await.unwrap(),
        before
    );
}
