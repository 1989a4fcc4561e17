//! The server's tests that share one test binary: each file of this folder is a module of it,
//! so the workspace links one binary for them, not one each. The fuzz pass and the fault
//! tests, whose figures CI prints, are binaries of their own (`Cargo.toml`).

mod support;

mod auth;
mod bad_input;
mod conformance_remote;
mod entry_batch;
mod entry_writes;
mod long_poll;
mod repeats;
mod schedule_routes;
mod store_time;
