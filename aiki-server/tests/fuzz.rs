//! A structure-aware fuzz pass over every route: requests built from the routes' own request
//! types around a real world (queued and running runs on a SQLite file), then mutated (fields
//! dropped or given the wrong type, bodies truncated or oversized, other or unknown run ids,
//! shifted revisions, missing, malformed or under-scoped keys, wrong content types), from a
//! fixed seed. Every answer must be one the API documents: no panic, no 5xx (there is no store
//! outage here), an error body on every 4xx, and a 4xx leaves the store exactly as it was
//! (every run's status and revision, and the rows of its history, compared). The statuses seen
//! are printed. `AIKI_FUZZ_REQUESTS` sets how many requests (default 2,000).

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use aiki_server::ServerConfig;
use aiki_server::keys::generate;
use aiki_store::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use support::remote::Remote;
use support::routes::{fingerprint, requests};

const NOW: Millis = 4_000_000_000_000;
const BODY_LIMIT: usize = 32 * 1024;

/// What a mutation does to a well-formed request.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    DropField(usize),
    WrongType(usize, u8),
    Truncate(usize),
    Oversize,
    OtherRun,
    UnknownRun,
    GarbageId,
    Revision(i64),
    NoKey,
    BadKey(u8),
    ReadOnlyKey,
    NoContentType,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::None),
        3 => (0usize..8).prop_map(Mutation::DropField),
        3 => ((0usize..8), any::<u8>()).prop_map(|(at, kind)| Mutation::WrongType(at, kind)),
        2 => (0usize..400).prop_map(Mutation::Truncate),
        1 => Just(Mutation::Oversize),
        2 => Just(Mutation::OtherRun),
        2 => Just(Mutation::UnknownRun),
        1 => Just(Mutation::GarbageId),
        2 => (-3i64..4).prop_map(Mutation::Revision),
        1 => Just(Mutation::NoKey),
        1 => any::<u8>().prop_map(Mutation::BadKey),
        1 => Just(Mutation::ReadOnlyKey),
        1 => Just(Mutation::NoContentType),
    ]
}

/// The fields of a body, in order, with a path to each (one level into objects).
fn field_paths(body: &Value) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    if let Value::Object(map) = body {
        for (key, value) in map {
            paths.push(vec![key.clone()]);
            if let Value::Object(inner) = value {
                for inner_key in inner.keys() {
                    paths.push(vec![key.clone(), inner_key.clone()]);
                }
            }
        }
    }
    paths
}

fn at_path<'a>(
    body: &'a mut Value,
    path: &[String],
) -> Option<(&'a mut serde_json::Map<String, Value>, String)> {
    let (last, parents) = path.split_last()?;
    let mut node = body;
    for key in parents {
        node = node.get_mut(key)?;
    }
    Some((node.as_object_mut()?, last.clone()))
}

fn wrong_value(value: &Value, kind: u8) -> Value {
    match (value, kind % 4) {
        (Value::String(_), 0) => json!(12345),
        (Value::Number(_), 0) => json!("12345"),
        (_, 0) => json!("x"),
        (_, 1) => Value::Null,
        (_, 2) => json!([1, "two", {}]),
        _ => json!({"unexpected": true}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_mutated_requests_as_documented() {
    let total: usize = std::env::var("AIKI_FUZZ_REQUESTS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(2_000);
    let path = std::env::temp_dir().join(format!("aiki-fuzz-{}.db", RunId::new()));
    let store = aiki_store::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let config = ServerConfig::default()
        .clock(aiki::ManualClock::new(NOW))
        .body_limit(BODY_LIMIT)
        .request_timeout(Duration::from_secs(10));
    let remote = Remote::start(store.clone(), config).await;
    let all = generate("fuzz", Scope::ALL.to_vec(), NOW);
    let read_only = generate("fuzz-read", vec![Scope::Read], NOW);
    store.create_key(all.record.clone()).await.unwrap();
    store.create_key(read_only.record.clone()).await.unwrap();
    let namespace = Namespace::new("fuzz", "1.0.0");
    let owner = "fuzz-worker";
    let http = reqwest::Client::new();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = (mutation(), 0usize..64, any::<u16>());
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut unchanged_checked = 0usize;
    let mut running: Option<RunRecord> = None;
    for _ in 0..total {
        // A running run to aim at: claimed afresh once the last one moved on.
        let target = match &running {
            Some(run) if store.get_run(run.id).await.unwrap().status == RunStatus::Running => {
                store.get_run(run.id).await.unwrap()
            }
            _ => {
                let new = NewRun::new(namespace.clone(), json!({}), "0".repeat(64), NOW);
                store.create_run(new).await.unwrap();
                let claimed = store
                    .claim(ClaimRequest::new(
                        owner,
                        vec![namespace.clone()],
                        "default",
                        1,
                        NOW,
                    ))
                    .await
                    .unwrap();
                let run = claimed
                    .runs
                    .into_iter()
                    .next()
                    .expect("a queued run to claim");
                running = Some(run.clone());
                run
            }
        };
        let other = store
            .list_runs(ListRuns::new(RunFilter::default(), 1))
            .await
            .unwrap()
            .runs
            .into_iter()
            .next()
            .map_or(target.id, |run| run.id);
        let (mutation, route, salt) = strategy.new_tree(&mut runner).unwrap().current();
        let mut routes = requests(&target, owner, None);
        let request = routes.swap_remove(route % routes.len());
        let mut body = request.body.clone();
        let mut id = target.id.to_string();
        let mut key = Some(all.token.clone());
        let mut content_type = Some("application/json");
        let mut text: Option<String> = None;
        let fields = body.as_ref().map(field_paths).unwrap_or_default();
        match &mutation {
            Mutation::None => {}
            Mutation::DropField(at) if !fields.is_empty() => {
                let field = &fields[at % fields.len()];
                if let Some((map, last)) = body.as_mut().and_then(|body| at_path(body, field)) {
                    map.remove(&last);
                }
            }
            Mutation::WrongType(at, kind) if !fields.is_empty() => {
                let field = &fields[at % fields.len()];
                if let Some((map, last)) = body.as_mut().and_then(|body| at_path(body, field)) {
                    let wrong = wrong_value(&map[&last], *kind);
                    map.insert(last, wrong);
                }
            }
            Mutation::Truncate(at) => {
                if let Some(body) = &body {
                    let full = body.to_string();
                    text = Some(full[..(*at).min(full.len().saturating_sub(1))].to_owned());
                }
            }
            Mutation::Oversize => {
                if let Some(Value::Object(map)) = body.as_mut() {
                    map.insert("padding".to_owned(), json!("x".repeat(BODY_LIMIT * 2)));
                }
            }
            Mutation::OtherRun => id = other.to_string(),
            Mutation::UnknownRun => id = RunId::new().to_string(),
            Mutation::GarbageId => id = format!("{salt}-not-a-run"),
            Mutation::Revision(delta) => {
                if let Some(Value::Object(map)) = body.as_mut()
                    && let Some(expected) = map.get("expected").and_then(Value::as_i64)
                {
                    map.insert(
                        "expected".to_owned(),
                        json!(expected.saturating_add(*delta).max(0)),
                    );
                }
            }
            Mutation::NoKey => key = None,
            Mutation::BadKey(kind) => {
                key = Some(match kind % 3 {
                    0 => "aiki_zzz_yyy".to_owned(),
                    1 => format!("{}0", all.token),
                    _ => format!("aiki_{}_{}", all.record.id, "0".repeat(64)),
                })
            }
            Mutation::ReadOnlyKey => key = Some(read_only.token.clone()),
            Mutation::NoContentType => content_type = None,
            _ => {}
        }
        let before = fingerprint(&store, RunFilter::default()).await;
        let url = format!(
            "{}/api/v1{}",
            remote.url(),
            request
                .path
                .replace("{id}", &id)
                .replace("{key}", ConfigKey::DaemonsInterval.as_str(),)
        );
        let mut call = http.request(request.method.clone(), url);
        if let Some(key) = &key {
            call = call.bearer_auth(key);
        }
        if let Some(content_type) = content_type {
            call = call.header("content-type", content_type);
        }
        if let Some(text) = text.or_else(|| body.as_ref().map(Value::to_string)) {
            call = call.body(text);
        }
        let response = call.send().await.unwrap_or_else(|error| {
            panic!(
                "no answer (a panic in the server?) to {mutation:?} on {}: {error}",
                request.path
            )
        });
        let status = response.status().as_u16();
        let answer = response.text().await.unwrap_or_default();
        *seen.entry(format!("{status}")).or_default() += 1;
        assert!(
            status < 500,
            "{status} for {mutation:?} on {} {}: {answer}",
            request.method,
            request.path
        );
        if status >= 400 {
            let error: ErrorBody = serde_json::from_str(&answer).unwrap_or_else(|_| {
                panic!(
                    "{status} without an error body for {mutation:?} on {}: {answer}",
                    request.path
                )
            });
            assert!(!error.code.is_empty() && !error.message.is_empty());
            assert_eq!(
                fingerprint(&store, RunFilter::default()).await,
                before,
                "{status} {} changed the store ({mutation:?} on {} {})",
                error.code,
                request.method,
                request.path
            );
            unchanged_checked += 1;
        }
    }
    let ok: usize = seen
        .iter()
        .filter(|(status, _)| status.starts_with('2'))
        .map(|(_, count)| count)
        .sum();
    eprintln!(
        "fuzz: {total} requests over {} routes; statuses {seen:?}; {ok} answered 2xx; \
         0 panics, 0 5xx; the store compared unchanged after each of the {unchanged_checked} 4xx",
        requests(
            &store.get_run(running.unwrap().id).await.unwrap(),
            owner,
            None
        )
        .len()
    );
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
