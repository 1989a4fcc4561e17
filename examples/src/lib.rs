//! Examples live in this crate's `[[example]]` targets.
