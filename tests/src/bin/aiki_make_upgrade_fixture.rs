//! Writes the upgrade fixtures of this release (see `aiki_tests::upgrade`): a SQLite file and a
//! PostgreSQL dump holding one run per waiting status and a queued one. Run once per release,
//! from the workspace root, and commit the output:
//!
//! ```sh
//! cargo run -p aiki-tests --bin aiki_make_upgrade_fixture -- tests/fixtures/v0.1.0
//! ```
//!
//! It needs the PostgreSQL server of `AIKI_TEST_DATABASE_URL` (it creates and drops a database
//! there) and `pg_dump` on the PATH.

use std::path::PathBuf;
use std::time::Duration;

use aiki::{Client, ManualClock, RunStatus, Worker};
use aiki_tests::Executions;
use aiki_tests::upgrade::{Fixture, FixtureChild, FixtureFlaky, FixtureStep, RUNS, WRITTEN_AT};
use anyhow::{Context, bail};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let folder: PathBuf = std::env::args()
        .nth(1)
        .context("usage: aiki_make_upgrade_fixture FOLDER")?
        .into();
    std::fs::create_dir_all(&folder)?;
    let sqlite = folder.join("sqlite.db");
    let _ = std::fs::remove_file(&sqlite);
    write(&format!("sqlite://{}", sqlite.display())).await?;
    // Fold the WAL into the file, so that the fixture is one file.
    {
        use sqlx::Connection;
        let mut connection =
            sqlx::SqliteConnection::connect(&format!("sqlite://{}", sqlite.display())).await?;
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&mut connection)
            .await?;
        sqlx::query("PRAGMA journal_mode = DELETE")
            .execute(&mut connection)
            .await?;
    }

    let server = aiki_tests::postgres_url();
    let database = format!("aiki_fixture_{}", uuid::Uuid::new_v4().simple());
    admin(&server, &format!("CREATE DATABASE {database}")).await?;
    let url = with_database(&server, &database);
    let written = write(&url).await;
    let dumped = written.and_then(|()| {
        let output = std::process::Command::new("pg_dump")
            .args([
                "--no-owner",
                "--no-privileges",
                "--inserts",
                "--dbname",
                &url,
            ])
            .output()
            .context("run pg_dump")?;
        if !output.status.success() {
            bail!(
                "pg_dump failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::fs::write(folder.join("postgres.sql"), output.stdout)?;
        Ok(())
    });
    admin(&server, &format!("DROP DATABASE {database} WITH (FORCE)")).await?;
    dumped?;
    println!("wrote {}", folder.display());
    Ok(())
}

/// Runs the fixture workflows on the store at `url` until every run waits where it should.
async fn write(url: &str) -> anyhow::Result<()> {
    let store = aiki::store::connect(url).await?;
    let clock = ManualClock::new(WRITTEN_AT);
    let client = Client::new(store.clone()).with_clock(clock.clone());
    let worker = Worker::builder(store.clone())
        .register(Fixture)
        .register(FixtureChild)
        .task(FixtureStep)
        .task(FixtureFlaky)
        .state(Executions::default())
        .clock(clock.clone())
        .poll_interval(Duration::from_millis(5))
        .build()?
        .start();
    let mut handles = Vec::new();
    for (input, _) in RUNS.iter().filter(|(input, _)| *input != "queued") {
        handles.push((
            input,
            client
                .start::<Fixture>((*input).to_owned())
                .reference_id(*input)
                .await?,
        ));
    }
    for (input, handle) in &handles {
        let (_, status) = RUNS.iter().find(|(i, _)| i == *input).expect("listed");
        let status: RunStatus = status.parse()?;
        handle
            .wait_for_status_timeout(status, Duration::from_secs(30))
            .await
            .with_context(|| format!("run `{input}` did not reach `{status}`"))?;
    }
    worker.shutdown().await;
    // Started with no worker running: it stays queued.
    client
        .start::<Fixture>("queued".to_owned())
        .reference_id("queued")
        .await?;
    Ok(())
}

fn with_database(server: &str, database: &str) -> String {
    let (base, _) = server.rsplit_once('/').expect("a database URL");
    format!("{base}/{database}")
}

async fn admin(server: &str, sql: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(server).await?;
    sqlx::query(sql).execute(&mut connection).await?;
    Ok(())
}
