//! Guides: longer walks through Aiki than the API docs, with examples that compile.

#[doc = include_str!("../docs/guide/changing-running-workflows.md")]
pub mod changing_running_workflows {}

#[cfg(feature = "testing")]
#[doc = include_str!("../docs/guide/testing-workflows.md")]
pub mod testing_workflows {}
