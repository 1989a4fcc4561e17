//! The tasks a worker's runs were seen calling, per workflow version: the catalog lists them
//! beside the tasks the worker declares one by one (`WorkerBuilder::task`), so a tool without
//! the code sees every task a version calls.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use aiki_store::{Namespace, TaskDeclaration};

/// The tasks seen called, by version, and whether any is new since the catalog last took them.
#[derive(Debug, Default)]
pub(crate) struct CalledTasks {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    /// The task names seen per version: the cheap check on the hot path (no allocation once a
    /// task is known).
    names: HashMap<Namespace, HashSet<&'static str>>,
    /// The declarations not yet published, by version.
    new: BTreeMap<Namespace, Vec<TaskDeclaration>>,
}

impl CalledTasks {
    /// Notes a call of task `name` by a run of `namespace`; `declare` makes its declaration the
    /// first time only.
    pub(crate) fn note(
        &self,
        namespace: &Namespace,
        name: &'static str,
        declare: impl FnOnce() -> TaskDeclaration,
    ) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen
            .names
            .get(namespace)
            .is_some_and(|names| names.contains(name))
        {
            return;
        }
        seen.names
            .entry(namespace.clone())
            .or_default()
            .insert(name);
        seen.new
            .entry(namespace.clone())
            .or_default()
            .push(declare());
    }

    /// The declarations seen since the last call, by version.
    pub(crate) fn take_new(&self) -> BTreeMap<Namespace, Vec<TaskDeclaration>> {
        std::mem::take(&mut self.seen.lock().unwrap_or_else(|e| e.into_inner()).new)
    }
}
