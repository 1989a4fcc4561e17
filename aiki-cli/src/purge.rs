//! `aiki runs purge`: deletes ended runs on the database itself, in batches under a lease of
//! its own (as the daemons' retention does under theirs), times by the store's clock. Runs
//! ended within the last hour stay unless `--allow-short-retention`; a dry run lists what would
//! go now, and what becomes purgeable later and when.

use std::io::Write;
use std::time::{Duration, Instant};

use aiki::store::{PURGE_MAX_LIMIT, PURGE_MIN_AGE_MS, PURGE_SHORTEST_AGE_MS, PurgeRuns};
use aiki::{MigrationMode, Millis, RunId, StoreError};
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
    // The youngest a run may be and go: an hour, or a second when asked for explicitly.
    let min_age = if args.allow_short_retention {
        PURGE_SHORTEST_AGE_MS
    } else {
        PURGE_MIN_AGE_MS
    };
    let youngest = now - min_age;
    if before > youngest && !args.dry_run {
        store.release_lease(&held, now).await.ok();
        return Err(Failure::usage(if args.allow_short_retention {
            format!(
                "--finished-before must be at least a second ago: give {} or earlier",
                rfc3339(youngest)
            )
        } else {
            format!(
                "--finished-before must be at least an hour ago (runs ended within the last \
                 hour are kept unless --allow-short-retention): give {} or earlier, or see \
                 with --dry-run what becomes purgeable when",
                rfc3339(youngest)
            )
        }));
    }
    let limit = args.limit.map_or(u32::MAX, |limit| limit.get());
    let result = if args.dry_run {
        // Every run ended before `before`, however young: those younger than the minimum age
        // are listed with when they become purgeable.
        let request = PurgeRuns::new(before)
            .min_age(PURGE_SHORTEST_AGE_MS)
            .limit(limit.min(PURGE_MAX_LIMIT))
            .dry_run(true);
        let ids = busy(|| store.purge_runs(&held, now, request)).await?;
        let listed = Listed::read(&*store, &ids, min_age, now).await?;
        listed.print(before, args.allow_short_retention, format, out)
    } else {
        let mut purged = 0_u64;
        loop {
            let left = limit.saturating_sub(u32::try_from(purged).unwrap_or(u32::MAX));
            let request = PurgeRuns::new(before)
                .min_age(min_age)
                .limit(left.min(BATCH));
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

/// The runs a dry run listed, each with when it becomes purgeable.
struct Listed {
    runs: Vec<(aiki::RunRecord, Millis)>,
    /// The store's now.
    now: Millis,
}

impl Listed {
    /// Reads the runs of `ids`, and when each becomes purgeable: once it, and its parent if
    /// the parent is still there, ended more than `min_age` ago.
    async fn read(
        store: &dyn aiki::Store,
        ids: &[RunId],
        min_age: Millis,
        now: Millis,
    ) -> Result<Self, Failure> {
        let mut runs = Vec::with_capacity(ids.len());
        for id in ids {
            let run = store.get_run(*id).await?;
            let mut ended = run.updated_at;
            if let Some(parent) = &run.parent {
                match store.get_run(parent.run_id).await {
                    Ok(parent) => ended = ended.max(parent.updated_at),
                    Err(StoreError::NotFound { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            runs.push((run, ended.saturating_add(min_age)));
        }
        Ok(Listed { runs, now })
    }

    /// How many are purgeable now, how many later, and when the last of them becomes so.
    fn counts(&self) -> (usize, usize, Option<Millis>) {
        let later: Vec<Millis> = self
            .runs
            .iter()
            .map(|(_, at)| *at)
            .filter(|at| *at > self.now)
            .collect();
        (
            self.runs.len() - later.len(),
            later.len(),
            later.into_iter().max(),
        )
    }

    fn print(
        &self,
        before: Millis,
        short: bool,
        format: Format,
        out: &mut impl Write,
    ) -> Result<(), Failure> {
        let (now, later, last) = self.counts();
        match format {
            Format::Table => {
                let mut table =
                    Table::new(&["id", "workflow", "version", "status", "ended", "purgeable"]);
                for (run, at) in &self.runs {
                    table.row(vec![
                        run.id.to_string(),
                        run.namespace.workflow.clone(),
                        run.namespace.version.clone(),
                        run.status.to_string(),
                        relative(run.updated_at),
                        if *at <= self.now {
                            "now".to_owned()
                        } else {
                            relative(*at)
                        },
                    ]);
                }
                table.print(out)?;
                let at_least = if self.runs.len() >= PURGE_MAX_LIMIT as usize {
                    " (at least)"
                } else {
                    ""
                };
                let later = match last {
                    Some(last) if !short => format!(
                        ", and {later} more once an hour has passed since they (and their \
                         parent) ended, the last {} ({}; now with --allow-short-retention)",
                        relative(last),
                        rfc3339(last)
                    ),
                    Some(last) => format!(
                        ", and {later} more once a second has passed since they (and their \
                         parent) ended, the last at {}",
                        rfc3339(last)
                    ),
                    None => String::new(),
                };
                writeln!(
                    out,
                    "dry run: {now} run{} that ended before {} would be purged now{at_least}\
                     {later}; nothing was changed",
                    if now == 1 { "" } else { "s" },
                    rfc3339(before),
                )?;
            }
            _ => {
                let listed: Vec<_> = self
                    .runs
                    .iter()
                    .map(|(run, at)| {
                        json!({
                            "id": run.id,
                            "workflow": run.namespace.workflow,
                            "version": run.namespace.version,
                            "status": run.status,
                            "ended_at": run.updated_at,
                            "purgeable_at": at,
                        })
                    })
                    .collect();
                json(
                    out,
                    format,
                    &json!({
                        "dry_run": true,
                        "ended_before": before,
                        "purgeable_now": now,
                        "purgeable_later": later,
                        "last_purgeable_at": last,
                        "runs": listed,
                    }),
                )?;
            }
        }
        Ok(())
    }
}

/// `at` in RFC 3339, UTC.
fn rfc3339(at: Millis) -> String {
    chrono::DateTime::from_timestamp_millis(at).map_or_else(
        || at.to_string(),
        |at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}
