//! The chaos soak harness, written once for every transport: a set of worker processes on a
//! store, `runs` runs of the [`soak`](crate::soak) workflow (five tasks under
//! `fixed(max_attempts = 20, delay_ms = 5)`), a random worker `kill -9`ed every few hundred
//! ms and started again, and optionally one disruption mid-load (a database outage). The
//! caller says how to start a worker process ([`WorkerCommand`]) and names the store and the
//! side table by URL; nothing here knows the transport.
//!
//! The counts are exact: each handler logs its start to the side table before it works, and
//! the store's history gives each completed entry's `updated_at` on the same (system) clock.
//! A start later than its entry's completion is a recorded result executed again.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aiki::store::{EntryKind, EntryStatus, History};
use aiki::{BoxStore, Client, ClientError, Millis, RunId, RunStatus};

use crate::processes::{WorkerProcesses, history};
use crate::soak::{SideTable, Soak as SoakWorkflow, max_attempts};

/// What a worker process is started with.
#[derive(Clone, Copy, Debug)]
pub struct WorkerSpec<'a> {
    /// The worker's id (a restarted worker gets a new one).
    pub id: &'a str,
    /// The store the worker serves.
    pub store_url: &'a str,
    /// The database its handlers log their starts to (see [`SideTable`]).
    pub side_table_url: &'a str,
}

/// How to start one worker process, ready to spawn.
pub type WorkerCommand = Box<dyn Fn(WorkerSpec<'_>) -> Command + Send + Sync>;

/// Something done once mid-load on a thread of its own (say, cutting the workers off the
/// database); returns what it did, for the report.
pub type Disruption = Box<dyn FnOnce() -> String + Send>;

/// One soak: its parameters. [`Soak::new`] reads the size from the environment.
pub struct Soak {
    /// Names the soak in the report (`PostgreSQL`, `SQLite`, …).
    pub label: String,
    /// The store's URL, for the worker processes and for this process's client.
    pub store_url: String,
    /// The side table's database.
    pub side_table_url: String,
    /// Starts a worker process.
    pub worker: WorkerCommand,
    /// How many worker processes run at once.
    pub workers: usize,
    /// How many runs are started.
    pub runs: usize,
    /// The pause between two kills, drawn uniformly from this range.
    pub kill_every: Range<Duration>,
    /// The whole load's time limit: runs not ended by then are lost.
    pub budget: Duration,
    /// The end of the budget without kills, so that runs in flight can end.
    pub calm: Duration,
    /// Done once, when half of the runs have been started.
    pub disruption: Option<Disruption>,
}

impl fmt::Debug for Soak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Soak")
            .field("label", &self.label)
            .field("store_url", &self.store_url)
            .field("side_table_url", &self.side_table_url)
            .field("workers", &self.workers)
            .field("runs", &self.runs)
            .field("kill_every", &self.kill_every)
            .field("budget", &self.budget)
            .field("calm", &self.calm)
            .field("disruption", &self.disruption.is_some())
            .finish_non_exhaustive()
    }
}

/// The number of runs of the short mode (CI); `AIKI_SOAK_RUNS` sets another.
pub const SHORT_RUNS: usize = 200;

impl Soak {
    /// A soak of 4 workers, `AIKI_SOAK_RUNS` runs (default [`SHORT_RUNS`]), a kill every
    /// 200–500 ms, a budget of 85 s for the short mode (scaled with the runs beyond it) whose
    /// last 25 s are calm, and no disruption.
    pub fn new(
        label: impl Into<String>,
        store_url: impl Into<String>,
        side_table_url: impl Into<String>,
        worker: WorkerCommand,
    ) -> Soak {
        let runs = std::env::var("AIKI_SOAK_RUNS")
            .ok()
            .map(|runs| runs.parse().expect("AIKI_SOAK_RUNS is a number of runs"))
            .unwrap_or(SHORT_RUNS);
        let budget = Duration::from_secs(85).max(Duration::from_millis(450) * runs as u32);
        Soak {
            label: label.into(),
            store_url: store_url.into(),
            side_table_url: side_table_url.into(),
            worker,
            workers: 4,
            runs,
            kill_every: Duration::from_millis(200)..Duration::from_millis(500),
            budget,
            calm: Duration::from_secs(25),
            disruption: None,
        }
    }

    /// Runs the soak; returns its counts (assert them with [`Counts::assert_clean`]).
    pub async fn run(self) -> Counts {
        let side_table = SideTable::create(&self.side_table_url)
            .await
            .expect("the side table is created");
        let store = aiki::store::connect(&self.store_url)
            .await
            .expect("the store opens");
        let client = Client::new(store.clone());
        let seed = fastrand::u64(..);
        let chaos = Chaos {
            spec: (self.store_url.clone(), self.side_table_url.clone()),
            worker: self.worker,
            kill_every: self.kill_every,
            rng: fastrand::Rng::with_seed(seed),
        };
        let began = Instant::now();
        let (stop, monkey) = chaos.start(self.workers);
        let started = Arc::new(Mutex::new(Vec::with_capacity(self.runs)));
        let starter = tokio::spawn(start_runs(
            client,
            self.runs,
            started.clone(),
            self.disruption,
        ));
        let calm_at = began + self.budget.saturating_sub(self.calm);
        let end = began + self.budget;
        let mut ids = Vec::with_capacity(self.runs);
        let mut pending = Vec::new();
        let mut completions = Completions::default();
        while (ids.len() < self.runs || !pending.is_empty()) && Instant::now() < end {
            if Instant::now() >= calm_at {
                stop.store(true, Ordering::Relaxed);
            }
            let new: Vec<RunId> = std::mem::take(&mut *started.lock().expect("the started runs"));
            ids.extend_from_slice(&new);
            pending.extend(new);
            sweep(&store, &mut pending, &mut completions).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let load = began.elapsed();
        stop.store(true, Ordering::Relaxed);
        let (workers, kills) = monkey.await.expect("the chaos task ends");
        drop(workers);
        let disruption = starter
            .await
            .expect("the runs were started")
            .map(|thread| thread.join().expect("the disruption ran"));
        let starts = side_table.starts().await.expect("the side table reads");
        let mut counts = Counts {
            label: self.label,
            seed,
            runs: self.runs,
            workers: self.workers,
            kills,
            disruption,
            load,
            ..Counts::default()
        };
        counts.tally(&store, &ids, &starts, completions).await;
        counts
    }
}

/// The key of one manifest entry: run id, address, index.
type EntryKey = (String, String, u32);

/// Each completed task entry's earliest completion seen, by the sweeps during the load and
/// by the final tally. An entry executed again overwrites its completion with a later one,
/// so the final history alone would hide the first; a sweep that saw it keeps it.
#[derive(Debug, Default)]
struct Completions(HashMap<EntryKey, Millis>);

impl Completions {
    fn note(&mut self, history: &History) {
        for entry in &history.entries {
            if entry.kind == EntryKind::Task && entry.status == EntryStatus::Completed {
                let key = (
                    history.run.id.to_string(),
                    entry.address.clone(),
                    entry.index,
                );
                let first = self.0.entry(key).or_insert(entry.updated_at);
                *first = (*first).min(entry.updated_at);
            }
        }
    }
}

/// Starts `runs` soak runs (reference ids `r0`, `r1`, …, so a start retried through an outage
/// is not doubled), handing each id to `started`; after half of them, begins the disruption
/// on a thread of its own, so it hits a load in full flight.
async fn start_runs(
    client: Client,
    runs: usize,
    started: Arc<Mutex<Vec<RunId>>>,
    mut disruption: Option<Disruption>,
) -> Option<std::thread::JoinHandle<String>> {
    let mut disrupting = None;
    for i in 0..runs {
        if i == runs / 2 {
            disrupting = disruption.take().map(std::thread::spawn);
        }
        let key = format!("r{i}");
        let deadline = Instant::now() + crate::processes::PATIENCE;
        let id = loop {
            match client
                .start::<SoakWorkflow>(key.clone())
                .reference_id(key.clone())
                .await
            {
                Ok(run) => break run.id(),
                Err(ClientError::Store(error))
                    if error.is_transient() && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(error) => panic!("run {key} did not start: {error}"),
            }
        };
        started.lock().expect("the started runs").push(id);
    }
    disrupting
}

/// Reads the histories of the runs in `pending`, noting their completions, and moves the
/// runs that ended out (a store that does not answer is asked again at the next sweep).
async fn sweep(store: &BoxStore, pending: &mut Vec<RunId>, completions: &mut Completions) {
    let mut still = Vec::with_capacity(pending.len());
    for (i, id) in pending.iter().enumerate() {
        match tokio::time::timeout(Duration::from_secs(2), store.load_history(*id)).await {
            Ok(Ok(history)) => {
                completions.note(&history);
                if !history.run.status.is_terminal() {
                    still.push(*id);
                }
            }
            _ => {
                still.extend_from_slice(&pending[i..]);
                break;
            }
        }
    }
    *pending = still;
}

/// The monkey: kills a random worker every few hundred ms and starts a new one in its place.
struct Chaos {
    spec: (String, String),
    worker: WorkerCommand,
    kill_every: Range<Duration>,
    rng: fastrand::Rng,
}

impl Chaos {
    fn command(&self, slot: usize, generation: usize) -> Command {
        (self.worker)(WorkerSpec {
            id: &format!("soak-{slot}.{generation}"),
            store_url: &self.spec.0,
            side_table_url: &self.spec.1,
        })
    }

    /// Starts `workers` processes and the kills; they stop when the flag is set, handing
    /// back the (still running) processes and the number of kills.
    fn start(
        mut self,
        workers: usize,
    ) -> (
        Arc<AtomicBool>,
        tokio::task::JoinHandle<(WorkerProcesses, usize)>,
    ) {
        let mut processes = WorkerProcesses::default();
        for slot in 0..workers {
            processes.spawn(self.command(slot, 0));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let monkey = tokio::spawn(async move {
            let mut kills = 0;
            loop {
                let range = self.kill_every.start.as_millis() as u64
                    ..self.kill_every.end.as_millis() as u64;
                let pause = Duration::from_millis(self.rng.u64(range));
                tokio::time::sleep(pause).await;
                if stopped.load(Ordering::Relaxed) {
                    return (processes, kills);
                }
                let slot = self.rng.usize(..processes.len());
                processes.kill_9(slot);
                kills += 1;
                processes.respawn(slot, self.command(slot, kills));
            }
        });
        (stop, monkey)
    }
}

/// A soak's outcome.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    /// The soak's label.
    pub label: String,
    /// The seed of the kills' randomness.
    pub seed: u64,
    /// Runs started.
    pub runs: usize,
    /// Worker processes at once.
    pub workers: usize,
    /// Workers `kill -9`ed (and started again).
    pub kills: usize,
    /// What the disruption did, if one ran.
    pub disruption: Option<String>,
    /// From the first start until every run ended (or the budget ran out).
    pub load: Duration,
    /// Runs completed.
    pub completed: usize,
    /// Runs failed because a task exhausted its attempts (under kills; not a soak failure).
    pub failed_exhausted: usize,
    /// Runs failed otherwise, with their errors: each one a soak failure.
    pub failed_other: Vec<String>,
    /// Runs not ended by the end of the budget.
    pub lost: usize,
    /// Handler starts logged.
    pub starts: usize,
    /// Starts beyond the first of their entry: attempts run again after a kill.
    pub retried: usize,
    /// Starts later than their entry's recorded completion: recorded results executed again.
    pub executed_again: usize,
    /// Entries started more often than the retry budget allows.
    pub beyond_budget: usize,
    /// Completed task entries with no logged start (the side table missed one).
    pub unlogged: usize,
}

impl Counts {
    async fn tally(
        &mut self,
        store: &BoxStore,
        ids: &[RunId],
        starts: &[crate::soak::Start],
        mut completions: Completions,
    ) {
        let budget = max_attempts();
        for id in ids {
            let history = history(store, *id).await;
            match history.run.status {
                RunStatus::Completed => self.completed += 1,
                RunStatus::Failed if exhausted(&history, budget) => self.failed_exhausted += 1,
                status if status.is_terminal() => self.failed_other.push(format!(
                    "run {id} ended `{status}`: {:?}",
                    history.run.error
                )),
                _ => self.lost += 1,
            }
            completions.note(&history);
        }
        let completions = completions.0;
        let mut per_entry: HashMap<EntryKey, usize> = HashMap::new();
        for start in starts {
            let key = (start.run_id.clone(), start.address.clone(), start.index);
            if completions
                .get(&key)
                .is_some_and(|done| start.started_at > *done)
            {
                self.executed_again += 1;
            }
            *per_entry.entry(key).or_default() += 1;
        }
        self.starts = starts.len();
        self.retried = per_entry.values().map(|n| n - 1).sum();
        self.beyond_budget = per_entry.values().filter(|n| **n > budget as usize).count();
        self.unlogged = completions
            .keys()
            .filter(|key| !per_entry.contains_key(*key))
            .count();
    }

    /// The counts as a table.
    pub fn table(&self) -> String {
        let rows: [(&str, String); 14] = [
            ("runs started (x 5 tasks)", self.runs.to_string()),
            ("worker processes", self.workers.to_string()),
            ("workers kill -9ed and restarted", self.kills.to_string()),
            (
                "disruption mid-load",
                self.disruption.clone().unwrap_or_else(|| "none".to_owned()),
            ),
            ("load time", format!("{:.1} s", self.load.as_secs_f64())),
            ("runs completed", self.completed.to_string()),
            (
                "runs failed: retries exhausted under kills",
                self.failed_exhausted.to_string(),
            ),
            ("runs failed otherwise", self.failed_other.len().to_string()),
            ("runs lost (not ended in time)", self.lost.to_string()),
            ("handler starts logged", self.starts.to_string()),
            ("attempts run again after a kill", self.retried.to_string()),
            (
                "recorded results executed again",
                self.executed_again.to_string(),
            ),
            (
                "entries started beyond the budget",
                self.beyond_budget.to_string(),
            ),
            (
                "completed entries without a logged start",
                self.unlogged.to_string(),
            ),
        ];
        let mut table = format!("chaos soak, {} (seed {})\n", self.label, self.seed);
        for (what, count) in rows {
            table.push_str(&format!("  {what:<44} {count:>8}\n"));
        }
        table
    }

    /// Asserts the soak's promises: every run ended completed (or failed only by exhausting
    /// its retries), none lost, no recorded result executed again, no entry started beyond
    /// its budget, every completed entry's start logged; and the chaos happened (workers were
    /// killed mid-task, the disruption ran when one was asked for).
    pub fn assert_clean(&self, disruption_expected: bool) {
        let table = self.table();
        assert_eq!(self.lost, 0, "runs were lost\n{table}");
        assert!(
            self.failed_other.is_empty(),
            "runs failed other than by exhausted retries: {:#?}\n{table}",
            self.failed_other
        );
        assert_eq!(
            self.completed + self.failed_exhausted,
            self.runs,
            "every run ended\n{table}"
        );
        assert_eq!(
            self.executed_again, 0,
            "recorded results executed again\n{table}"
        );
        assert_eq!(self.beyond_budget, 0, "attempts beyond the budget\n{table}");
        assert_eq!(self.unlogged, 0, "the side table missed starts\n{table}");
        assert!(
            self.starts >= self.completed * 5,
            "too few starts logged\n{table}"
        );
        assert!(
            self.kills > 0 && self.retried > 0,
            "no kill interrupted a task: the soak tested nothing\n{table}"
        );
        assert_eq!(
            self.disruption.is_some(),
            disruption_expected,
            "the disruption ran as asked\n{table}"
        );
    }
}

/// `true` when a task of the run failed after its last attempt.
fn exhausted(history: &History, budget: u32) -> bool {
    history
        .entries
        .iter()
        .any(|entry| entry.status == EntryStatus::Failed && entry.attempts >= budget)
}
