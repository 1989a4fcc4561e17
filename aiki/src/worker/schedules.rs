//! Schedules declared in a worker's code ([`WorkerBuilder::schedule`]), reconciled with the
//! store at the worker's start, forward only (see [`aiki_store::schedule::Declared`]).

use std::sync::Arc;
use std::time::Duration;

use aiki_store::schedule::Declared;
use aiki_store::{OverlapPolicy, ScheduleDefinition, ScheduleOrigin, ScheduleRecord, ScheduleSpec};
use serde_json::Value;

use super::Shared;
use crate::clock::millis;
use crate::schema::Schema;
use crate::{ClientError, Workflow, input_hash};

/// A schedule declared in code: a name (its identity in the store), when, what it starts, and
/// a generation to bump whenever the definition changes. Given to
/// [`WorkerBuilder::schedule`](super::WorkerBuilder::schedule).
///
/// ```no_run
/// # use aiki::store::ScheduleSpec;
/// # #[aiki::workflow(name = "nightly-export", version = "2")]
/// # async fn nightly_export(_run: &aiki::Run, _target: String) -> Result<(), aiki::WorkflowError> { Ok(()) }
/// # async fn demo(store: aiki::BoxStore) -> Result<(), aiki::ClientError> {
/// let worker = aiki::Worker::builder(store)
///     .register(NightlyExport)
///     .schedule(
///         aiki::Scheduled::new::<NightlyExport>(
///             "nightly-export",
///             ScheduleSpec::cron_in("0 2 * * *", "Europe/Berlin"),
///             "s3://exports".to_owned(),
///         )
///         .generation(2),
///     )
///     .build()?;
/// # drop(worker); Ok(()) }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a schedule is declared when given to WorkerBuilder::schedule"]
pub struct Scheduled {
    name: String,
    generation: i64,
    /// The definition, or why the input was refused (what, message).
    definition: Result<ScheduleDefinition, (String, String)>,
}

impl Scheduled {
    /// A schedule named `name` starting runs of `W` with `input` at the occurrences of
    /// `spec`, at generation 1 and overlap policy `skip`.
    pub fn new<W: Workflow>(name: impl Into<String>, spec: ScheduleSpec, input: W::Input) -> Self {
        let namespace = W::namespace();
        let definition = (|| {
            let invalid = |message: String| (format!("input of {namespace}"), message);
            let json: Value = serde_json::to_value(&input).map_err(|e| invalid(e.to_string()))?;
            Schema::of::<W::Input>().validate(&json).map_err(invalid)?;
            let hash = input_hash(&input).map_err(|e| invalid(e.to_string()))?;
            Ok(ScheduleDefinition {
                spec,
                namespace: namespace.clone(),
                input: json,
                input_hash: hash,
                pool: "default".to_owned(),
                overlap: OverlapPolicy::default(),
                catchup_window_ms: None,
                jitter_ms: 0,
            })
        })();
        Scheduled {
            name: name.into(),
            generation: 1,
            definition,
        }
    }

    /// The generation of this definition (1 by default): bump it whenever the definition
    /// changes, so that the store takes it (an older binary's lower generation never
    /// overwrites it).
    pub fn generation(mut self, generation: i64) -> Self {
        self.generation = generation;
        self
    }

    /// What an occurrence does while the previous run has not ended (`skip` by default).
    pub fn overlap(self, policy: OverlapPolicy) -> Self {
        self.with(|definition| definition.overlap = policy)
    }

    /// How late an occurrence may still start (by default one interval).
    pub fn catchup_window(self, window: Duration) -> Self {
        self.with(|definition| definition.catchup_window_ms = Some(millis(window)))
    }

    /// Moves each occurrence's start later by an offset fixed for this schedule, at most
    /// `jitter`.
    pub fn jitter(self, jitter: Duration) -> Self {
        self.with(|definition| definition.jitter_ms = millis(jitter))
    }

    /// The worker pool of its runs.
    pub fn pool(self, pool: impl Into<String>) -> Self {
        let pool = pool.into();
        self.with(|definition| definition.pool = pool)
    }

    fn with(mut self, change: impl FnOnce(&mut ScheduleDefinition)) -> Self {
        if let Ok(definition) = &mut self.definition {
            change(definition);
        }
        self
    }

    /// The declaration as a record made at `now` (checked: a bad expression, time zone,
    /// interval or generation is refused).
    pub(super) fn record(&self, now: aiki_store::Millis) -> Result<ScheduleRecord, ClientError> {
        let definition = self
            .definition
            .clone()
            .map_err(|(what, message)| ClientError::InvalidInput { what, message })?;
        if self.generation < 1 {
            return Err(ClientError::Config(format!(
                "schedule `{}` has generation {}: generations start at 1 and only move up",
                self.name, self.generation
            )));
        }
        Ok(ScheduleRecord::new(
            self.name.clone(),
            definition,
            ScheduleOrigin::Code,
            self.generation,
            now,
        )?)
    }
}

/// Reconciles the declarations with the store, once, retrying while the store is unreachable
/// (real time, at most every 5 s) until `stop`.
pub(super) async fn reconcile(
    shared: Arc<Shared>,
    declared: Vec<Scheduled>,
    mut stop: tokio::sync::watch::Receiver<super::Stop>,
) {
    shared.startup.settled().await;
    let exec = shared.exec();
    let serves: Vec<_> = exec.registry.namespaces().cloned().collect();
    let mut backoff = Duration::from_millis(100);
    loop {
        let now = exec.clock.now();
        let records: Result<Vec<_>, _> = declared.iter().map(|d| d.record(now)).collect();
        let records = match records {
            Ok(records) => records,
            Err(error) => {
                // Checked at build: only a clock far out of range gets here.
                tracing::error!(%error, "a schedule declared in code is not valid; none reconciled");
                return;
            }
        };
        match exec
            .store
            .declare_schedules(records, serves.clone(), &exec.id, now)
            .await
        {
            Ok(outcomes) => {
                for outcome in outcomes {
                    report(&outcome);
                }
                return;
            }
            Err(error) if error.is_transient() => {
                tracing::warn!(%error, "could not reconcile the schedules in code yet; retrying");
            }
            Err(error) if declared.is_empty() => {
                // Nothing declared: only a store without schedules (an older server) refuses.
                tracing::debug!(%error, "the store keeps no schedules");
                return;
            }
            Err(error) => {
                tracing::error!(%error, "the store refused the schedules declared in code");
                return;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

fn report(outcome: &Declared) {
    match outcome {
        Declared::Kept {
            name,
            stored,
            differs: true,
        } => tracing::warn!(
            schedule = %name,
            generation = stored,
            "the schedule's definition in code differs from the stored one at the same \
             generation; bump its generation to apply the change"
        ),
        Declared::NotOurs { name } => tracing::warn!(
            schedule = %name,
            "a schedule of this name was created by a client; the declaration in code is ignored"
        ),
        Declared::Kept { name, stored, .. } => {
            tracing::debug!(schedule = %name, generation = stored, "schedule as stored");
        }
        other => tracing::info!(?other, "schedule in code reconciled"),
    }
}
