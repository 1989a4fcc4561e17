//! The catalog: what each registered workflow version declares (input, output and event
//! schemas, retry policies, tasks), published by the workers that have its code so that tools
//! without it validate what they send as the typed API does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aiki_store::{
    CatalogEntry, EventDeclaration, Namespace, ScheduleDefinition, SchemaRecord, TaskDeclaration,
};
use serde_json::{Value, json};

use crate::address::{canonical_json, sha256_hex};
use crate::client::Client;
use crate::error::ClientError;
use crate::schema::Schema;
use crate::task::Task;
use crate::workflow::{EventSpec, Workflow};

/// A schema as the catalog records it.
fn record(schema: &Schema) -> SchemaRecord {
    SchemaRecord::new(schema.json().clone(), schema.fingerprint())
}

/// The catalog's declaration of task `T`.
pub(crate) fn task<T: Task>(task: &T) -> TaskDeclaration {
    TaskDeclaration::new(
        T::NAME,
        record(&task.output_schema()),
        task.retry().to_json(),
    )
}

/// The catalog entry of workflow version `W`, with the tasks its worker declares.
pub(crate) fn entry<W: Workflow>(workflow: &W, tasks: &[TaskDeclaration]) -> CatalogEntry {
    let input = record(&Schema::of::<W::Input>());
    let output = record(&Schema::of::<W::Output>());
    let events: Vec<EventDeclaration> = W::events()
        .iter()
        .map(|spec| EventDeclaration::new(spec.name, record(&(spec.schema)())))
        .collect();
    let retry = workflow.retry().to_json();
    let declarations = json!({
        "input": input, "output": output, "events": events, "retry": retry, "tasks": tasks,
    });
    let fingerprint = sha256_hex(
        canonical_json(&declarations)
            .expect("BUG: a JSON value always serializes")
            .as_bytes(),
    );
    CatalogEntry::new(W::namespace(), input, output)
        .fingerprint(fingerprint)
        .events(events)
        .retry(retry)
        .tasks(tasks.to_vec())
}

/// The error of an event name the version does not declare (the same with and without the
/// code).
pub(crate) fn unknown_event<'a>(
    namespace: &Namespace,
    event: &str,
    declared: impl Iterator<Item = &'a str>,
) -> ClientError {
    ClientError::UnknownEvent {
        namespace: namespace.to_string(),
        event: event.to_owned(),
        declared: declared
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The error of an event payload that does not match its schema (the same with and without the
/// code).
pub(crate) fn invalid_event(namespace: &Namespace, event: &str, message: String) -> ClientError {
    ClientError::InvalidInput {
        what: format!("event `{event}` for {namespace}"),
        message,
    }
}

/// Validates event `name`'s payload against the workflow's own declaration.
pub(crate) fn check_declared_event(
    namespace: &Namespace,
    specs: &[EventSpec],
    name: &str,
    data: &Value,
) -> Result<(), ClientError> {
    let Some(spec) = specs.iter().find(|spec| spec.name == name) else {
        return Err(unknown_event(
            namespace,
            name,
            specs.iter().map(|spec| spec.name),
        ));
    };
    (spec.schema)()
        .validate(data)
        .map_err(|message| invalid_event(namespace, name, message))
}

/// Validates event `name`'s payload against the catalog entry of the run's version.
pub(crate) fn check_catalog_event(
    entry: &CatalogEntry,
    name: &str,
    data: &Value,
) -> Result<(), ClientError> {
    let Some(event) = entry.event(name) else {
        return Err(unknown_event(
            &entry.namespace,
            name,
            entry.events.iter().map(|event| event.name.as_str()),
        ));
    };
    Schema::shared(&event.payload.schema)
        .validate(data)
        .map_err(|message| invalid_event(&entry.namespace, name, message))
}

impl Client {
    /// The catalog: every workflow version a worker has published, by name and version, with
    /// what its code declares. A worker publishes the versions it registers when it starts;
    /// which pools serve a version now is in [`live_workers`](Client::live_workers).
    pub async fn catalog(&self) -> Result<Vec<CatalogEntry>, ClientError> {
        Ok(self.store().catalog().await?)
    }

    /// The catalog entry of `namespace` that starts and events are checked against first: the
    /// newest build a live worker runs (else the newest published).
    /// [`ClientError::NotInCatalog`] when no worker has published it.
    pub async fn catalog_entry(&self, namespace: &Namespace) -> Result<CatalogEntry, ClientError> {
        let entries = self.checked_entries(namespace).await?;
        Ok(entries[0].clone())
    }

    /// The builds of `namespace` that starts and events are checked against, newest first:
    /// those its live workers run (two during a rolling deploy, whose older pods must not hide
    /// the newer build, nor the newer the older), else every build published.
    /// [`ClientError::NotInCatalog`] when no worker has published it.
    pub async fn catalog_entries(
        &self,
        namespace: &Namespace,
    ) -> Result<Vec<CatalogEntry>, ClientError> {
        Ok(self.checked_entries(namespace).await?.to_vec())
    }

    /// [`catalog_entries`](Client::catalog_entries), kept for a while if this client keeps
    /// them ([`keep_catalog_for`](Client::keep_catalog_for)).
    async fn checked_entries(
        &self,
        namespace: &Namespace,
    ) -> Result<Arc<[CatalogEntry]>, ClientError> {
        if let Some(entries) = self.checked.as_ref().and_then(|kept| kept.get(namespace)) {
            return Ok(entries);
        }
        let entries: Arc<[CatalogEntry]> = self.read_catalog_entries(namespace).await?.into();
        if let Some(kept) = &self.checked {
            kept.put(namespace, entries.clone());
        }
        Ok(entries)
    }

    /// [`catalog_entries`](Client::catalog_entries), read from the store.
    async fn read_catalog_entries(
        &self,
        namespace: &Namespace,
    ) -> Result<Vec<CatalogEntry>, ClientError> {
        let catalog = self.catalog().await?;
        let known: Vec<String> = catalog.iter().map(|e| e.namespace.to_string()).collect();
        let mut entries: Vec<CatalogEntry> = catalog
            .into_iter()
            .filter(|entry| &entry.namespace == namespace)
            .collect();
        if entries.is_empty() {
            let mut known = known;
            known.dedup();
            return Err(ClientError::NotInCatalog {
                namespace: namespace.to_string(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                },
            });
        }
        entries.reverse();
        if let Some(live) = self.live_builds(namespace).await?
            && entries
                .iter()
                .any(|entry| live.contains(&entry.fingerprint))
        {
            entries.retain(|entry| live.contains(&entry.fingerprint));
        }
        Ok(entries)
    }

    /// The fingerprints of `namespace` that live workers run; `None` when a live worker serves
    /// it without saying which build it runs (a release before workers said so), which may be
    /// any of them.
    async fn live_builds(&self, namespace: &Namespace) -> Result<Option<Vec<String>>, ClientError> {
        let now = crate::Clock::now(&crate::SystemClock);
        let key = namespace.to_string();
        let mut builds = Vec::new();
        let workers = self.store().list_workers(now, LIVE_WITHIN_MS).await?;
        for worker in workers {
            if !crate::Liveness::of(&worker, now).is_live() {
                continue;
            }
            match worker.fingerprints.get(&key) {
                Some(build) => builds.push(build.clone()),
                None if worker.namespaces.contains(namespace) => return Ok(None),
                None => {}
            }
        }
        Ok(Some(builds))
    }
}

/// Checks of JSON against the catalog, for a server or a tool that has no workflow code.
impl Client {
    /// Checks a start of `namespace` with `input` as [`start_json`](Client::start_json) checks
    /// it, starting nothing; returns the build that accepts it. [`ClientError::InvalidInput`]
    /// when no build of the version in the catalog accepts it, [`ClientError::NotInCatalog`]
    /// when no worker has published the version.
    pub async fn check_start_json(
        &self,
        namespace: &Namespace,
        input: &Value,
    ) -> Result<CatalogEntry, ClientError> {
        let entries = self.checked_entries(namespace).await?;
        let entry = accepted_by_one(&entries, |entry| {
            Schema::shared(&entry.input.schema)
                .validate(input)
                .map_err(|message| ClientError::InvalidInput {
                    what: format!("input of {namespace}"),
                    message,
                })
        })?;
        Ok(entry.clone())
    }

    /// Checks a schedule's definition made without the workflow's code (by a server, or by
    /// `aiki schedules create`) as [`start_json`](Client::start_json) checks a start of it, and
    /// returns it with its input hash computed as such a start computes it (the hash it came
    /// with is not trusted). [`ClientError::InvalidInput`] when no build of the version accepts
    /// its input; [`ClientError::NotInCatalog`] when no worker has published the version: unlike
    /// a start, whose run waits for a worker anyway, a schedule is refused then, since its runs
    /// start later with nobody watching and would all fail on an input nobody checked. Deploy a
    /// worker of the version first, or declare the schedule in that worker's code
    /// ([`WorkerBuilder::schedule`](crate::WorkerBuilder::schedule)).
    pub async fn check_schedule_json(
        &self,
        mut definition: ScheduleDefinition,
    ) -> Result<ScheduleDefinition, ClientError> {
        let namespace = &definition.namespace;
        let entry = self.check_start_json(namespace, &definition.input).await?;
        definition.input_hash =
            crate::client::input_hash_json(&entry, &definition.input).map_err(|error| {
                ClientError::InvalidInput {
                    what: format!("input of {namespace}"),
                    message: error.to_string(),
                }
            })?;
        Ok(definition)
    }

    /// Checks event `name` with `data` for a run of `namespace` as
    /// [`AnyRun::send_json`](crate::AnyRun::send_json) checks it, sending nothing:
    /// [`ClientError::UnknownEvent`], [`ClientError::InvalidInput`],
    /// [`ClientError::NotInCatalog`].
    pub async fn check_event_json(
        &self,
        namespace: &Namespace,
        name: &str,
        data: &Value,
    ) -> Result<(), ClientError> {
        let entries = self.checked_entries(namespace).await?;
        accepted_by_one(&entries, |entry| check_catalog_event(entry, name, data))?;
        Ok(())
    }
}

/// How far back the catalog looks for the heartbeats of live workers.
const LIVE_WITHIN_MS: i64 = 10 * 60 * 1000;

/// `Ok` when one of `entries` accepts what `check` checks; else the newest one's error.
pub(crate) fn accepted_by_one(
    entries: &[CatalogEntry],
    check: impl Fn(&CatalogEntry) -> Result<(), ClientError>,
) -> Result<&CatalogEntry, ClientError> {
    let mut first_error = None;
    for entry in entries {
        match check(entry) {
            Ok(()) => return Ok(entry),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error.expect("BUG: a version in the catalog has an entry"))
}

/// Catalog entries kept for a while, by version (see [`Client::keep_catalog_for`]).
#[derive(Debug)]
pub(crate) struct Kept {
    ttl: Duration,
    entries: Mutex<HashMap<Namespace, Read>>,
}

/// A version's catalog entries, and when they were read.
type Read = (Arc<[CatalogEntry]>, Instant);

impl Kept {
    pub(crate) fn new(ttl: Duration) -> Self {
        Kept {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// The entries of `namespace` read less than the time to keep them ago.
    fn get(&self, namespace: &Namespace) -> Option<Arc<[CatalogEntry]>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (kept, read) = entries.get(namespace)?;
        (read.elapsed() < self.ttl).then(|| kept.clone())
    }

    /// Keeps `kept` as the entries of `namespace`, read now.
    fn put(&self, namespace: &Namespace, kept: Arc<[CatalogEntry]>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        // Versions are few; a version no longer started is dropped once stale.
        entries.retain(|_, (_, read)| read.elapsed() < self.ttl);
        entries.insert(namespace.clone(), (kept, Instant::now()));
    }
}
