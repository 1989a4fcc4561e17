//! `aiki endpoints`: set, list, rotate and remove push endpoints on the store itself; a secret
//! is shown once and never listed; bad input is a usage error naming what is wrong.

use aiki_tests::Backend;

use crate::support::aiki;

async fn endpoints_are_set_listed_rotated_removed_and_bad_input_refused(backend: Backend) {
    let url = backend.fresh_url().await;
    assert_eq!(aiki(&url, &["migrate"]).code, 0);
    let set = aiki(
        &url,
        &[
            "endpoints",
            "set",
            "orders@1",
            "https://fn.example/aiki",
            "--budget",
            "30s",
            "-o",
            "json",
        ],
    );
    assert_eq!(set.code, 0, "{}", set.stderr);
    let set = set.json();
    let secret = set["secret"].as_str().expect("the secret, once").to_owned();
    assert!(secret.starts_with("whsec_"), "{set}");
    assert_eq!(set["budget_ms"], 30_000);
    let table = aiki(
        &url,
        &[
            "endpoints",
            "set",
            "orders@1",
            "https://fn.example/v2",
            "-o",
            "table",
        ],
    );
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("budget 30s"),
        "a set keeps the budget: {}",
        table.stdout
    );
    assert!(
        !table.stdout.contains("whsec_"),
        "an existing endpoint's secret is not shown again"
    );

    let rotated = aiki(
        &url,
        &[
            "endpoints",
            "rotate",
            "orders@1",
            "--overlap",
            "1h",
            "-o",
            "json",
        ],
    );
    assert_eq!(rotated.code, 0, "{}", rotated.stderr);
    let rotated = rotated.json();
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, secret);
    assert_eq!(
        rotated["secrets"].as_array().map(Vec::len),
        Some(2),
        "{rotated}"
    );
    let third = aiki(&url, &["endpoints", "rotate", "orders@1"]);
    assert_eq!(third.code, 1, "{}", third.stdout);
    assert!(third.stderr.contains("at most 2"), "{}", third.stderr);

    let listed = aiki(&url, &["endpoints", "list", "-o", "json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        !listed.stdout.contains(&secret) && !listed.stdout.contains(&new),
        "no secret is listed"
    );
    let listed = listed.json();
    assert_eq!(listed[0]["url"], "https://fn.example/v2", "{listed}");
    let table = aiki(&url, &["endpoints", "list", "-o", "table"]);
    assert!(
        table.stdout.contains("orders@1") && table.stdout.contains("expires"),
        "{}",
        table.stdout
    );
    assert!(!table.stdout.contains("whsec_"), "{}", table.stdout);

    for bad in [
        vec!["endpoints", "set", "orders", "https://fn.example/"],
        vec!["endpoints", "set", "@1", "https://fn.example/"],
        vec!["endpoints", "set", "orders@1", "ftp://fn.example/"],
        vec!["endpoints", "set", "orders@1", "https://"],
        vec!["endpoints", "set", "orders@1", "https://fn example/"],
        vec!["endpoints", "set", "orders@1"],
        vec!["endpoints", "set", "orders@1", "https://a/", "https://b/"],
        vec![
            "endpoints",
            "set",
            "orders@1",
            "https://fn.example/",
            "--budget",
            "0s",
        ],
        vec![
            "endpoints",
            "set",
            "orders@1",
            "https://fn.example/",
            "--budget",
            "2h",
        ],
        vec![
            "endpoints",
            "set",
            "orders@1",
            "https://fn.example/",
            "--budget",
            "soon",
        ],
        vec!["endpoints", "rotate", "orders@1", "--overlap", "-1s"],
        vec!["endpoints", "remove"],
    ] {
        let refused = aiki(&url, &bad);
        assert_eq!(refused.code, 2, "{bad:?}: {}", refused.stderr);
        assert!(refused.stdout.is_empty(), "{bad:?}: {}", refused.stdout);
    }
    let bad_url = aiki(&url, &["endpoints", "set", "orders@1", "ftp://x/"]);
    assert!(bad_url.stderr.contains("http(s)://"), "{}", bad_url.stderr);
    let bad_budget = aiki(
        &url,
        &[
            "endpoints",
            "set",
            "orders@1",
            "https://x/",
            "--budget",
            "2h",
        ],
    );
    assert!(
        bad_budget.stderr.contains("1s to 1h"),
        "{}",
        bad_budget.stderr
    );
    let unknown = aiki(&url, &["endpoints", "rotate", "billing@1"]);
    assert_eq!(unknown.code, 1, "{}", unknown.stdout);
    assert!(
        unknown.stderr.contains("has no push endpoint"),
        "{}",
        unknown.stderr
    );
    let through = aiki("http://127.0.0.1:9", &["endpoints", "list"]);
    assert_eq!(through.code, 1, "{}", through.stderr);
    assert!(
        through.stderr.contains("store itself"),
        "{}",
        through.stderr
    );

    let removed = aiki(&url, &["endpoints", "remove", "orders@1", "-o", "table"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert!(
        removed.stdout.contains("no longer pushed"),
        "{}",
        removed.stdout
    );
    let again = aiki(&url, &["endpoints", "remove", "orders@1"]);
    assert_eq!(again.code, 1, "{}", again.stdout);
    let listed = aiki(&url, &["endpoints", "list", "-o", "json"]).json();
    assert_eq!(listed, serde_json::json!([]));
}

aiki_tests::on_sql_backends!(endpoints_are_set_listed_rotated_removed_and_bad_input_refused,);
