//! Workflows, their versions and their typed events.

use std::future::Future;
use std::sync::Arc;

use aiki_store::Namespace;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::WorkflowError;
use crate::retry::RetryPolicy;
use crate::run::Run;
use crate::schema::Schema;

/// One version of a workflow: an `async fn(&Run, Input) -> Result<Output, WorkflowError>`
/// with a durable name and version.
///
/// Each version is its own namespace, `name@version`, with its own cache and delivery queue;
/// a run stays on the version it was started with. `#[aiki::workflow]` implements this.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an aiki workflow",
    label = "annotate its function with `#[aiki::workflow(name = \"...\", version = \"...\")]`"
)]
pub trait Workflow: Send + Sync + 'static {
    /// The input of a run.
    type Input: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// The output of a completed run, recorded with its schema's fingerprint.
    type Output: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
    /// The durable name.
    const NAME: &'static str;
    /// The version (e.g. `1.0.0`).
    const VERSION: &'static str;

    /// The retry policy of whole runs (default: never).
    fn retry(&self) -> RetryPolicy {
        RetryPolicy::never()
    }

    /// The events this workflow declares: what `send` accepts and validates against.
    fn events() -> Vec<EventSpec> {
        Vec::new()
    }

    /// The workflow's body.
    fn run<'a>(
        &'a self,
        run: &'a Run,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output, WorkflowError>> + Send + 'a;

    /// The version's namespace, `name@version`.
    fn namespace() -> Namespace {
        Namespace::new(Self::NAME, Self::VERSION)
    }
}

/// A typed event a workflow can wait for: a name and a payload type.
pub trait Event: Send + Sync + 'static {
    /// The event's name (its queue in a run).
    const NAME: &'static str;
    /// The payload; `()` for none.
    type Payload: Serialize + DeserializeOwned + JsonSchema + Send + 'static;

    /// This event's spec, for [`Workflow::events`].
    fn spec() -> EventSpec
    where
        Self: Sized,
    {
        EventSpec {
            name: Self::NAME,
            schema: Schema::of::<Self::Payload>,
        }
    }
}

/// An event declared by a workflow: its name and its payload's schema.
#[derive(Clone, Copy, Debug)]
pub struct EventSpec {
    /// The event's name.
    pub name: &'static str,
    /// Its payload's schema.
    pub schema: fn() -> Arc<Schema>,
}
