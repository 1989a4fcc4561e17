//! The push dispatcher (feature `push`): delivers the queued runs of every workflow version
//! configured with a push endpoint (see [`EndpointStore`](aiki_store::EndpointStore)) by a
//! signed `POST` (see [`aiki_store::push`]), the receiving side being `aiki::endpoint`.
//!
//! One dispatcher at a time delivers, across every server in front of the store: the holder of
//! the store's `dispatch` lease, so one endpoint at a time gets a run. It follows the change
//! stream (the outbox) from where it stood when it took the lease, after listing what was
//! queued then, and posts each run that becomes `queued` to its version's endpoint. The
//! endpoint answers once the execution has ended; a run queued again meanwhile (handed back,
//! or released by claim recovery from a frozen endpoint) is delivered again at once, the claim
//! deciding which delivery executes it. A delivery that fails (no answer within
//! the endpoint's budget and [a margin](ANSWER_MARGIN), a refusal, a connection error) is tried
//! again with a backoff (1 s doubling to 60 s), signed afresh, while the run is still queued; a
//! run never claimed stalls after its max age like any undelivered run. A delivery is never a
//! claim: the endpoint claims the run by name, so a duplicated delivery finds it claimed (409),
//! which counts as delivered.

mod post;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aiki_store::{
    BoxStore, Change, ChangeCursor, EndpointRecord, ListRuns, MAX_PAGE, Millis, Namespace,
    RunFilter, RunId, RunStatus, StoreError,
};
use tokio::sync::mpsc;
use tokio::time::Instant;

pub use post::ANSWER_MARGIN;
use post::{Posted, post};

/// The lease whose holder dispatches.
pub const DISPATCH_LEASE: &str = "dispatch";
/// How long the lease is taken for (ms); renewed every [`RENEW`].
const LEASE_TTL_MS: Millis = 15_000;
/// How often the holder renews the lease and reads the endpoints again, and how often the
/// others (or a server with no endpoint configured) look again.
const RENEW: Duration = Duration::from_secs(5);
/// The longest backoff between two deliveries of one run.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// How often the change stream is read while idle on a store that sends no ready hints.
const IDLE_POLL: Duration = Duration::from_millis(50);

/// Delivers queued runs to their versions' push endpoints (see the [module](self) docs).
#[derive(Debug)]
pub struct Dispatcher {
    store: BoxStore,
    client: reqwest::Client,
    holder: String,
    concurrency: usize,
}

/// A started dispatcher: dropping it (or [`stop`](DispatcherHandle::stop)) stops it.
#[derive(Debug)]
pub struct DispatcherHandle {
    task: tokio::task::JoinHandle<()>,
}

impl DispatcherHandle {
    /// Stops dispatching (deliveries in flight are left to their endpoints).
    pub fn stop(self) {}
}

impl Drop for DispatcherHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Dispatcher {
    /// A dispatcher for `store`, holding the lease as `holder` (unique per process).
    pub fn new(store: BoxStore, holder: impl Into<String>) -> Self {
        Dispatcher {
            store,
            client: reqwest::Client::new(),
            holder: holder.into(),
            concurrency: 64,
        }
    }

    /// The most deliveries in flight at once (default 64).
    pub fn concurrency(mut self, deliveries: usize) -> Self {
        self.concurrency = deliveries.max(1);
        self
    }

    /// Starts dispatching on the current tokio runtime.
    pub fn start(self) -> DispatcherHandle {
        DispatcherHandle {
            task: tokio::spawn(self.run()),
        }
    }

    async fn run(self) {
        loop {
            if let Err(error) = self.term().await {
                tracing::warn!(%error, "the push dispatcher stopped; trying again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }

    /// One term: waits for endpoints and the lease, then dispatches while it holds the lease.
    async fn term(&self) -> Result<(), StoreError> {
        let endpoints = self.store.endpoints().await?;
        if endpoints.is_empty() {
            tokio::time::sleep(RENEW).await;
            return Ok(());
        }
        let lease = self
            .store
            .acquire_lease(DISPATCH_LEASE, &self.holder, LEASE_TTL_MS, unix_ms())
            .await?;
        if lease.holder != self.holder {
            tokio::time::sleep(RENEW).await;
            return Ok(());
        }
        tracing::info!(holder = %self.holder, endpoints = endpoints.len(), "dispatching pushes");
        let mut deliveries = Deliveries::default();
        // Where the stream stands before the queued runs are listed: a run queued after the
        // listing is in the stream from here.
        let mut cursor = self
            .store
            .changes_since(&ChangeCursor::start(), 0)
            .await?
            .next;
        self.take_endpoints(&mut deliveries, endpoints).await?;
        let (done, mut results) = mpsc::unbounded_channel();
        let mut hints = self
            .store
            .ready_signals()
            .map(|signals| signals.subscribe());
        let mut renew_at = Instant::now() + RENEW;
        loop {
            if Instant::now() >= renew_at {
                let lease = self
                    .store
                    .acquire_lease(DISPATCH_LEASE, &self.holder, LEASE_TTL_MS, unix_ms())
                    .await?;
                if lease.holder != self.holder {
                    tracing::info!(holder = %lease.holder, "the dispatch lease moved on");
                    return Ok(());
                }
                let endpoints = self.store.endpoints().await?;
                if endpoints.is_empty() {
                    self.store.release_lease(&lease, unix_ms()).await?;
                    return Ok(());
                }
                self.take_endpoints(&mut deliveries, endpoints).await?;
                renew_at = Instant::now() + RENEW;
            }
            loop {
                let page = self.store.changes_since(&cursor, 256).await?;
                for change in &page.changes {
                    deliveries.changed(change);
                }
                cursor = page.next;
                if page.changes.is_empty() {
                    break;
                }
            }
            for (run, endpoint, check) in deliveries.due(self.concurrency) {
                let client = self.client.clone();
                let store = self.store.clone();
                let done = done.clone();
                tokio::spawn(async move {
                    let posted = if check && !still_queued(&store, run).await {
                        Posted::Delivered(None)
                    } else {
                        post(&client, &endpoint, run).await
                    };
                    let _ = done.send((run, posted));
                });
            }
            // At the concurrency limit only a delivery's end (or the renewal) frees a slot.
            let next = match deliveries.next_due() {
                Some(due) if deliveries.in_flight < self.concurrency => due.min(renew_at),
                _ => renew_at,
            };
            let wait = next.saturating_duration_since(Instant::now());
            tokio::select! {
                Some((run, posted)) = results.recv() => deliveries.finished(run, posted),
                () = tokio::time::sleep(wait.min(IDLE_POLL)), if hints.is_none() => {}
                () = async {
                    if let Some(hints) = &mut hints {
                        let _ = tokio::time::timeout(wait, hints.recv()).await;
                    }
                }, if hints.is_some() => {}
            }
        }
    }

    /// Takes `endpoints` as the ones in force, and adds what is queued now of each version new
    /// among them.
    async fn take_endpoints(
        &self,
        deliveries: &mut Deliveries,
        endpoints: Vec<EndpointRecord>,
    ) -> Result<(), StoreError> {
        let new = deliveries.set_endpoints(endpoints);
        for namespace in new {
            let filter = RunFilter::default()
                .workflow(namespace.workflow.clone())
                .version(namespace.version.clone())
                .status(RunStatus::Queued);
            let mut request = ListRuns::new(filter, MAX_PAGE);
            loop {
                let page = self.store.list_runs(request.clone()).await?;
                for run in &page.runs {
                    deliveries.queued(run.id, &namespace);
                }
                match page.next {
                    Some(next) => request = request.after(Some(next)),
                    None => break,
                }
            }
        }
        Ok(())
    }
}

/// Whether `run` is still queued (before a delivery is tried again).
async fn still_queued(store: &BoxStore, run: RunId) -> bool {
    match store.get_run(run).await {
        Ok(record) => record.status == RunStatus::Queued,
        Err(StoreError::NotFound { .. }) => false,
        // Unknown: deliver, the endpoint's claim decides.
        Err(_) => true,
    }
}

/// One run to deliver.
#[derive(Debug)]
struct Pending {
    namespace: Namespace,
    /// Deliveries that failed in a row.
    failures: u32,
    /// A delivery is to be started (at `due`).
    waiting: bool,
    due: Instant,
    /// Deliveries of it in flight. A run queued again while one is in flight (handed back,
    /// or released by claim recovery from a frozen endpoint) is delivered again at once: the
    /// claim decides which delivery executes it.
    in_flight: u32,
}

/// The holder's runs to deliver, and the endpoints in force.
#[derive(Debug, Default)]
struct Deliveries {
    endpoints: HashMap<Namespace, Arc<EndpointRecord>>,
    runs: HashMap<RunId, Pending>,
    in_flight: usize,
}

impl Deliveries {
    /// Takes `endpoints` as the ones in force; returns the versions new among them. Runs of a
    /// version whose endpoint was removed are dropped (those in flight end as they end).
    fn set_endpoints(&mut self, endpoints: Vec<EndpointRecord>) -> Vec<Namespace> {
        let new: Vec<Namespace> = endpoints
            .iter()
            .filter(|endpoint| !self.endpoints.contains_key(&endpoint.namespace))
            .map(|endpoint| endpoint.namespace.clone())
            .collect();
        self.endpoints = endpoints
            .into_iter()
            .map(|endpoint| (endpoint.namespace.clone(), Arc::new(endpoint)))
            .collect();
        let endpoints = &self.endpoints;
        self.runs.retain(|_, pending| {
            pending.in_flight > 0 || endpoints.contains_key(&pending.namespace)
        });
        new
    }

    /// `run` of `namespace` is queued: deliver it now (unless a failed delivery's backoff
    /// runs).
    fn queued(&mut self, run: RunId, namespace: &Namespace) {
        if !self.endpoints.contains_key(namespace) {
            return;
        }
        let pending = self.runs.entry(run).or_insert_with(|| Pending {
            namespace: namespace.clone(),
            failures: 0,
            waiting: false,
            due: Instant::now(),
            in_flight: 0,
        });
        if !pending.waiting {
            pending.waiting = true;
            pending.due = Instant::now();
        }
    }

    fn changed(&mut self, change: &Change) {
        if change.to == RunStatus::Queued {
            self.queued(change.run_id, &change.namespace);
        } else if change.from == Some(RunStatus::Queued) {
            // Claimed (by a delivery or anyone), stalled, cancelled: nothing to deliver.
            if let Some(pending) = self.runs.get_mut(&change.run_id) {
                pending.waiting = false;
                pending.failures = 0;
                if pending.in_flight == 0 {
                    self.runs.remove(&change.run_id);
                }
            }
        }
    }

    /// The deliveries to start now, at most up to `concurrency` in flight: each run, its
    /// endpoint, and whether to check first that it is still queued (a retry).
    fn due(&mut self, concurrency: usize) -> Vec<(RunId, Arc<EndpointRecord>, bool)> {
        let now = Instant::now();
        let mut started = Vec::new();
        for (run, pending) in &mut self.runs {
            if self.in_flight >= concurrency {
                break;
            }
            if !pending.waiting || pending.due > now {
                continue;
            }
            let Some(endpoint) = self.endpoints.get(&pending.namespace) else {
                continue;
            };
            pending.waiting = false;
            pending.in_flight += 1;
            self.in_flight += 1;
            started.push((*run, endpoint.clone(), pending.failures > 0));
        }
        started
    }

    /// When the next delivery waiting (of a version with an endpoint) is due.
    fn next_due(&self) -> Option<Instant> {
        self.runs
            .values()
            .filter(|pending| pending.waiting && self.endpoints.contains_key(&pending.namespace))
            .map(|pending| pending.due)
            .min()
    }

    fn finished(&mut self, run: RunId, posted: Posted) {
        let Some(pending) = self.runs.get_mut(&run) else {
            return;
        };
        pending.in_flight = pending.in_flight.saturating_sub(1);
        self.in_flight = self.in_flight.saturating_sub(1);
        match posted {
            Posted::Delivered(answer) => {
                tracing::debug!(run_id = %run, ?answer, "delivered");
                pending.failures = 0;
            }
            Posted::Retry(reason) => {
                pending.failures += 1;
                let backoff = backoff(pending.failures);
                tracing::warn!(
                    run_id = %run,
                    namespace = %pending.namespace,
                    failures = pending.failures,
                    retry_in = ?backoff,
                    %reason,
                    "push delivery failed"
                );
                pending.waiting = true;
                pending.due = Instant::now() + backoff;
            }
        }
        // Nothing more to deliver, or no endpoint to deliver to any more.
        if pending.in_flight == 0
            && (!pending.waiting || !self.endpoints.contains_key(&pending.namespace))
        {
            self.runs.remove(&run);
        }
    }
}

/// The wait before the delivery after `failures` failures in a row: 1 s doubling to 60 s,
/// with up to a fifth added at random so that many runs do not retry in step.
fn backoff(failures: u32) -> Duration {
    let base = Duration::from_secs(1)
        .saturating_mul(1 << failures.saturating_sub(1).min(6))
        .min(MAX_BACKOFF);
    let jitter = base.mul_f64(fastrand::f64() / 5.0);
    base + jitter
}

/// Unix time in ms by this server's clock (the endpoint checks signatures against its own).
pub(super) fn unix_ms() -> Millis {
    aiki::Clock::now(&aiki::SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_a_minute() {
        assert!(backoff(1) >= Duration::from_secs(1) && backoff(1) < Duration::from_millis(1_201));
        assert!(backoff(3) >= Duration::from_secs(4));
        assert!(backoff(30) >= MAX_BACKOFF && backoff(30) <= MAX_BACKOFF.mul_f64(1.2));
    }
}
