//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod cancel;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod records;
