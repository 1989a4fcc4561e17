//! Helpers shared by the server's integration tests.
#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "postgres")]
#[path = "../../../aiki-store/tests/support/postgres.rs"]
pub mod postgres;
pub mod remote;
pub mod requests;
pub mod routes;
pub mod shared_time;
