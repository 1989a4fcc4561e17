//! Test databases on the PostgreSQL server named by `AIKI_TEST_DATABASE_URL`.

use std::sync::OnceLock;

use sqlx::Connection;
use sqlx::postgres::PgConnection;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const PREFIX: &str = "aiki_store_test_";

/// The server's URL (its maintenance database).
pub fn server_url() -> String {
    std::env::var("AIKI_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// `url` with its database replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |at| at + 3);
    let base = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    format!("{base}/{database}{query}")
}

/// A connection to the server, or `None` (after a loud message) when none answers. Under
/// `CI=true` a missing server fails the test instead.
pub async fn admin() -> Option<PgConnection> {
    let url = server_url();
    match PgConnection::connect(&url).await {
        Ok(connection) => Some(connection),
        Err(error) => {
            let message = format!(
                "\n\n==================== POSTGRESQL TESTS SKIPPED ====================\n\
                 no PostgreSQL server answers at {url}: {error}\n\
                 set AIKI_TEST_DATABASE_URL to run them\n\
                 ==================================================================\n"
            );
            if std::env::var("CI").is_ok_and(|ci| ci == "true") {
                panic!("{message}(CI=true: a missing server is a failure)");
            }
            eprintln!("{message}");
            None
        }
    }
}

/// Creates a fresh, empty database and returns its URL.
pub async fn create_database() -> Option<String> {
    let mut admin = admin().await?;
    let name = format!(
        "{PREFIX}{}_{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    );
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("create the test database");
    Some(with_database(&server_url(), &name))
}

/// Drops a database made by [`create_database`].
pub async fn drop_database(url: &str) {
    let name = url
        .rsplit('/')
        .next()
        .and_then(|tail| tail.split('?').next())
        .expect("a database name");
    assert!(name.starts_with(PREFIX), "only test databases are dropped");
    if let Some(mut admin) = admin().await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut admin)
            .await;
    }
}

/// Drops test databases whose creating process has exited (Linux: no `/proc/<pid>`).
async fn drop_leftovers() {
    let Some(mut admin) = admin().await else {
        return;
    };
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE $1")
            .bind(format!("{PREFIX}%"))
            .fetch_all(&mut admin)
            .await
            .unwrap_or_default();
    for name in names {
        let pid = name[PREFIX.len()..].split('_').next().unwrap_or_default();
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        if !alive {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut admin)
                .await;
        }
    }
}

/// The database every test of this binary shares (created on first use), or `None`.
pub async fn shared_database() -> Option<String> {
    static SHARED: OnceLock<Option<String>> = OnceLock::new();
    static CREATING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    if let Some(url) = SHARED.get() {
        return url.clone();
    }
    let _creating = CREATING.lock().await;
    if let Some(url) = SHARED.get() {
        return url.clone();
    }
    drop_leftovers().await;
    let url = create_database().await;
    if let Some(url) = &url {
        eprintln!("PostgreSQL conformance database: {url}");
    }
    SHARED.get_or_init(|| url).clone()
}
