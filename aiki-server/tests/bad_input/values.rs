//! Input a database refuses is refused first, as `invalid_request` naming the field, on SQLite
//! and PostgreSQL alike: a NUL character in any text field of any route, a name longer than an
//! index row holds, integers out of range, lists over their caps; and what a caller is told
//! never holds a driver's text or a constraint's name.

use aiki_server::ServerConfig;
use aiki_server::keys::generate;
use aiki_store::*;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::support::remote::Remote;
use super::support::routes::{
    Fields, Fingerprint, NOW, Request, at_mut, fingerprint, integer_fields, new_run, requests,
    text_fields,
};

/// A server with keys in front of `store`, a running run to aim at and an ended one to fork.
struct World {
    remote: Remote,
    store: BoxStore,
    token: String,
    namespace: Namespace,
    ended: History,
    http: reqwest::Client,
}

const OWNER: &str = "values-worker";

impl World {
    async fn new(store: BoxStore) -> World {
        let config = ServerConfig::default().clock(aiki::ManualClock::new(NOW));
        let remote = Remote::start(store.clone(), config).await;
        let key = generate("values", Scope::ALL.to_vec(), NOW);
        store.create_key(key.record.clone()).await.unwrap();
        let namespace = Namespace::new(format!("values-{}", RunId::new()), "1.0.0");
        let ended = running(&store, &namespace).await;
        let mut entry = EntryRecord::new(
            ended.id,
            "task:done",
            0,
            EntryKind::Task,
            EntryStatus::Completed,
            NOW,
        );
        entry.output = Some(json!({"ok": true}));
        store.put_entry(ended.revision, entry).await.unwrap();
        store
            .transition(
                ended.id,
                ended.revision,
                Transition::to(RunStatus::Completed, NOW).output(json!(1), "fp"),
            )
            .await
            .unwrap();
        let ended = store.load_history(ended.id).await.unwrap();
        World {
            remote,
            store,
            token: key.token,
            namespace,
            ended,
            http: reqwest::Client::new(),
        }
    }

    /// A new running run of the world's namespace, claimed by [`OWNER`].
    async fn running(&self) -> RunRecord {
        running(&self.store, &self.namespace).await
    }

    /// Every run of the namespace: status, revision and its history's counts.
    async fn fingerprint(&self) -> Fingerprint {
        let filter = RunFilter::default().workflow(self.namespace.workflow.clone());
        fingerprint(&self.store, filter).await
    }

    /// Sends `body` to the route of `request` about `run`: the status and the answer.
    async fn send(&self, request: &Request, run: RunId, body: &Value) -> (u16, Value) {
        let path = request
            .path
            .replace("{id}", &run.to_string())
            .replace("{key}", ConfigKey::DaemonsInterval.as_str());
        let response = self
            .http
            .request(
                request.method.clone(),
                format!("{}/api/v1{path}", self.remote.url()),
            )
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("the server answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(json!(text)))
    }

    /// Spoils each field `fields` picks of every route's request with each of `spoilt`, and
    /// checks each answer with `check` (route, field, status, answer); a refusal must leave
    /// the store as it was.
    async fn spoil(
        &self,
        fields: fn(&Value) -> Fields,
        spoilt: &dyn Fn(&Value) -> Vec<Value>,
        check: &dyn Fn(&str, &str, u16, &Value),
    ) -> usize {
        let mut sent = 0;
        let mut target = self.running().await;
        let count = requests(&target, OWNER, Some(&self.ended)).len();
        for route in 0..count {
            let well_formed = requests(&target, OWNER, Some(&self.ended)).swap_remove(route);
            let Some(body) = &well_formed.body else {
                continue;
            };
            for (path, name) in fields(body) {
                let original = at_mut(&mut body.clone(), &path).clone();
                for bad in spoilt(&original) {
                    if self.store.get_run(target.id).await.unwrap().status != RunStatus::Running {
                        target = self.running().await;
                    }
                    let request = requests(&target, OWNER, Some(&self.ended)).swap_remove(route);
                    let mut body = request.body.clone().expect("a body");
                    *at_mut(&mut body, &path) = bad;
                    let before = self.fingerprint().await;
                    let (status, answer) = self.send(&request, target.id, &body).await;
                    let route = format!("{} {}", request.method, request.path);
                    check(&route, &name, status, &answer);
                    if status >= 400 {
                        assert_eq!(
                            self.fingerprint().await,
                            before,
                            "{status} on {route} ({name}) changed the store"
                        );
                    }
                    sent += 1;
                }
            }
        }
        sent
    }
}

/// A new running run of `namespace`, claimed by [`OWNER`].
async fn running(store: &BoxStore, namespace: &Namespace) -> RunRecord {
    let new = new_run(namespace, json!({"n": 0}));
    store.create_run(new).await.unwrap();
    let claim = ClaimRequest::new(OWNER, vec![namespace.clone()], "default", 1, NOW);
    let claimed = store.claim(claim).await.unwrap();
    claimed.runs.into_iter().next().expect("a run to claim")
}

/// A NUL character in any text field of any route's body (payloads aside) is refused as
/// `invalid_request`: 400 naming the field (422 where the field is an id or a name of the
/// contract's, which then does not parse), and nothing is written.
async fn a_nul_in_any_text_field_is_refused(store: BoxStore) {
    let world = World::new(store).await;
    let sent = world
        .spoil(
            text_fields,
            &|original| vec![json!(format!("{}\u{0}x", original.as_str().unwrap_or("")))],
            &|route, field, status, answer| {
                assert!(
                    status == 400 || status == 422,
                    "a NUL in `{field}` of {route}: {status} {answer}"
                );
                assert_eq!(
                    answer["code"], "invalid_request",
                    "{route} {field}: {answer}"
                );
                if status == 400 {
                    assert_eq!(
                        answer["details"]["field"], field,
                        "{route}: names the field: {answer}"
                    );
                }
            },
        )
        .await;
    assert!(sent > 100, "only {sent} fields spoilt");
    eprintln!("values: a NUL in each of {sent} text fields over every route, each refused");
}

/// Integers out of range in any field of any route's body: never a 5xx, an error body on
/// every refusal, and a refusal writes nothing.
async fn integers_out_of_range_are_refused(store: BoxStore) {
    let world = World::new(store).await;
    let sent = world
        .spoil(
            integer_fields,
            &|_| {
                vec![
                    json!(u64::MAX),
                    json!(i64::MAX),
                    json!(i64::MIN),
                    json!(1u64 << 63),
                    json!(-1),
                ]
            },
            &|route, field, status, answer| {
                assert!(
                    status < 500,
                    "`{field}` out of range on {route}: {status} {answer}"
                );
                if status >= 400 {
                    assert!(
                        answer["code"].is_string() && answer["message"].is_string(),
                        "{route} {field}: {answer}"
                    );
                }
            },
        )
        .await;
    assert!(sent > 100, "only {sent} values sent");
    eprintln!("values: {sent} integers out of range over every route, none a 5xx");
}

/// Text a database's index cannot hold, shaped so that it does not compress away.
fn unindexable(bytes: usize) -> String {
    let mut text = String::new();
    while text.len() < bytes {
        text.push_str(&RunId::new().to_string());
    }
    text.truncate(bytes);
    text
}

/// Names longer than an index row, and lists over their caps, are 400 naming the field (and
/// the cap); nothing is written.
async fn long_names_and_long_lists_are_refused(store: BoxStore) {
    let world = World::new(store).await;
    let target = world.running().await;
    let before = world.fingerprint().await;
    let runs = Request {
        method: reqwest::Method::POST,
        path: aiki_store::api::path::RUNS,
        body: None,
    };
    let long = unindexable(8_000);
    let mut start = json!(new_run(&world.namespace, json!({"n": 1})));
    start["reference_id"] = json!(long);
    let (status, answer) = world.send(&runs, target.id, &start).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["details"]["field"], "reference_id", "{answer}");
    let named = new_run(&Namespace::new(long.clone(), "1"), json!(null));
    let (status, answer) = world.send(&runs, target.id, &json!(named)).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["details"]["field"], "namespace.workflow", "{answer}");
    let events = Request {
        method: reqwest::Method::POST,
        path: aiki_store::api::path::EVENTS,
        body: None,
    };
    let event = NewEvent::new(target.id, long, json!(1), NOW);
    let (status, answer) = world.send(&events, target.id, &json!(event)).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["details"]["field"], "name", "{answer}");

    // 70,000 statuses in a listing's filter: a bad request, not an outage to retry.
    let list = Request {
        method: reqwest::Method::POST,
        path: aiki_store::api::path::RUNS_LIST,
        body: None,
    };
    let mut listing = json!(ListRuns::new(RunFilter::default(), 10));
    listing["filter"]["statuses"] = json!(vec!["queued"; 70_000]);
    let (status, answer) = world.send(&list, target.id, &listing).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["details"]["field"], "filter.statuses", "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("16"),
        "{answer}"
    );

    // 1,001 moves in one `POST /transitions`.
    let transitions = Request {
        method: reqwest::Method::POST,
        path: aiki_store::api::path::TRANSITIONS,
        body: None,
    };
    let moves: Vec<Move> = (0..1_001)
        .map(|_| Move::new(RunId::new(), 1, Transition::to(RunStatus::Cancelled, NOW)))
        .collect();
    let (status, answer) = world.send(&transitions, target.id, &json!(moves)).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("1000"),
        "names the cap: {answer}"
    );
    assert_eq!(world.fingerprint().await, before, "nothing was written");
}

/// A start whose id is taken is a conflict that names no table or constraint of the
/// database; a payload may hold a NUL (it is kept as JSON text) and reads back as sent.
async fn refusals_name_no_constraint_and_payloads_keep_any_text(store: BoxStore) {
    let world = World::new(store).await;
    let target = world.running().await;
    let runs = Request {
        method: reqwest::Method::POST,
        path: aiki_store::api::path::RUNS,
        body: None,
    };
    let taken = new_run(&world.namespace, json!({"n": 0})).id(target.id);
    let (status, answer) = world.send(&runs, target.id, &json!(taken)).await;
    assert_eq!(status, 409, "{answer}");
    let text = answer.to_string();
    for driver in ["aiki_runs", "pkey", "constraint", "duplicate key"] {
        assert!(!text.contains(driver), "{driver} in {text}");
    }
    let input = json!({"text": "a\u{0}b"});
    let start = new_run(&world.namespace, input.clone());
    let (status, answer) = world.send(&runs, target.id, &json!(start)).await;
    assert_eq!(status, 200, "{answer}");
    let id: RunId = answer["run"]["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(world.store.get_run(id).await.unwrap().input, input);
}

/// A failure of the server's own answers with its code and a message that says what to do,
/// never the driver's text (which the server's log keeps).
#[tokio::test]
async fn a_store_failure_answers_no_driver_text() {
    let failures = [
        StoreError::Backend {
            source: "relation \"aiki.aiki_runs\" does not exist".into(),
        },
        StoreError::Unavailable {
            message: "error connecting to server at 10.0.0.7:5432 (aiki_runs_pkey)".to_owned(),
            source: None,
        },
    ];
    for failure in failures {
        let code = failure.code();
        let response = aiki_server::ApiError::from(failure).into_response();
        assert!(response.status().is_server_error());
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: ErrorBody = serde_json::from_slice(&body).unwrap();
        assert_eq!(body.code, code);
        let text = format!("{} {}", body.message, body.details);
        for driver in ["aiki_runs", "relation", "10.0.0.7"] {
            assert!(!text.contains(driver), "{driver} in {text}");
        }
    }
}

async fn sqlite() -> BoxStore {
    let path = std::env::temp_dir().join(format!("aiki-values-{}.db", RunId::new()));
    aiki_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

async fn postgres() -> Option<BoxStore> {
    use aiki_store::postgres::{ClaimClock, PostgresOptions, PostgresStore};
    let url = super::support::postgres::shared_database().await?;
    let store =
        PostgresStore::connect_with(PostgresOptions::new(url).claim_clock(ClaimClock::Caller))
            .await
            .expect("the PostgreSQL store opens");
    Some(std::sync::Arc::new(store))
}

macro_rules! on_every_database {
    ($($check:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    super::$check(super::sqlite().await).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    if let Some(store) = super::postgres().await {
                        super::$check(store).await;
                    }
                }
            )*
        }
    };
}

on_every_database!(
    a_nul_in_any_text_field_is_refused,
    integers_out_of_range_are_refused,
    long_names_and_long_lists_are_refused,
    refusals_name_no_constraint_and_payloads_keep_any_text,
);
