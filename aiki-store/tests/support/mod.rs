//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

#[cfg(feature = "postgres")]
pub mod postgres;
pub mod records;
