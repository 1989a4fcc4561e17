//! The registry: the workflow versions and tasks a build serves, and the state its tasks read.
//! A [`Worker`](crate::Worker) executes from one, and so does everything else that needs the
//! build's code without claiming runs: the [impact check](crate::impact), the CLI's
//! `aiki check` ([`aiki_cli::App`]), [`TestEnv`](crate::testing::TestEnv) and an
//! [`Executor`](crate::Executor) fed runs by another route.
//!
//! [`aiki_cli::App`]: https://docs.rs/aiki-cli

use std::any::TypeId;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use aiki_store::{CatalogEntry, Namespace, TaskDeclaration};
use serde_json::Value;

use crate::error::{ClientError, WorkflowError};
use crate::retry::RetryPolicy;
use crate::run::Run;
use crate::schema::Schema;
use crate::task::{StateMap, StateNeed, Task};
use crate::workflow::Workflow;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A registered workflow version with its types erased.
pub(crate) trait Registered: Send + Sync {
    /// The workflow's future; it borrows the run, which the execution owns.
    fn execute<'a>(
        &self,
        run: &'a Run,
        input: Value,
    ) -> BoxFuture<'a, Result<(Value, String), WorkflowError>>;
    fn retry(&self) -> RetryPolicy;
    /// The version's catalog entry, with the tasks the build declares.
    fn catalog_entry(&self, tasks: &[TaskDeclaration]) -> CatalogEntry;
}

struct Erased<W>(Arc<W>);

impl<W: Workflow> Registered for Erased<W> {
    fn execute<'a>(
        &self,
        run: &'a Run,
        input: Value,
    ) -> BoxFuture<'a, Result<(Value, String), WorkflowError>> {
        let workflow = self.0.clone();
        Box::pin(async move {
            // Recorded without a fingerprint: checked at every execution.
            let input =
                crate::schema::decode_recorded::<W::Input>(input, None).map_err(|mismatch| {
                    WorkflowError::InputSchemaMismatch {
                        namespace: W::namespace().to_string(),
                        mismatch,
                    }
                })?;
            let output = workflow.run(run, input).await?;
            let json = serde_json::to_value(&output).map_err(|error| {
                WorkflowError::InputNotSerializable {
                    what: format!("output of {}", W::namespace()),
                    message: error.to_string(),
                }
            })?;
            Ok((json, Schema::of::<W::Output>().fingerprint().to_owned()))
        })
    }

    fn retry(&self) -> RetryPolicy {
        self.0.retry()
    }

    fn catalog_entry(&self, tasks: &[TaskDeclaration]) -> CatalogEntry {
        crate::catalog::entry(&*self.0, tasks)
    }
}

/// The workflow versions and tasks a build serves, with the state its tasks read; checked as
/// a whole when built, cheap to clone, shared by whatever executes or checks the build's code.
///
/// ```
/// # use aiki::{Registry, Worker};
/// # async fn demo() -> Result<(), aiki::ClientError> {
/// let registry = Registry::builder() // .register(MyWorkflow).task(MyTask) first
///     .state(42_u32)
///     .build()?;
/// let store = aiki::connect("memory:").await?;
/// let worker = Worker::builder(store).registry(registry.clone()).build()?;
/// assert_eq!(worker.registry().namespaces().count(), 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Registry {
    parts: Arc<Parts>,
}

struct Parts {
    workflows: HashMap<Namespace, Arc<dyn Registered>>,
    /// The registered versions' namespaces, for the runs executed from this registry.
    served: Arc<HashSet<Namespace>>,
    /// The declared tasks, sorted by name, for the catalog.
    declarations: Vec<TaskDeclaration>,
    state: Arc<StateMap>,
    /// The declared task types, and the state each reads, checked again when a builder takes
    /// the registry in (see [`RegistryBuilder::registry`]).
    tasks: Vec<(&'static str, TypeId, &'static str)>,
    state_needs: Vec<(&'static str, StateNeed)>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut versions: Vec<String> = self.namespaces().map(ToString::to_string).collect();
        versions.sort();
        f.debug_struct("Registry")
            .field("versions", &versions)
            .field("tasks", &self.parts.declarations.len())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty builder.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// The registered workflow versions, in no particular order.
    pub fn namespaces(&self) -> impl Iterator<Item = &Namespace> {
        self.parts.workflows.keys()
    }

    /// Whether version `namespace` is registered.
    pub fn serves(&self, namespace: &Namespace) -> bool {
        self.parts.workflows.contains_key(namespace)
    }

    /// The declared tasks, sorted by name.
    pub fn tasks(&self) -> &[TaskDeclaration] {
        &self.parts.declarations
    }

    /// The catalog entries of the registered versions (input, output, events, retry policy and
    /// the declared tasks), sorted by namespace, not yet marked as published by anyone.
    pub fn catalog(&self) -> Vec<CatalogEntry> {
        let mut catalog: Vec<CatalogEntry> = self
            .parts
            .workflows
            .values()
            .map(|workflow| workflow.catalog_entry(&self.parts.declarations))
            .collect();
        catalog.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        catalog
    }

    /// The registered version `namespace`.
    pub(crate) fn workflow(&self, namespace: &Namespace) -> Option<&Arc<dyn Registered>> {
        self.parts.workflows.get(namespace)
    }

    /// The state the tasks read.
    pub(crate) fn state(&self) -> &Arc<StateMap> {
        &self.parts.state
    }

    /// The registered versions' namespaces, shared with the runs executed from here.
    pub(crate) fn served(&self) -> &Arc<HashSet<Namespace>> {
        &self.parts.served
    }
}

/// Builds a [`Registry`]: what it serves, checked at [`build`](Self::build).
#[derive(Default)]
pub struct RegistryBuilder {
    workflows: Vec<(Namespace, Arc<dyn Registered>)>,
    state: StateMap,
    tasks: Vec<(&'static str, TypeId, &'static str)>,
    declarations: Vec<TaskDeclaration>,
    /// The state each declared task reads, checked at `build`.
    state_needs: Vec<(&'static str, StateNeed)>,
}

impl fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field(
                "workflows",
                &self
                    .workflows
                    .iter()
                    .map(|(namespace, _)| namespace.to_string())
                    .collect::<Vec<_>>(),
            )
            .field("tasks", &self.declarations.len())
            .finish_non_exhaustive()
    }
}

impl RegistryBuilder {
    /// Serves workflow version `W`. Several versions of one workflow can be served side by
    /// side; registering one namespace twice is an error at [`build`](Self::build).
    pub fn register<W: Workflow>(mut self, workflow: W) -> Self {
        self.workflows
            .push((W::namespace(), Arc::new(Erased(Arc::new(workflow)))));
        self
    }

    /// Declares a task the workflows call, so that two different task types with one name are
    /// caught at [`build`](Self::build) instead of corrupting addresses, and the catalog lists
    /// it (name, output schema, retry policy) with the registered versions.
    pub fn task<T: Task>(mut self, task: T) -> Self {
        self.tasks
            .push((T::NAME, TypeId::of::<T>(), std::any::type_name::<T>()));
        if self.declarations.iter().all(|known| known.name != T::NAME) {
            self.declarations.push(crate::catalog::task(&task));
        }
        self.state_needs
            .extend(T::needs_state().into_iter().map(|need| (T::NAME, need)));
        self
    }

    /// Shared state for tasks (read with [`TaskContext::state`](crate::TaskContext::state) or a
    /// `State<T>` argument of a `#[task]`); one value per type, the last given wins.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }

    /// Adds everything `registry` registers, declares and holds, checked with the rest at
    /// [`build`](Self::build) (a version registered in both is registered twice).
    pub fn registry(mut self, registry: &Registry) -> Self {
        let source = &registry.parts;
        self.workflows.extend(
            source
                .workflows
                .iter()
                .map(|(namespace, workflow)| (namespace.clone(), workflow.clone())),
        );
        self.state.extend(&source.state);
        self.tasks.extend(source.tasks.iter().copied());
        for declaration in &source.declarations {
            if self
                .declarations
                .iter()
                .all(|known| known.name != declaration.name)
            {
                self.declarations.push(declaration.clone());
            }
        }
        self.state_needs.extend(source.state_needs.iter().cloned());
        self
    }

    /// Checks what was registered: every version once, every task name for one task type, the
    /// state every declared task reads given.
    pub fn build(self) -> Result<Registry, ClientError> {
        if let Some((task, need)) = self
            .state_needs
            .iter()
            .find(|(_, need)| !self.state.has(need))
        {
            return Err(ClientError::Config(format!(
                "task `{task}` needs state of type `{}`; give it to the registry with \
                 `.state(value)`",
                need.type_name()
            )));
        }
        let mut tasks: HashMap<&'static str, (TypeId, &'static str)> = HashMap::new();
        for &(name, id, type_name) in &self.tasks {
            if let Some((other, other_name)) = tasks.insert(name, (id, type_name))
                && other != id
            {
                return Err(ClientError::Config(format!(
                    "two task types are named `{name}`: `{other_name}` and `{type_name}`; \
                     task names are durable addresses and must be unique"
                )));
            }
        }
        let mut workflows = HashMap::new();
        for (namespace, workflow) in self.workflows {
            if workflows.insert(namespace.clone(), workflow).is_some() {
                return Err(ClientError::Config(format!(
                    "workflow {namespace} is registered twice; register each version once"
                )));
            }
        }
        let mut declarations = self.declarations;
        declarations.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Registry {
            parts: Arc::new(Parts {
                served: Arc::new(workflows.keys().cloned().collect()),
                workflows,
                declarations,
                state: Arc::new(self.state),
                tasks: self.tasks,
                state_needs: self.state_needs,
            }),
        })
    }
}
