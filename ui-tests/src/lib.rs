//! Compile tests live in `tests/` and `ui/`.
