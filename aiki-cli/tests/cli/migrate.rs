//! `aiki migrate` says what it found and applied: a schema created, already up to date, or
//! migrated by a newer release that admits this one; a newer one that does not is refused in
//! one line that says what to do.

use aiki::RunId;
use aiki_tests::Backend;

use crate::support::aiki;

async fn migrate_says_what_it_found_and_applied(backend: Backend) {
    let url = match backend {
        Backend::Sqlite => {
            let dir = std::env::temp_dir().join(format!("aiki-cli-{}", RunId::new()));
            std::fs::create_dir_all(&dir).unwrap();
            format!("sqlite://{}", dir.join("fresh.db").display())
        }
        _ => backend.fresh_url().await,
    };
    let created = aiki(&url, &["migrate", "-o", "table"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    println!("{}", created.stdout);
    assert!(
        created.stdout.contains("found no Aiki schema: created it"),
        "{}",
        created.stdout
    );
    assert!(
        created.stdout.contains("   1  create tables"),
        "{}",
        created.stdout
    );
    let again = aiki(&url, &["migrate", "-o", "json"]).json();
    assert_eq!(again["outcome"], "up_to_date", "{again}");
    assert_eq!(again["applied"], serde_json::json!([]));
    let release = again["release"].as_i64().unwrap();
    assert_eq!(again["found"], release);
    let table = aiki(&url, &["migrate", "-o", "table"]);
    assert_eq!(
        table.stdout.trim(),
        format!("the store's schema was already up to date (version {release}): nothing applied")
    );
    if backend != Backend::Sqlite {
        return;
    }
    // A newer release migrated it, and admits this one: nothing to do.
    use sqlx::Connection;
    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
         execution_time) VALUES (999, 'from the future', 1, x'00', 0)",
    )
    .execute(&mut db)
    .await
    .unwrap();
    let newer = aiki(&url, &["migrate", "-o", "table"]);
    assert_eq!(newer.code, 0, "{}", newer.stderr);
    assert!(
        newer
            .stdout
            .contains("at version 999, newer than this release's")
            && newer.stdout.contains("admits this release"),
        "{}",
        newer.stdout
    );
    assert_eq!(
        aiki(&url, &["migrate", "-o", "json"]).json()["outcome"],
        "newer"
    );
    // ... and one that does not: refused, naming both versions, not as a failed migration.
    sqlx::query("UPDATE aiki_compat SET readable_from = 999")
        .execute(&mut db)
        .await
        .unwrap();
    let refused = aiki(&url, &["migrate"]);
    let line = refused.failed(1);
    assert!(
        line.contains("999") && !line.contains("migration failed"),
        "{line}"
    );
    let memory = aiki("memory:", &["migrate", "-o", "table"]);
    assert!(memory.stdout.contains("has no schema"), "{}", memory.stdout);
    let flag = aiki(&url, &["migrate", "--dry-run"]);
    flag.failed(2);
}

aiki_tests::on_sql_backends!(migrate_says_what_it_found_and_applied);
