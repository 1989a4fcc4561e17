//! The store's tests that share one test binary: each file of this folder is a module of it
//! (a backend's behind its feature), so the workspace links one binary for them, not one
//! each. The conformance suite runs per backend in binaries of its own (`Cargo.toml`).

mod support;

mod change_pages;
mod claim_queue;
mod postgres;
mod postgres_clock;
mod postgres_ready;
mod purge_plan;
mod sqlite;
mod start_batches;
