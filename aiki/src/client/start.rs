//! Starting runs: typed ([`Start`], with the workflow's code) and from JSON ([`StartJson`],
//! validated against the catalog, for tools that do not have the code).

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;

use aiki_store::{CreateOutcome, Millis, Namespace, NewRun};
use serde_json::Value;

use super::Client;
use crate::NoInput;
use crate::address::input_hash;
use crate::error::ClientError;
use crate::handle::{AnyRun, RunHandle};
use crate::schema::Schema;
use crate::trace::Traceparent;
use crate::workflow::Workflow;

/// What a start does when its reference id already names a run with a different input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConflictPolicy {
    /// Fail with a conflict error (default). A start with the same input returns the existing
    /// run: starting is idempotent.
    #[default]
    Error,
    /// Return the existing run, whatever its input.
    ReturnExisting,
}

/// How a run is started, whatever gives its input.
#[derive(Debug)]
struct Options {
    reference_id: Option<String>,
    conflict_policy: ConflictPolicy,
    pool: String,
    start_at: Option<Millis>,
    traceparent: Option<Traceparent>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            reference_id: None,
            conflict_policy: ConflictPolicy::Error,
            pool: "default".to_owned(),
            start_at: None,
            traceparent: None,
        }
    }
}

/// The input hash of a start from JSON of the workflow version `entry` describes, as its typed
/// start computes it: a version without an input hashes [`NoInput`] (`{}`), whatever JSON
/// stands for it.
pub fn input_hash_json(
    entry: &aiki_store::CatalogEntry,
    input: &Value,
) -> Result<String, crate::WorkflowError> {
    if entry.input.fingerprint == Schema::of::<NoInput>().fingerprint() {
        input_hash(&NoInput)
    } else {
        input_hash(input)
    }
}

/// Whether `hash` is the input hash of a start of `input`: the one [`input_hash_json`] computes
/// for the version `entry` describes or, without an entry (a version no worker has published
/// yet), the hash of `input`, or, for a `null` input, that of [`NoInput`] (what a typed start
/// of an input-less workflow sends). A server checks every start it is sent with this, since
/// the input hash is what a repeated start with the same reference id is compared by.
pub fn input_hash_accepts(
    entry: Option<&aiki_store::CatalogEntry>,
    input: &Value,
    hash: &str,
) -> Result<bool, crate::WorkflowError> {
    Ok(match entry {
        Some(entry) => input_hash_json(entry, input)? == hash,
        None => input_hash(input)? == hash || (input.is_null() && input_hash(&NoInput)? == hash),
    })
}

/// The error of an input that does not match the schema of `namespace`'s input (the same for a
/// typed start and one validated against the catalog).
pub(in crate::client) fn invalid_input(namespace: &Namespace, message: String) -> ClientError {
    ClientError::InvalidInput {
        what: format!("input of {namespace}"),
        message,
    }
}

/// Creates the run (or finds the one holding the reference id); returns its id.
async fn create(
    client: &Client,
    namespace: Namespace,
    input: Value,
    hash: String,
    options: Options,
) -> Result<aiki_store::RunId, ClientError> {
    let now = client.clock.now();
    let scheduled = options.start_at.filter(|at| *at > now);
    let new = NewRun::new(namespace.clone(), input, hash.clone(), now)
        .by(client.actor.clone())
        .reference_id(options.reference_id.clone())
        .pool(options.pool)
        .traceparent(
            options
                .traceparent
                .or_else(crate::trace::current_traceparent)
                .map(|traceparent| traceparent.to_string()),
        );
    let new = match scheduled {
        Some(at) => new.scheduled_at(at),
        None => new,
    };
    match client.sent(|| client.store.create_run(new.clone())).await? {
        CreateOutcome::Created(run) => {
            crate::metrics::run_started(&run.namespace);
            match scheduled {
                Some(at) => crate::wake::timer_at(&client.clock, at),
                None => crate::wake::work_available(),
            }
            Ok(run.id)
        }
        CreateOutcome::Existing(run) => {
            if run.input_hash != hash && options.conflict_policy == ConflictPolicy::Error {
                return Err(ClientError::ReferenceConflict {
                    namespace: namespace.to_string(),
                    reference_id: options.reference_id.unwrap_or_default(),
                    existing: run.id,
                });
            }
            Ok(run.id)
        }
    }
}

/// The setters both starts share.
macro_rules! start_options {
    () => {
        /// An idempotency key, unique per workflow version: a second start with the same key
        /// returns the first run (see [`ConflictPolicy`]).
        pub fn reference_id(mut self, reference_id: impl Into<String>) -> Self {
            self.options.reference_id = Some(reference_id.into());
            self
        }

        /// What to do when the reference id names a run with a different input.
        pub fn conflict_policy(mut self, policy: ConflictPolicy) -> Self {
            self.options.conflict_policy = policy;
            self
        }

        /// Routes the run to a worker pool (default `default`).
        pub fn pool(mut self, pool: impl Into<String>) -> Self {
            self.options.pool = pool.into();
            self
        }

        /// Delivers the run at a time (ms since the epoch, on the client's clock) instead of
        /// now.
        pub fn start_at(mut self, at: Millis) -> Self {
            self.options.start_at = Some(at);
            self
        }

        /// The trace the run belongs to: every execution of the run links to it (default: the
        /// current OpenTelemetry context with the `otel` feature, none without). For a run
        /// started on behalf of a request that carried a W3C `traceparent` header.
        pub fn traceparent(mut self, traceparent: Traceparent) -> Self {
            self.options.traceparent = Some(traceparent);
            self
        }
    };
}

/// A run start being configured. `.await` it.
#[derive(Debug)]
#[must_use = "a start does nothing until awaited"]
pub struct Start<'c, W: Workflow> {
    client: &'c Client,
    input: W::Input,
    options: Options,
    _workflow: PhantomData<fn() -> W>,
}

impl<'c, W: Workflow> Start<'c, W> {
    pub(super) fn new(client: &'c Client, input: W::Input) -> Self {
        Start {
            client,
            input,
            options: Options::default(),
            _workflow: PhantomData,
        }
    }

    start_options!();

    async fn send(self) -> Result<RunHandle<W>, ClientError> {
        let namespace = W::namespace();
        let invalid = |message: String| invalid_input(&namespace, message);
        let input = serde_json::to_value(&self.input).map_err(|e| invalid(e.to_string()))?;
        Schema::of::<W::Input>().validate(&input).map_err(invalid)?;
        let hash = input_hash(&self.input).map_err(|e| invalid(e.to_string()))?;
        let id = create(self.client, namespace, input, hash, self.options).await?;
        Ok(RunHandle::new(self.client.clone(), id))
    }
}

impl<'c, W: Workflow> IntoFuture for Start<'c, W> {
    type Output = Result<RunHandle<W>, ClientError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'c>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}

/// A run start from JSON being configured, for a workflow version whose code this process does
/// not have: the input is validated against the version's [catalog](Client::catalog) entry, as
/// a typed start validates it against the input type. `.await` it.
#[derive(Debug)]
#[must_use = "a start does nothing until awaited"]
pub struct StartJson<'c> {
    client: &'c Client,
    namespace: Namespace,
    input: Value,
    options: Options,
}

impl<'c> StartJson<'c> {
    pub(super) fn new(client: &'c Client, namespace: Namespace, input: Value) -> Self {
        StartJson {
            client,
            namespace,
            input,
            options: Options::default(),
        }
    }

    start_options!();

    async fn send(self) -> Result<AnyRun, ClientError> {
        let entry = self
            .client
            .check_start_json(&self.namespace, &self.input)
            .await?;
        let hash = input_hash_json(&entry, &self.input)
            .map_err(|e| invalid_input(&self.namespace, e.to_string()))?;
        let id = create(self.client, self.namespace, self.input, hash, self.options).await?;
        Ok(self.client.any_run(id))
    }
}

impl<'c> IntoFuture for StartJson<'c> {
    type Output = Result<AnyRun, ClientError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send + 'c>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.send())
    }
}
