//! Compile-pass and compile-fail tests of `#[aiki::task]` and `#[aiki::workflow]`.
//!
//! Bless changed messages with `TRYBUILD=overwrite cargo test -p aiki-ui-tests`, then review
//! every `.stderr` diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
