//! The end-to-end tests that share one test binary: each file of this folder is a module of
//! it, so the workspace links one binary for them, not one each. A file whose tests need the
//! process to themselves (a global tracing subscriber, processes killed and restarted, timing
//! measured against the wall clock, thousands of sockets) is a test binary of its own, named
//! in `tests/Cargo.toml`.

#![allow(missing_docs, missing_debug_implementations, unreachable_pub)]

mod common;
#[path = "workers/counting.rs"]
mod counting;

mod catalog;
mod check_app;
mod child_retry;
mod clock_skew;
mod containment;
mod continue_as_new;
mod direct_call;
mod executor;
mod first_of;
mod fork;
mod impact;
mod pause;
mod payload_limits;
mod recovery;
mod refactoring;
mod renames;
mod retention;
mod rolling_deploy;
mod round_trips;
mod run_records;
mod runtime;
mod runtime_config;
mod schedules;
mod shutdown;
mod test_env;
mod trait_form;
mod upgrade;
mod worker_start;
mod workers;
