//! `aiki runs purge`: deletes ended runs on the database itself, in batches under a lease of
//! its own (as the daemons' retention does under theirs), times by the store's clock.

use std::io::Write;
use std::time::{Duration, Instant};

use aiki::store::{PURGE_MAX_LIMIT, PURGE_MIN_AGE_MS, PurgeRuns};
use aiki::{MigrationMode, Millis, RunId};
use serde_json::json;

use crate::Failure;
use crate::args::{Before, Cli, Format, PurgeArgs};
use crate::output::{Table, json, relative};

/// The lease a purge from the command line holds: one such purge at a time per store.
const PURGE_LEASE: &str = "aiki-runs-purge";

/// How long the lease lasts unless renewed (it is renewed at every batch).
const LEASE_TTL: Millis = 60_000;

/// How many runs one batch takes.
const BATCH: u32 = 500;

/// How many times a write the database refused as busy (SQLite's write lock held past the
/// busy timeout by the application's writers) is tried again, after 100 ms, 200 ms and so on:
/// 5.5 s of pauses, besides each attempt's own busy timeout.
const BUSY_RETRIES: u32 = 10;

pub(crate) async fn purge(
    cli: &Cli,
    args: &PurgeArgs,
    format: Format,
    out: &mut impl Write,
) -> Result<u8, Failure> {
    let url = cli.database_url(
        "aiki runs purge",
        "; a server's daemons purge ended runs by the retention in \
         `daemons.purgeEndedRuns.retentionMs` (`aiki config set`)",
    )?;
    let store = aiki::store::connect_with_mode(url, MigrationMode::Check).await?;
    let holder = format!("aiki-cli-{}", std::process::id());
    let lease = |now: Millis| {
        let (store, holder) = (&store, holder.as_str());
        busy(move || store.acquire_lease(PURGE_LEASE, holder, LEASE_TTL, now))
    };
    let mut held = lease(aiki::Clock::now(&aiki::SystemClock)).await?;
    if held.holder != holder {
        return Err(Failure::error(format!(
            "another purge ({}) is running on this store; try again once it ends",
            held.holder
        )));
    }
    // The store's now, as the lease tells it.
    let now = held.expires_at - LEASE_TTL;
    let before = match args.finished_before {
        Before::At(at) => at,
        Before::Ago(ago) => now.saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX)),
    };
    let youngest = now - PURGE_MIN_AGE_MS;
    if before > youngest {
        store.release_lease(&held, now).await.ok();
        return Err(Failure::usage(format!(
            "--finished-before must be at least an hour ago (runs ended within the last hour \
             are never purged): give {} or earlier",
            rfc3339(youngest)
        )));
    }
    let limit = args.limit.map_or(u32::MAX, |limit| limit.get());
    let result = if args.dry_run {
        let request = PurgeRuns::new(before)
            .limit(limit.min(PURGE_MAX_LIMIT))
            .dry_run(true);
        let ids = busy(|| store.purge_runs(&held, now, request)).await?;
        print_listed(&*store, &ids, before, format, out).await
    } else {
        let mut purged = 0_u64;
        loop {
            let left = limit.saturating_sub(u32::try_from(purged).unwrap_or(u32::MAX));
            let request = PurgeRuns::new(before).limit(left.min(BATCH));
            if left == 0 {
                break;
            }
            let started = Instant::now();
            let now = held.expires_at - LEASE_TTL;
            let batch = busy(|| store.purge_runs(&held, now, request)).await?;
            purged += batch.len() as u64;
            if (batch.len() as u64) < u64::from(request.limit) {
                break;
            }
            // Leave the database to the application as long as the batch took. SQLite has
            // one writer: batches back to back would keep the application's writes waiting,
            // past their busy timeout ("database is locked").
            tokio::time::sleep(started.elapsed()).await;
            held = lease(held.expires_at - LEASE_TTL).await?;
        }
        match format {
            Format::Table => writeln!(
                out,
                "purged {purged} ended run{} that ended before {}",
                if purged == 1 { "" } else { "s" },
                rfc3339(before)
            )?,
            _ => json(
                out,
                format,
                &json!({"purged": purged, "ended_before": before}),
            )?,
        }
        Ok(())
    };
    store
        .release_lease(&held, held.expires_at - LEASE_TTL)
        .await
        .ok();
    result.map(|()| 0)
}

/// `call`, made again while the database is busy, [`BUSY_RETRIES`] times at most.
async fn busy<T, F>(mut call: impl FnMut() -> F) -> Result<T, aiki::StoreError>
where
    F: Future<Output = Result<T, aiki::StoreError>>,
{
    let mut retries = 0;
    loop {
        match call().await {
            Err(error) if error.is_transient() && retries < BUSY_RETRIES => {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(100 * u64::from(retries))).await;
            }
            result => return result,
        }
    }
}

/// Prints the runs a dry run listed, with what each was.
async fn print_listed(
    store: &dyn aiki::Store,
    ids: &[RunId],
    before: Millis,
    format: Format,
    out: &mut impl Write,
) -> Result<(), Failure> {
    let mut runs = Vec::with_capacity(ids.len());
    for id in ids {
        runs.push(store.get_run(*id).await?);
    }
    match format {
        Format::Table => {
            let mut table = Table::new(&["id", "workflow", "version", "status", "ended"]);
            for run in &runs {
                table.row(vec![
                    run.id.to_string(),
                    run.namespace.workflow.clone(),
                    run.namespace.version.clone(),
                    run.status.to_string(),
                    relative(run.updated_at),
                ]);
            }
            table.print(out)?;
            writeln!(
                out,
                "dry run: {} run{} that ended before {} would be purged{}; nothing was changed",
                runs.len(),
                if runs.len() == 1 { "" } else { "s" },
                rfc3339(before),
                if runs.len() >= PURGE_MAX_LIMIT as usize {
                    " (at least)"
                } else {
                    ""
                },
            )?;
        }
        _ => {
            let listed: Vec<_> = runs
                .iter()
                .map(|run| {
                    json!({
                        "id": run.id,
                        "workflow": run.namespace.workflow,
                        "version": run.namespace.version,
                        "status": run.status,
                        "ended_at": run.updated_at,
                    })
                })
                .collect();
            json(
                out,
                format,
                &json!({"dry_run": true, "ended_before": before, "runs": listed}),
            )?;
        }
    }
    Ok(())
}

/// `at` in RFC 3339, UTC.
fn rfc3339(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at).map_or_else(
        || at.to_string(),
        |at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}
