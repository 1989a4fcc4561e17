//! `my-app aiki check` and `my-app aiki runs fork --version`: a service's own binary with its
//! next build compiled in, as a process, against SQLite and PostgreSQL stores holding runs of
//! the build deployed now; on PostgreSQL through a role that may only read. Its exit codes
//! (0 passed, 6 a run would break, 1 the check could not run, 2 bad input) and its one-line
//! errors.

use std::process::{Command, Output};

use aiki::{RunId, RunStatus};
use aiki_tests::check_app::{Ledger, LedgerProceed, Mail, Shop, deployed};
use aiki_tests::{Backend, Harness};
use serde_json::Value;

fn app(url: &str, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_aiki_check_app"))
        .arg("aiki")
        .args(args)
        .env("AIKI_URL", url)
        .env_remove("AIKI_CHECK_APP_BARE")
        .output()
        .expect("the app runs");
    println!(
        "$ my-app aiki {} (exit {:?})\n{}{}",
        args.join(" "),
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("JSON on standard output")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn the_check_gates_a_deploy(backend: Backend) {
    let url = backend.fresh_url().await;
    let mut h = Harness::on_url(&url).await;
    h.deploy(deployed).await;
    let shop = h.client.start::<Shop>("x".into()).await.unwrap();
    let ledger = h.client.start::<Ledger>("x".into()).await.unwrap();
    let mail = h.client.start::<Mail>("x".into()).await.unwrap();
    h.reach(&shop, RunStatus::AwaitingEvent).await;
    h.reach(&ledger, RunStatus::AwaitingEvent).await;
    mail.result().await.unwrap();
    h.deploy(|w| w).await;
    let url = match backend {
        Backend::Postgres => aiki_tests::read_only_role(&url).await.0,
        _ => url,
    };
    let before = h.store.load_history(ledger.id()).await.unwrap();

    // The inserted step fails the gate; the appended one does not.
    let checked = app(&url, &["check", "-o", "json"]);
    assert_eq!(checked.status.code(), Some(6), "{}", stderr(&checked));
    let report = json(&checked);
    assert_eq!(report["passed"], false);
    assert_eq!(
        report["failing"],
        serde_json::json!([ledger.id().to_string()])
    );
    let runs = report["runs"].as_array().unwrap();
    let verdict = |id: RunId| {
        runs.iter()
            .find(|run| run["run_id"] == id.to_string())
            .map(|run| run["verdict"]["kind"].as_str().unwrap().to_owned())
    };
    assert_eq!(verdict(ledger.id()).as_deref(), Some("diverges"));
    assert_eq!(verdict(shop.id()).as_deref(), Some("new_work"));
    assert_eq!(verdict(mail.id()), None, "ended runs are not checked");
    assert_eq!(h.store.load_history(ledger.id()).await.unwrap(), before);

    // The table names the runs, and what they would do.
    let table = app(&url, &["check", "-o", "table"]);
    assert_eq!(table.status.code(), Some(6));
    let text = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        text.contains("ledger@1") && text.contains("diverges 1"),
        "{text}"
    );
    assert!(
        text.contains("then task `step-b` after event `proceed` arrives"),
        "{text}"
    );
    assert!(text.contains("FAILED: 1 run(s) fail the gate"), "{text}");

    // Narrowed to the safe workflow it passes, unless new work is denied too.
    let shop_only = app(&url, &["check", "--workflow", "shop", "-o", "json"]);
    assert_eq!(shop_only.status.code(), Some(0), "{}", stderr(&shop_only));
    assert_eq!(json(&shop_only)["passed"], true);
    let strict = app(
        &url,
        &[
            "check",
            "--workflow",
            "shop",
            "--deny",
            "new-work",
            "-o",
            "json",
        ],
    );
    assert_eq!(strict.status.code(), Some(6));

    // Once the ledger run has moved on, the check passes: nothing is left that would break.
    h.deploy(deployed).await;
    ledger.send::<LedgerProceed>(()).await.unwrap();
    ledger.result().await.unwrap();
    h.deploy(|w| w).await;
    let passed = app(&url, &["check", "-o", "json"]);
    assert_eq!(passed.status.code(), Some(0), "{}", stderr(&passed));

    // Forking the ended mail run onto version 3 diverges: refused, nothing written; onto
    // version 2 it replays, and the fork is made (through the read-only role it cannot be).
    let id = mail.id().to_string();
    let refused = app(&url, &["runs", "fork", &id, "--version", "3", "-o", "json"]);
    assert_eq!(refused.status.code(), Some(1));
    let line = stderr(&refused);
    assert!(
        line.starts_with("error: refused to fork run") && line.contains("step-c:"),
        "{line}"
    );
    let unknown = app(&url, &["runs", "fork", &id, "--version", "9"]);
    assert_eq!(unknown.status.code(), Some(1));
    let line = stderr(&unknown);
    assert!(
        line.contains("workflow mail@9 is not registered in this build"),
        "{line}"
    );
    if backend != Backend::Postgres {
        let forked = app(&url, &["runs", "fork", &id, "--version", "2", "-o", "json"]);
        assert_eq!(forked.status.code(), Some(0), "{}", stderr(&forked));
        let fork = json(&forked);
        assert_eq!(fork["namespace"]["version"], "2");
        assert_eq!(fork["lineage"]["forked_from"], id);
        let again = app(&url, &["runs", "fork", &id, "--version", "2", "-o", "json"]);
        assert_eq!(
            json(&again)["id"],
            fork["id"],
            "the same options give the same fork"
        );
    }
}

async fn bad_input_is_refused_in_one_line(backend: Backend) {
    let url = backend.fresh_url().await;
    let h = Harness::on_url(&url).await;
    drop(h);
    for (args, code, says) in [
        (
            &["check", "--deny", "nothing"][..],
            2,
            "invalid value 'nothing'",
        ),
        (&["check", "--max", "0"][..], 2, "--max"),
        (&["check", "--failed-within", "5x"][..], 2, "not a duration"),
        (&["check", "--bogus"][..], 2, "--bogus"),
        (
            &["runs", "fork", "not-an-id", "--version", "2"][..],
            2,
            "not a run id",
        ),
        (
            &[
                "runs",
                "fork",
                "1b4e28ba-2fa1-41d2-883f-0016d3cca427",
                "--version",
                "2",
            ][..],
            1,
            "not found",
        ),
        (
            &[
                "runs",
                "fork",
                "1b4e28ba-2fa1-41d2-883f-0016d3cca427",
                "--version",
                "9",
            ][..],
            1,
            "not found",
        ),
    ] {
        let output = app(&url, args);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}: {}",
            stderr(&output)
        );
        let line = stderr(&output);
        assert!(line.contains(says), "{args:?}: {line}");
        assert_eq!(line.trim_end().lines().count(), 1, "{args:?}: {line}");
    }
    // Without the workflows compiled in (the generic binary), the check cannot run.
    let bare = Command::new(env!("CARGO_BIN_EXE_aiki_check_app"))
        .args(["aiki", "check", "--url", &url])
        .env("AIKI_CHECK_APP_BARE", "1")
        .output()
        .unwrap();
    assert_eq!(bare.status.code(), Some(1));
    assert!(
        stderr(&bare).contains("needs the workflows' code"),
        "{}",
        stderr(&bare)
    );
    // A schema a newer release migrated: refused, naming both versions; nothing changed.
    {
        use sqlx::Connection;
        let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (999, 'from the future', 1, x'00', 0)",
        )
        .execute(&mut db)
        .await
        .unwrap();
        // A migration this release's schema version does not admit any more.
        sqlx::query("UPDATE aiki_compat SET readable_from = 999")
            .execute(&mut db)
            .await
            .unwrap();
    }
    let newer = app(&url, &["check"]);
    assert_eq!(newer.status.code(), Some(1), "{}", stderr(&newer));
    let line = stderr(&newer);
    assert!(
        line.contains("at version 999") && line.contains("this release's is"),
        "names both versions: {line}"
    );
    // A store that is not there: the check could not run.
    let missing = app("postgres://postgres@127.0.0.1:1/none", &["check"]);
    assert_eq!(
        missing.status.code(),
        Some(aiki_cli::EXIT_UNREACHABLE.into()),
        "{}",
        stderr(&missing)
    );
}

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_check_gates_a_deploy() {
        aiki_tests::bounded(super::the_check_gates_a_deploy(aiki_tests::Backend::Sqlite)).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_input_is_refused_in_one_line() {
        aiki_tests::bounded(super::bad_input_is_refused_in_one_line(
            aiki_tests::Backend::Sqlite,
        ))
        .await
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_check_gates_a_deploy() {
        if aiki_tests::postgres_available().await {
            aiki_tests::bounded(super::the_check_gates_a_deploy(
                aiki_tests::Backend::Postgres,
            ))
            .await
        }
    }
}
