//! The server owns what the store owns: a client's start, a fork and a child start cannot set
//! a run's status, its links to other runs, a nil id or an input hash that is not its input's
//! (a child's parent is the run whose path starts it), and a fork carries only what the run it
//! forks recorded. Each refusal is 400 naming the field
//! and creates nothing.

use aiki_store::{
    EntryKind, EntryRecord, EntryStatus, Lineage, Namespace, NewFork, ParentLink, RunId, RunStatus,
    Transition,
};
use serde_json::{Value, json};

use super::support::remote::Remote;
use super::support::requests::{NOW, server};
use super::support::routes::{fork_of, new_run};

/// Posts `body` to `path`: the status and the answer's text.
async fn refused(remote: &Remote, path: &str, body: Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1{path}", remote.url()))
        .json(&body)
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// The runs of `namespace` in the store behind the server.
async fn runs_of(remote: &Remote, namespace: &Namespace) -> usize {
    let filter = aiki_store::RunFilter::default().workflow(namespace.workflow.clone());
    remote
        .backing()
        .list_runs(aiki_store::ListRuns::new(filter, 100))
        .await
        .unwrap()
        .runs
        .len()
}

#[tokio::test]
async fn a_client_start_may_not_set_what_the_store_owns() {
    let remote = server().await;
    let namespace = Namespace::new(format!("owned-{}", RunId::new()), "1.0.0");
    let other = new_run(&namespace, json!({"n": 0}));
    let other_id = other.id;
    remote.backing().create_run(other).await.unwrap();
    let start = || json!(new_run(&namespace, json!({"order": 7})));
    let cases: Vec<(&str, Value)> = vec![
        ("status", json!("completed")),
        ("status", json!("running")),
        ("status", json!("failed")),
        ("id", json!(uuid_nil())),
        ("input_hash", json!("0".repeat(64))),
        ("parent", json!(ParentLink::new(other_id, "child:x:1"))),
        (
            "lineage",
            json!(Lineage {
                forked_from: other_id,
                root: other_id
            }),
        ),
        ("continued_from", json!(other_id)),
    ];
    for (field, value) in cases {
        let mut body = start();
        body[field] = value.clone();
        let (status, answer) = refused(&remote, "/runs", body).await;
        assert_eq!(status, 400, "`{field}`: {value} was taken: {answer}");
        assert!(
            answer.contains(&format!("`{field}")),
            "names `{field}`: {answer}"
        );
    }
    assert_eq!(runs_of(&remote, &namespace).await, 1, "nothing was started");
    // The input's own hash, and a scheduled start, are taken.
    let (status, answer) = refused(&remote, "/runs", start()).await;
    assert_eq!(status, 200, "{answer}");
    let mut scheduled = start();
    scheduled["status"] = json!("scheduled");
    scheduled["due_at"] = json!(NOW + 60_000);
    let (status, answer) = refused(&remote, "/runs", scheduled).await;
    assert_eq!(status, 200, "{answer}");
}

fn uuid_nil() -> String {
    "00000000-0000-0000-0000-000000000000".to_owned()
}

/// An ended run of its own namespace with one completed task entry: its history.
async fn ended_run(remote: &Remote) -> aiki_store::History {
    let store = remote.backing();
    let namespace = Namespace::new(format!("owned-{}", RunId::new()), "1.0.0");
    store
        .create_run(new_run(&namespace, json!({"n": 1})))
        .await
        .unwrap();
    let claim = aiki_store::ClaimRequest::new("w", vec![namespace], "default", 1, NOW);
    let run = store.claim(claim).await.unwrap().runs.remove(0);
    let mut entry = EntryRecord::new(
        run.id,
        "task:charge",
        0,
        EntryKind::Task,
        EntryStatus::Completed,
        NOW,
    );
    entry.output = Some(json!({"charged": 10}));
    store.put_entry(run.revision, entry).await.unwrap();
    store
        .transition(run.id, run.revision, Transition::to(RunStatus::Failed, NOW))
        .await
        .unwrap();
    store.load_history(run.id).await.unwrap()
}

/// A change that spoils a fork.
type Spoil = Box<dyn Fn(&mut NewFork)>;

#[tokio::test]
async fn a_fork_carries_only_what_its_run_recorded() {
    let remote = server().await;
    let source = ended_run(&remote).await;
    let namespace = source.run.namespace.clone();
    let spoilt: Vec<(&str, Spoil)> = vec![
        (
            "entries[0]",
            Box::new(|fork: &mut NewFork| {
                fork.entries[0].output = Some(json!({"charged": 0}));
            }),
        ),
        (
            "entries[1]",
            Box::new(|fork: &mut NewFork| {
                let mut made_up = fork.entries[0].clone();
                made_up.address = "task:refund".to_owned();
                fork.entries.push(made_up);
            }),
        ),
        (
            "run.input",
            Box::new(|fork: &mut NewFork| {
                fork.run.input = json!({"n": 2});
                fork.run.input_hash = super::support::routes::hash(&fork.run.input);
            }),
        ),
        (
            "run.status",
            Box::new(|fork: &mut NewFork| fork.run.status = RunStatus::Completed),
        ),
        (
            "run.lineage",
            Box::new(|fork: &mut NewFork| {
                fork.run.lineage = Some(Lineage {
                    forked_from: fork.run.lineage.unwrap().forked_from,
                    root: RunId::new(),
                });
            }),
        ),
        (
            "run.parent",
            Box::new(|fork: &mut NewFork| {
                fork.run.parent = Some(ParentLink::new(RunId::new(), "child:x:1"));
            }),
        ),
    ];
    for (field, spoil) in spoilt {
        let mut fork = fork_of(&source);
        spoil(&mut fork);
        let (status, answer) = refused(&remote, "/forks", json!(fork)).await;
        assert_eq!(
            status, 400,
            "a fork with `{field}` spoilt was taken: {answer}"
        );
        assert!(
            answer.contains(&format!("`{field}")),
            "names `{field}`: {answer}"
        );
    }
    assert_eq!(runs_of(&remote, &namespace).await, 1, "no fork was made");
    // The fork the runtime makes is taken.
    let (status, answer) = refused(&remote, "/forks", json!(fork_of(&source))).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(runs_of(&remote, &namespace).await, 2);
}

#[tokio::test]
async fn a_child_start_leaves_the_store_its_fields_and_its_parent_link() {
    let remote = server().await;
    let namespace = Namespace::new(format!("owned-{}", RunId::new()), "1.0.0");
    for n in 0..2 {
        remote
            .backing()
            .create_run(new_run(&namespace, json!({"n": n})))
            .await
            .unwrap();
    }
    let claim = aiki_store::ClaimRequest::new("w", vec![namespace.clone()], "default", 2, NOW);
    let runs = remote.backing().claim(claim).await.unwrap().runs;
    let (parent, other) = (&runs[0], &runs[1]);
    let body = || {
        let mut child = new_run(&namespace, json!({"child": 1}));
        child.parent = Some(ParentLink::new(parent.id, "child:kid:1"));
        let mut entry = EntryRecord::new(
            parent.id,
            "child:kid:1",
            0,
            EntryKind::Child,
            EntryStatus::Completed,
            NOW,
        );
        entry.attempts = 1;
        json!({"expected": parent.revision, "entry": entry, "child": child})
    };
    let path = format!("/runs/{}/children", parent.id);
    let cases: Vec<(&str, Value)> = vec![
        ("status", json!("completed")),
        ("input_hash", json!("0".repeat(64))),
        ("id", json!(uuid_nil())),
        ("continued_from", json!(other.id)),
    ];
    for (field, value) in cases {
        let mut request = body();
        request["child"][field] = value.clone();
        let (status, answer) = refused(&remote, &path, request).await;
        assert_eq!(
            status, 400,
            "a child with `{field}`: {value} was taken: {answer}"
        );
        assert!(
            answer.contains(&format!("`child.{field}")),
            "names `child.{field}`: {answer}"
        );
    }
    assert_eq!(
        runs_of(&remote, &namespace).await,
        2,
        "no child was started"
    );
    // A child that names another parent is the path's run's child, at the entry's address.
    let mut request = body();
    request["child"]["parent"] = json!(ParentLink::new(other.id, "child:elsewhere:1"));
    let (status, answer) = refused(&remote, &path, request).await;
    assert_eq!(status, 200, "{answer}");
    let child: aiki_store::RunRecord = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        child.parent,
        Some(ParentLink::new(parent.id, "child:kid:1")),
        "the server stamps the parent"
    );
}
