//! The batch of entries a remote executor sends per task step (`POST /runs/{id}/entries/batch`,
//! `ExecutorStore::put_entries`): every way its body can be wrong is refused with the error body
//! and writes nothing, and every answer states the store's payload limit, which is what tells
//! a remote executor that the route is served.

use crate::support;

use aiki_server::ServerConfig;
use aiki_store::{EntryKind, EntryRecord, EntryStatus, RunId};
use serde_json::{Value, json};
use support::remote::Remote;

use support::requests::{NOW, post_json, queued_run, roomy_server, server, snapshot};

fn entry(run: RunId, address: &str, index: u32) -> EntryRecord {
    EntryRecord::new(
        run,
        address,
        index,
        EntryKind::Task,
        EntryStatus::Running,
        NOW,
    )
    .attempts(1)
}

fn batch(entries: &[EntryRecord]) -> String {
    json!({ "expected": 1, "entries": entries }).to_string()
}

#[tokio::test]
async fn a_wrong_batch_is_refused_whole_and_writes_nothing() {
    let remote = server().await;
    let run = queued_run(&remote).await;
    let before = snapshot(&remote, run.id).await;
    let path = format!("/runs/{}/entries/batch", run.id);
    let refused = |(status, body): (u16, aiki_store::ErrorBody), want: u16, says: &str| {
        assert_eq!(
            (status, body.code.as_str()),
            (want, "invalid_request"),
            "{body:?}"
        );
        assert!(body.message.contains(says), "says {says:?}: {body:?}");
    };

    refused(
        post_json(&remote, &path, &batch(&[])).await,
        400,
        "1 to 1000",
    );
    let other = entry(RunId::new(), "charge:aa", 0);
    let mine = entry(run.id, "charge:aa", 0);
    refused(
        post_json(&remote, &path, &batch(&[mine.clone(), other])).await,
        400,
        "belongs to run",
    );
    refused(
        post_json(&remote, &path, &batch(&[mine.clone(), mine.clone()])).await,
        400,
        "twice",
    );
    refused(
        post_json(
            &remote,
            &path,
            &json!({"expected": 1, "entries": 7}).to_string(),
        )
        .await,
        422,
        "entries",
    );
    refused(
        post_json(
            &remote,
            &path,
            &json!({"entries": [mine.clone()]}).to_string(),
        )
        .await,
        422,
        "expected",
    );
    let mut big = mine.clone();
    big.output = Some(Value::String("x".repeat(32 * 1024)));
    let (status, body) = post_json(&remote, &path, &batch(&[big])).await;
    assert_eq!((status, body.code.as_str()), (413, "too_large"), "{body:?}");
    let unknown = RunId::new();
    let (status, body) = post_json(
        &remote,
        &format!("/runs/{unknown}/entries/batch"),
        &batch(&[entry(unknown, "charge:aa", 0)]),
    )
    .await;
    assert_eq!((status, body.code.as_str()), (404, "not_found"), "{body:?}");
    assert_eq!(
        snapshot(&remote, run.id).await,
        before,
        "nothing was written"
    );

    // More entries than a batch holds (a body the default body limit lets through).
    let roomy = roomy_server().await;
    let run = queued_run(&roomy).await;
    let many: Vec<EntryRecord> = (0..1_001)
        .map(|index| entry(run.id, "step:aa", index))
        .collect();
    let (status, body) = post_json(
        &roomy,
        &format!("/runs/{}/entries/batch", run.id),
        &batch(&many),
    )
    .await;
    assert_eq!(
        (status, body.code.as_str()),
        (400, "invalid_request"),
        "{body:?}"
    );
    assert!(body.message.contains("1001 entries"), "{body:?}");
    assert_eq!(snapshot(&roomy, run.id).await.1, 0, "nothing was written");
}

/// The limit of the store served, on a success and on an error alike.
#[tokio::test]
async fn every_answer_states_the_payload_limit() {
    let limited = aiki_store::memory::MemoryStore::new().with_payload_limit(12_345);
    let remote = Remote::start(
        std::sync::Arc::new(limited),
        ServerConfig::default().insecure_no_auth(),
    )
    .await;
    for (path, status) in [("/api/v1/health", 200), ("/api/v1/nowhere", 404)] {
        let response = reqwest::get(format!("{}{path}", remote.url()))
            .await
            .expect("the server answers");
        assert_eq!(response.status().as_u16(), status);
        let stated = response
            .headers()
            .get(aiki_store::api::PAYLOAD_LIMIT)
            .map(|value| value.to_str().unwrap().to_owned());
        assert_eq!(stated.as_deref(), Some("12345"), "{path}");
    }
}
