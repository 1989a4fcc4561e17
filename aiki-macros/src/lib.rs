//! The `#[task]` and `#[workflow]` attribute macros of Aiki. Use them through the `aiki` crate.
