//! A well-formed request for every route, about a running run, with every optional text field
//! of its body set (so that a pass over the fields reaches each): what the fuzz pass mutates
//! and the bad-input tests spoil field by field.

use aiki_store::*;
use serde_json::{Value, json};

/// The time the requests carry.
pub const NOW: Millis = 4_000_000_000_000;

/// A well-formed request: method, path (with `{id}` and `{key}`), body.
pub struct Request {
    pub method: reqwest::Method,
    pub path: &'static str,
    pub body: Option<Value>,
}

fn post(path: &'static str, body: Value) -> Request {
    Request {
        method: reqwest::Method::POST,
        path,
        body: Some(body),
    }
}

fn get(path: &'static str) -> Request {
    Request {
        method: reqwest::Method::GET,
        path,
        body: None,
    }
}

/// The input hash of `input` (what a start must carry).
pub fn hash(input: &Value) -> String {
    aiki::input_hash(input).expect("a JSON input hashes")
}

/// A new run of `namespace` with `input` and its hash.
pub fn new_run(namespace: &Namespace, input: Value) -> NewRun {
    let hash = hash(&input);
    NewRun::new(namespace.clone(), input, hash, NOW)
}

/// The object keys whose values are payloads (kept as JSON text, any text allowed).
pub const PAYLOADS: &[&str] = &["input", "output", "data", "retry", "schema", "value"];

/// Every route's well-formed request about `run` (running, owned by `owner`); `ended`, an
/// ended run, is forked.
pub fn requests(run: &RunRecord, owner: &str, ended: Option<&History>) -> Vec<Request> {
    use aiki_store::api::path;
    let id = run.id;
    let namespace = run.namespace.clone();
    let mut failure = Failure::new("task_failed", "it broke");
    failure.call = Some(CallRef::new("task:fuzz", 0));
    let mut entry = EntryRecord::new(
        id,
        "task:fuzz",
        0,
        EntryKind::Task,
        EntryStatus::Running,
        NOW,
    );
    entry.fingerprint = Some("fp".to_owned());
    let mut second = entry.clone();
    second.address = "task:fuzz-again".to_owned();
    let mut failed = entry.clone();
    failed.address = "task:failed".to_owned();
    failed.status = EntryStatus::AwaitingRetry;
    failed.error = Some(failure.clone());
    failed.retry_at = Some(NOW + 1_000);
    failed.attempts = 1;
    let mut child = new_run(&namespace, json!({"n": 1}))
        .reference_id(Some("child-ref".to_owned()))
        .traceparent(Some(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        ));
    child.parent = Some(ParentLink::new(id, "child:1:fuzz"));
    let mut child_entry = EntryRecord::new(
        id,
        "child:1:fuzz",
        0,
        EntryKind::Child,
        EntryStatus::Completed,
        NOW,
    );
    child_entry.attempts = 1;
    let claim = ClaimRequest::new(owner, vec![namespace.clone()], "default", 1, NOW);
    let start = new_run(&namespace, json!({"order": 7}))
        .reference_id(Some("start-ref".to_owned()))
        .traceparent(Some(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned(),
        ))
        .by(Some("fuzzer".to_owned()));
    let revision = run.revision;
    let mut waiting = json!(Transition::to(RunStatus::Sleeping, NOW).by(Some("fuzzer".to_owned())));
    waiting["wait"] = json!({"events": [{"name": "go", "index": 0}]});
    let finished = Transition::to(RunStatus::Completed, NOW).output(json!({"done": true}), "fp");
    let mut worker = WorkerRecord::new(owner, "host", 1, vec![namespace.clone()], "default", NOW);
    worker
        .fingerprints
        .insert(namespace.to_string(), "fp".to_owned());
    let schema = |value: Value| SchemaRecord::new(value, "fp");
    let mut catalog = CatalogEntry::new(namespace.clone(), schema(json!({})), schema(json!({})));
    catalog.events = vec![EventDeclaration::new("go", schema(json!({})))];
    catalog.tasks = vec![TaskDeclaration::new("fuzz", schema(json!({})), json!({}))];
    let mut filter = RunFilter::default()
        .workflow(namespace.workflow.clone())
        .version(namespace.version.clone())
        .status(RunStatus::Running)
        .reference_id("ref")
        .pool("default")
        .error_kind("task_failed")
        .failed_task("fuzz")
        .error_contains("broke");
    filter.schedule = Some("nightly".to_owned());
    let definition = ScheduleDefinition {
        spec: ScheduleSpec::cron_in("0 9 * * *", "Europe/Berlin"),
        namespace: namespace.clone(),
        input: json!({}),
        input_hash: hash(&json!({})),
        pool: "default".to_owned(),
        overlap: OverlapPolicy::Skip,
        catchup_window_ms: None,
        jitter_ms: 0,
    };
    let schedule =
        ScheduleRecord::new("nightly", definition, ScheduleOrigin::Client, 1, NOW).unwrap();
    let mut requests = vec![
        post(path::RUNS, json!(start)),
        post(path::RUNS_LIST, json!(ListRuns::new(filter, 10))),
        get(path::RUNS_COUNTS),
        get(path::RUN),
        get(path::HISTORY),
        get(path::TIMELINE),
        post(path::ENTRIES, json!({"expected": revision, "entry": entry})),
        post(
            path::ENTRY_BATCH,
            json!({"expected": revision, "entries": [entry, second]}),
        ),
        post(
            path::ENTRY_WRITES,
            json!({"writes": [{"expected": revision, "entry": failed}]}),
        ),
        post(
            path::CHILDREN,
            json!({"expected": revision, "entry": child_entry, "child": child}),
        ),
        post(
            path::SLEEPS,
            json!({"expected": revision, "sleep": SleepRecord::new(id, "nap", 0, 1_000, NOW + 1_000), "from": NOW}),
        ),
        post(
            path::EVENT_SLOTS,
            json!({"expected": revision, "slot": EventRecord::timeout(id, "go", 0, NOW)}),
        ),
        post(path::CLAIM_RUN, json!(claim)),
        post(
            path::REFRESH,
            json!({"owner": owner, "expected": revision, "now": NOW}),
        ),
        post(
            path::TRANSITION,
            json!({"expected": revision, "transition": waiting}),
        ),
        post(
            path::TRANSITION,
            json!({"expected": revision, "transition": finished}),
        ),
        post(
            path::CONTINUATION,
            json!({"expected": revision, "continuation": Continuation::new(
                new_run(&namespace, json!({"n": 2})),
                [("go".to_owned(), 0)].into(),
                NOW,
            )}),
        ),
        post(
            path::EVENTS,
            json!(
                NewEvent::new(id, "go", json!({"ok": true}), NOW)
                    .reference_id(Some("event-ref".to_owned()))
                    .by(Some("fuzzer".to_owned()))
            ),
        ),
        post(
            path::ACTIONS,
            json!({"action": "pause", "actor": "fuzz", "now": NOW}),
        ),
        post(
            path::RELEASE,
            json!({"expected": revision, "now": NOW, "confirm_ms": 1_000, "actor": "fuzz"}),
        ),
        post(
            path::TRANSITIONS,
            json!([Move::new(
                id,
                revision,
                Transition::to(RunStatus::Cancelled, NOW).by(Some("fuzzer".to_owned()))
            )]),
        ),
        post(path::CLAIMS, json!(claim)),
        get(path::WORKERS),
        post(path::WORKERS, json!({"worker": worker, "now": NOW})),
        get(path::CATALOG),
        post(path::CATALOG, json!({"entry": catalog, "now": NOW})),
        post(
            path::CATALOG_TASKS,
            json!({"namespace": namespace, "fingerprint": "f", "tasks": catalog.tasks}),
        ),
        post(path::CHANGES, json!({"cursor": "", "limit": 5})),
        get(path::CONFIG),
        Request {
            method: reqwest::Method::PUT,
            path: path::CONFIG_KEY,
            body: Some(json!({"value": 500, "now": NOW})),
        },
        get(path::WHOAMI),
        get(path::METRICS),
        post(
            path::SCHEDULES,
            json!({"schedule": schedule, "actor": "fuzzer"}),
        ),
        post(path::SCHEDULE, json!({"name": "nightly", "limit": 5})),
        post(path::SCHEDULE_LOG, json!({"name": "nightly", "limit": 5})),
        post(
            path::SCHEDULE_ACTIONS,
            json!({"name": "nightly", "action": {"pause": {"reason": "fuzz"}}, "actor": "fuzzer", "now": NOW}),
        ),
        post(
            path::SCHEDULES_DECLARED,
            json!({"declared": [], "serves": [namespace], "worker": owner, "now": NOW}),
        ),
    ];
    if let Some(ended) = ended {
        requests.push(post(path::FORKS, json!(fork_of(ended))));
    }
    requests
}

/// The fork of `source` (ended) that `aiki`'s fork makes, carrying all it recorded.
pub fn fork_of(source: &History) -> NewFork {
    let original = &source.run;
    let run = NewRun::new(
        original.namespace.clone(),
        original.input.clone(),
        original.input_hash.clone(),
        NOW,
    )
    .reference_id(Some(format!("fork:{}", original.id)))
    .lineage(Lineage {
        forked_from: original.id,
        root: original.id,
    });
    let id = run.id;
    let moved = |mut entry: EntryRecord| {
        entry.run_id = id;
        entry
    };
    NewFork::new(
        run,
        source.entries.iter().cloned().map(moved).collect(),
        Vec::new(),
        Vec::new(),
    )
}

/// Fields of a body: each one's path, and the path in the body's own words
/// (`entries[0].address`).
pub type Fields = Vec<(Vec<Step>, String)>;

/// The text fields of `body` outside its payloads.
pub fn text_fields(body: &Value) -> Fields {
    let mut found = Vec::new();
    walk(body, &mut Vec::new(), &mut found, &|value| {
        value.is_string()
    });
    found
}

/// The integer fields of `body` outside its payloads.
pub fn integer_fields(body: &Value) -> Fields {
    let mut found = Vec::new();
    walk(body, &mut Vec::new(), &mut found, &|value| {
        value.is_i64() || value.is_u64()
    });
    found
}

/// A step into a JSON value.
#[derive(Clone, Debug)]
pub enum Step {
    Key(String),
    Index(usize),
}

fn walk(value: &Value, at: &mut Vec<Step>, found: &mut Fields, wanted: &dyn Fn(&Value) -> bool) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                if PAYLOADS.contains(&key.as_str()) {
                    continue;
                }
                at.push(Step::Key(key.clone()));
                walk(inner, at, found, wanted);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                at.push(Step::Index(index));
                walk(inner, at, found, wanted);
                at.pop();
            }
        }
        leaf if wanted(leaf) => found.push((at.clone(), named(at))),
        _ => {}
    }
}

/// `entries[0].address` for a path.
fn named(path: &[Step]) -> String {
    let mut name = String::new();
    for step in path {
        match step {
            Step::Key(key) if name.is_empty() => name.push_str(key),
            Step::Key(key) => {
                name.push('.');
                name.push_str(key);
            }
            Step::Index(index) => name.push_str(&format!("[{index}]")),
        }
    }
    name
}

/// The value at `path` in `body`.
pub fn at_mut<'a>(body: &'a mut Value, path: &[Step]) -> &'a mut Value {
    let mut node = body;
    for step in path {
        node = match step {
            Step::Key(key) => &mut node[key.as_str()],
            Step::Index(index) => &mut node[*index],
        };
    }
    node
}

/// What the store holds of each run `filter` passes: its status and revision, and the row
/// counts of its history and timeline (to compare before and after a refused request).
pub type Fingerprint =
    std::collections::BTreeMap<RunId, (RunStatus, u64, usize, usize, usize, usize)>;

/// The [`Fingerprint`] of the runs `filter` passes.
pub async fn fingerprint(store: &BoxStore, filter: RunFilter) -> Fingerprint {
    let mut all = Fingerprint::new();
    let mut request = ListRuns::new(filter, 500);
    loop {
        let page = store.list_runs(request.clone()).await.expect("list_runs");
        for run in &page.runs {
            let history = store.load_history(run.id).await.expect("history");
            let timeline = store.timeline(run.id).await.expect("timeline");
            all.insert(
                run.id,
                (
                    run.status,
                    run.revision,
                    history.entries.len(),
                    history.sleeps.len(),
                    history.events.len(),
                    timeline.len(),
                ),
            );
        }
        match page.next {
            Some(next) => request = request.after(Some(next)),
            None => return all,
        }
    }
}
