//! The Aiki store contract over HTTP.
//!
//! [`router`] serves a store's executor, client and read roles as the JSON API whose routes
//! and bodies [`aiki_store::api`] names, so that workers and clients on other machines use the
//! store through `aiki_store::http::HttpStore` exactly as they would use it directly. Mount it
//! in an axum app of your own, or run [`serve`]. A server holds no state of its own: several
//! can front one PostgreSQL database.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let store = aiki_store::connect("sqlite://aiki.db").await?;
//! let app = aiki_server::router(store, aiki_server::ServerConfig::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9850").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Every error is answered with the contract's [`ErrorBody`](aiki_store::ErrorBody)
//! (`{code, message, details}`) and the status [`aiki_store::api::status_of`] gives it; a
//! malformed request is `invalid_request` with 400 (415 or 422 for a body of the wrong type or
//! shape), a body over the server's limit or a payload over the store's is `too_large` with
//! 413, and nothing is written.
//!
//! Health and readiness answer at the root (`GET /health`, `GET /ready`, as probes expect) as
//! well as under the prefix, to anyone. Every other route needs an API key ([`keys`]) holding
//! the scope of the route's role, unless the server is built with [`ServerConfig::insecure_no_auth`]. Requests
//! are dated by the server's clock; a repeated write (same idempotency key) gets its first
//! answer, through this server or any other in front of the same store; a claim may long-poll for work; starts and events are checked against the catalog.
//! The [`reference`](mod@reference) lists every route. The daemons are not the router's: run them beside it
//! (`aiki server` does, in a [`Worker`](aiki::Worker) that serves no version), and the push
//! dispatcher too (feature `push`: `dispatch::Dispatcher`, which delivers the runs of versions
//! configured with a push endpoint to that endpoint, signed).

use std::sync::Arc;

use aiki_store::BoxStore;
use aiki_store::api::{PREFIX, path};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use tower_http::timeout::TimeoutLayer;

mod auth;
mod config;
mod connections;
#[cfg(feature = "push")]
pub mod dispatch;
mod drain;
mod error;
pub mod keys;
mod observe;
mod owned;
mod replay;
mod routes;
mod waiters;

/// The API's reference: every route with its request, answer, scope and errors.
#[doc = include_str!("../docs/api.md")]
pub mod reference {}

pub use auth::KEY_CACHE_TTL;
pub use config::{
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_SHUTDOWN_GRACE, ServerConfig,
};
pub use error::ApiError;
pub use replay::{KEPT_BYTES as REPLAYS_KEPT_BYTES, KEPT_FOR as REPLAYS_KEPT_FOR};

/// How long the catalog entries that starts and events are checked against are kept: a
/// start costs its write, not two more reads (the catalog and the live workers) and the
/// catalog's decoding; a newly published build is checked against within this.
const CATALOG_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// What every handler reads: the store and whose clock stamps requests.
#[derive(Clone, Debug)]
pub(crate) struct AppState {
    store: BoxStore,
    /// Checks starts and events against the catalog, as `Client::start_json` does.
    checks: aiki::Client,
    time: Arc<config::Time>,
    waiters: Arc<waiters::Waiters>,
    /// The longest a claim waits for work (below the request timeout).
    max_wait: std::time::Duration,
    /// Whether the server is shutting down: waiting claims answer at once.
    draining: drain::Draining,
}

/// The API's routes on `store`, under [`PREFIX`], set up by `config`.
pub fn router(store: BoxStore, config: ServerConfig) -> Router {
    draining_router(store, config, drain::never())
}

/// [`router`], shutting down gracefully once `draining` turns `true` (see `drain.rs`).
fn draining_router(store: BoxStore, config: ServerConfig, draining: drain::Draining) -> Router {
    let keys = (
        store.clone(),
        Arc::new(auth::Keys::limited(config.rate_limit)),
    );
    let max_wait = config
        .request_timeout
        .saturating_sub(std::time::Duration::from_secs(1))
        .min(aiki_store::api::MAX_CLAIM_WAIT);
    let payload_limit = store.payload_limit();
    let state = AppState {
        waiters: waiters::Waiters::new(store.clone()),
        checks: aiki::Client::new(store.clone()).keep_catalog_for(CATALOG_KEPT_FOR),
        store,
        time: Arc::new(config.time),
        max_wait,
        draining: draining.clone(),
    };
    let api = Router::new()
        .route(path::HEALTH, get(routes::health))
        .route(path::READY, get(routes::ready))
        .route(path::WHOAMI, get(routes::whoami))
        .route(path::METRICS, get(routes::metrics))
        .route(path::RUNS, post(routes::create_run))
        .route(
            path::RUNS_LIST,
            get(routes::list_runs).post(routes::list_runs_posted),
        )
        .route(path::RUNS_COUNTS, get(routes::run_counts))
        .route(path::RUN, get(routes::get_run))
        .route(path::HISTORY, get(routes::load_history))
        .route(path::TIMELINE, get(routes::timeline))
        .route(path::ENTRIES, post(routes::put_entry))
        .route(path::ENTRY_BATCH, post(routes::put_entries))
        .route(path::ENTRY_WRITES, post(routes::put_entry_writes))
        .route(path::CHILDREN, post(routes::start_child))
        .route(path::SLEEPS, post(routes::put_sleep))
        .route(path::EVENT_SLOTS, post(routes::record_event_slot))
        .route(path::CLAIM_RUN, post(routes::claim_run))
        .route(path::REFRESH, post(routes::refresh_claim))
        .route(path::TRANSITION, post(routes::transition))
        .route(path::CONTINUATION, post(routes::continue_run))
        .route(path::EVENTS, post(routes::append_event))
        .route(path::ACTIONS, post(routes::act))
        .route(path::RELEASE, post(routes::release_claim))
        .route(path::FORKS, post(routes::fork_run))
        .route(path::TRANSITIONS, post(routes::transition_all))
        .route(path::CLAIMS, post(routes::claim))
        .route(
            path::WORKERS,
            get(routes::list_workers).post(routes::record_worker),
        )
        .route(
            path::CATALOG,
            get(routes::catalog).post(routes::publish_catalog),
        )
        .route(path::CATALOG_TASKS, post(routes::add_catalog_tasks))
        .route(
            path::CHANGES,
            get(routes::changes_since).post(routes::changes_since),
        )
        .route(path::CONFIG, get(routes::runtime_config))
        .route(path::CONFIG_KEY, put(routes::set_config))
        .route(
            path::SCHEDULES,
            get(routes::schedules).post(routes::create_schedule),
        )
        .route(path::SCHEDULE, get(routes::schedule).post(routes::schedule))
        .route(
            path::SCHEDULE_LOG,
            get(routes::schedule_log).post(routes::schedule_log),
        )
        .route(path::SCHEDULE_ACTIONS, post(routes::act_on_schedule))
        .route(path::SCHEDULES_DECLARED, post(routes::declare_schedules))
        .method_not_allowed_fallback(error::wrong_method)
        .route_layer(axum::middleware::from_fn_with_state(
            draining,
            drain::refuse_while_draining,
        ))
        .with_state(state.clone())
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::new(replay::Replays::default()),
            replay::replay,
        ));
    let api = if config.auth {
        api.route_layer(axum::middleware::from_fn_with_state(
            keys,
            auth::require_key,
        ))
    } else {
        api
    };
    // Probes expect health and readiness at the root too: open to anyone, as under the prefix.
    let probes = Router::new()
        .route(path::HEALTH, get(routes::health))
        .route(path::READY, get(routes::ready))
        .with_state(state);
    Router::new()
        .nest(
            PREFIX,
            api.route_layer(axum::middleware::from_fn(observe::matched)),
        )
        .merge(probes.route_layer(axum::middleware::from_fn(observe::matched)))
        .fallback(error::no_route)
        // Every answer says the store's payload limit: a remote executor that knows it sends a
        // task's result with the next call's `running` record (`ExecutorStore::put_entries`).
        .layer(axum::middleware::map_response(
            move |mut response: axum::response::Response| async move {
                if let Some(limit) = payload_limit {
                    response.headers_mut().insert(
                        aiki_store::api::PAYLOAD_LIMIT,
                        axum::http::HeaderValue::from(limit.bytes()),
                    );
                }
                response
            },
        ))
        .layer(DefaultBodyLimit::max(config.body_limit))
        .layer(axum::Extension(error::BodyLimit(config.body_limit)))
        .layer(TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(axum::middleware::from_fn(observe::observe))
}

/// Serves [`router`] on `listener` until `shutdown` completes, then shuts down gracefully:
/// it stops accepting connections, answers waiting long polls at once, refuses requests that
/// still arrive (503, `Retry-After`), and lets the requests in flight finish within
/// [`ServerConfig::shutdown_grace`], after which it drops the connections left and returns.
/// Connections are limited as `config` says ([`ServerConfig::max_connections`],
/// [`ServerConfig::header_read_timeout`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: BoxStore,
    config: ServerConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = connections::Limits {
        max: config.max_connections,
        header_read_timeout: config.header_read_timeout,
        grace: config.shutdown_grace,
    };
    let (drain, draining) = tokio::sync::watch::channel(false);
    let app = draining_router(store, config, draining);
    let stopping = async move {
        shutdown.await;
        drain.send_replace(true);
    };
    connections::serve(listener, app, limits, stopping).await
}
