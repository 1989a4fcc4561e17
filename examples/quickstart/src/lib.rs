//! The quickstart lives in this package's `quickstart` example (`cargo run --example
//! quickstart`); a package needs a target of its own beside it, and this is it.
