//! Aiki.
