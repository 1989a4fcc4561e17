//! A push endpoint (feature `endpoint`): receives the signed deliveries of an aiki server's
//! dispatcher, claims the run delivered and executes it within the platform's request timeout.
//!
//! Serverless platforms run code per HTTP request and may freeze or end it once it has
//! answered, or when its timeout is reached. An [`Endpoint`] fits that shape: for each delivery
//! it reads the raw body (up to a limit) and checks the signature before it parses it, claims the run by name (a duplicated
//! delivery finds it claimed: `409`), executes it with the same claim refresh as a worker, and
//! answers only when the execution has ended: completed, failed, suspended, or handed back to
//! delivery because its **execution budget** (the platform's timeout) is nearly spent. Below
//! the margin no task starts, the tasks in flight record their results, and the run goes back
//! to `queued`, to be delivered again; hand-backs that recorded no task result
//! [`max_idle_deliveries`](EndpointBuilder::max_idle_deliveries) times in a row fail the run
//! (`execution_budget`) instead of looping.
//!
//! | Answer | When |
//! |---|---|
//! | 200 | executed: a [`PushAnswer`](aiki_store::push::PushAnswer) says where the run was left |
//! | 400 | the body is not a delivery (or is larger than the limit) |
//! | 401 | the signature is missing, malformed, expired, not yet valid, or matches no secret |
//! | 404 | the run is unknown, or of a version this endpoint does not serve |
//! | 409 | the run is not claimable: another executor has it, or it moved on |
//! | 503 | the store did not answer: deliver again later |
//!
//! Mount [`receive`] as an axum handler, or use [`Endpoint::router`] (a tower service):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = aiki::connect("postgres://aiki@db.internal/aiki").await?;
//! let registry = aiki::Registry::builder().build()?; // .register(MyWorkflow)
//! let endpoint = aiki::endpoint::Endpoint::builder(store, registry)
//!     .secret(std::env::var("AIKI_ENDPOINT_SECRET")?)
//!     .budget(std::time::Duration::from_secs(60))
//!     .build()?;
//! let app = axum::Router::new()
//!     .route("/aiki", axum::routing::post(aiki::endpoint::receive))
//!     .with_state(endpoint);
//! let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```

mod receive;

use std::sync::Arc;
use std::time::Duration;

use aiki_store::ExecutorStore;
use aiki_store::push::Tolerance;

use crate::error::ClientError;
use crate::executor::Executor;
use crate::registry::Registry;

pub use receive::receive;

/// The largest delivery body read by default: 16 KiB (a delivery is about 120 bytes).
pub const DEFAULT_BODY_LIMIT: usize = 16 * 1024;

/// Receives signed deliveries and executes the runs delivered. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Endpoint {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    executor: Executor,
    secrets: Vec<Secret>,
    tolerance: Tolerance,
    budget: Duration,
    margin: Duration,
    max_idle: u32,
    body_limit: usize,
}

/// A secret, never shown by `Debug`.
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl AsRef<str> for Secret {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Endpoint {
    /// An endpoint executing `registry`'s versions on `store` (a database, or an aiki server
    /// through [`HttpStore`](aiki_store::http::HttpStore) with an executor key).
    pub fn builder(store: Arc<dyn ExecutorStore>, registry: Registry) -> EndpointBuilder {
        EndpointBuilder {
            store,
            registry,
            secrets: Vec::new(),
            tolerance: Tolerance::default(),
            budget: Duration::from_secs(60),
            margin: None,
            max_idle: 3,
            body_limit: DEFAULT_BODY_LIMIT,
            claim_refresh_interval: None,
            id: None,
        }
    }

    /// Its executor (whose id its claims are held under).
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    /// An axum router answering deliveries posted to `/`: a tower service.
    pub fn router(self) -> axum::Router {
        axum::Router::new()
            .route("/", axum::routing::post(receive))
            .with_state(self)
    }
}

/// Configures an [`Endpoint`].
#[derive(Debug)]
pub struct EndpointBuilder {
    store: Arc<dyn ExecutorStore>,
    registry: Registry,
    secrets: Vec<Secret>,
    tolerance: Tolerance,
    budget: Duration,
    margin: Option<Duration>,
    max_idle: u32,
    body_limit: usize,
    claim_refresh_interval: Option<Duration>,
    id: Option<String>,
}

impl EndpointBuilder {
    /// A secret deliveries may be signed with (`aiki endpoints set` and `rotate` print it).
    /// Give both the old and the new one during a rotation; at least one is needed.
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.secrets.push(Secret(secret.into()));
        self
    }

    /// How old and how far ahead of this host's clock a signature may be (default 30 s and
    /// 5 s).
    pub fn tolerance(mut self, tolerance: Tolerance) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// The execution budget: the platform's request timeout (default 60 s). Set the endpoint's
    /// budget in the store (`aiki endpoints set --budget`) to the same, so the dispatcher waits
    /// for it.
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// How long before the budget ends no new task starts (default a fifth of the budget,
    /// at least 1 s and at most 10 s): the longest a task in flight then has to record its
    /// result.
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// How many hand-backs in a row that recorded no task result fail the run (default 3).
    pub fn max_idle_deliveries(mut self, deliveries: u32) -> Self {
        self.max_idle = deliveries;
        self
    }

    /// The largest body read (default [`DEFAULT_BODY_LIMIT`]).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How often a run's claim is refreshed while it executes (default: a quarter of the
    /// budget, between 1 s and 30 s); below half the store's claim idle timeout.
    pub fn claim_refresh_interval(mut self, interval: Duration) -> Self {
        self.claim_refresh_interval = Some(interval);
        self
    }

    /// The identity its claims are held under (default a random `endpoint-…`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Checks the configuration.
    pub fn build(self) -> Result<Endpoint, ClientError> {
        let config = |message: &str| Err(ClientError::Config(message.to_owned()));
        if self.secrets.is_empty() || self.secrets.iter().any(|secret| secret.0.is_empty()) {
            return config(
                "an endpoint needs its secret (`aiki endpoints set` prints it): give it with \
                 `.secret(..)`, and no empty one",
            );
        }
        let margin = self.margin.unwrap_or_else(|| {
            (self.budget / 5).clamp(Duration::from_secs(1), Duration::from_secs(10))
        });
        if self.budget > Duration::from_secs(3600) {
            return config(&format!(
                "an execution budget of {:?} is beyond any platform's request timeout: give at \
                 most 1 h",
                self.budget
            ));
        }
        if self.budget.is_zero() || margin >= self.budget {
            return config(&format!(
                "the execution budget ({:?}) must be above its margin ({margin:?})",
                self.budget
            ));
        }
        if self.max_idle == 0 {
            return config("max_idle_deliveries must be at least 1");
        }
        let refresh = self.claim_refresh_interval.unwrap_or_else(|| {
            (self.budget / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
        });
        let id = self
            .id
            .unwrap_or_else(|| crate::executor::random_id("endpoint"));
        let executor = Executor::builder(self.store, self.registry)
            .id(id)
            .claim_refresh_interval(refresh)
            .build()?;
        Ok(Endpoint {
            inner: Arc::new(Inner {
                executor,
                secrets: self.secrets,
                tolerance: self.tolerance,
                budget: self.budget,
                margin,
                max_idle: self.max_idle,
                body_limit: self.body_limit,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refused(configure: impl FnOnce(EndpointBuilder) -> EndpointBuilder) -> String {
        let store = crate::connect("memory:").await.unwrap();
        let registry = Registry::builder().build().unwrap();
        match configure(Endpoint::builder(store, registry)).build() {
            Err(ClientError::Config(message)) => message,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_bad_configuration_is_refused_with_what_to_change() {
        assert!(refused(|b| b).await.contains("needs its secret"));
        assert!(refused(|b| b.secret("")).await.contains("no empty one"));
        let margin = refused(|b| {
            b.secret("s")
                .budget(Duration::from_secs(5))
                .margin(Duration::from_secs(5))
        })
        .await;
        assert!(margin.contains("above its margin"), "{margin}");
        let long = refused(|b| b.secret("s").budget(Duration::from_secs(7200))).await;
        assert!(long.contains("at most 1 h"), "{long}");
        let idle = refused(|b| b.secret("s").max_idle_deliveries(0)).await;
        assert!(idle.contains("at least 1"), "{idle}");
        let zero = refused(|b| b.secret("s").claim_refresh_interval(Duration::ZERO)).await;
        assert!(zero.contains("claim_refresh_interval"), "{zero}");
    }
}
