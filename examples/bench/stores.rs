//! Fresh stores per phase (SQLite files in a temp folder, PostgreSQL schemas) and their cleanup.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Backend;

pub(crate) const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

pub(crate) fn postgres_url() -> String {
    std::env::var("AIKI_TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned())
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64
}

pub(crate) fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}

/// Fresh stores for one backend: SQLite files in a temp folder, PostgreSQL schemas; all removed
/// by [`Stores::cleanup`].
pub(crate) struct Stores {
    pub(crate) backend: Backend,
    pub(crate) dir: PathBuf,
    schemas: Vec<String>,
}

impl Stores {
    pub(crate) fn new(backend: Backend) -> anyhow::Result<Stores> {
        let dir = std::env::temp_dir().join(format!("aiki-bench-{}", unique()));
        std::fs::create_dir_all(&dir)?;
        Ok(Stores {
            backend,
            dir,
            schemas: Vec::new(),
        })
    }

    /// The URL of a fresh, empty store.
    pub(crate) async fn fresh_url(&mut self, phase: &str) -> anyhow::Result<String> {
        match self.backend {
            Backend::Sqlite => Ok(format!(
                "sqlite://{}",
                self.dir.join(format!("{phase}.db")).display()
            )),
            Backend::Postgres => {
                use sqlx::Connection;
                let url = postgres_url();
                let now = now_ms() / 1000;
                let schema = format!("aiki_bench_{now}_{}", unique());
                let mut admin = sqlx::PgConnection::connect(&url).await?;
                sqlx::query(&format!("CREATE SCHEMA {schema}"))
                    .execute(&mut admin)
                    .await?;
                let _ = admin.close().await;
                self.schemas.push(schema.clone());
                let separator = if url.contains('?') { '&' } else { '?' };
                Ok(format!(
                    "{url}{separator}options[search_path]={schema}&aiki_schema={schema}"
                ))
            }
        }
    }

    /// Drops this run's schemas (and ones older bench runs left behind more than ten minutes
    /// ago), or removes the temp folder.
    pub(crate) async fn cleanup(self) -> anyhow::Result<()> {
        let _ = std::fs::remove_dir_all(&self.dir);
        if self.backend == Backend::Postgres {
            use sqlx::{Connection, Row};
            let now = now_ms() / 1000;
            let mut admin = sqlx::PgConnection::connect(&postgres_url()).await?;
            let stale: Vec<String> = sqlx::query(
                "SELECT schema_name FROM information_schema.schemata \
                 WHERE schema_name LIKE 'aiki_bench_%'",
            )
            .fetch_all(&mut admin)
            .await?
            .into_iter()
            .map(|row| row.get::<String, _>(0))
            .filter(|name| {
                name.split('_')
                    .nth(2)
                    .and_then(|secs| secs.parse::<i64>().ok())
                    .is_none_or(|secs| secs + 600 < now)
            })
            .collect();
            for schema in self.schemas.iter().chain(&stale) {
                sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .execute(&mut admin)
                    .await?;
            }
            let _ = admin.close().await;
        }
        Ok(())
    }
}

/// `true` when PostgreSQL answers (within 5 s).
pub(crate) async fn postgres_answers() -> Result<(), String> {
    use sqlx::Connection;
    match tokio::time::timeout(
        Duration::from_secs(5),
        sqlx::PgConnection::connect(&postgres_url()),
    )
    .await
    {
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            Ok(())
        }
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("no answer within 5 s".to_owned()),
    }
}
