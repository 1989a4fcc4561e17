//! The conformance suite against the in-memory backend.

aiki_store::conformance_tests!(async {
    aiki_store::connect("memory:")
        .await
        .expect("the memory store opens")
});
