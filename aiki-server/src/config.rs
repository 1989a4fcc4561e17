//! How a server is set up: its clock, its request limits.

use std::sync::Arc;
use std::time::Duration;

use aiki::{Clock, SystemClock};
use aiki_store::Millis;

/// What a server is set up with; [`ServerConfig::default`] is the standalone server's.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub(crate) time: Time,
    pub(crate) body_limit: usize,
    pub(crate) request_timeout: Duration,
    pub(crate) auth: bool,
    pub(crate) rate_limit: Option<(std::num::NonZeroU32, std::num::NonZeroU32)>,
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
}

/// How long a server shutting down lets its requests in flight finish, by default.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How many connections [`serve`](crate::serve) keeps open at most, by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4_096;

/// How long [`serve`](crate::serve) waits for a request's head, by default.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's clock, which stamps every request: every `now` a request carries is replaced
/// by it, so a remote machine's skewed clock never dates a run, an event or a claim.
#[derive(Clone, Debug)]
pub(crate) struct Time(Arc<dyn Clock>);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            time: Time(Arc::new(SystemClock)),
            body_limit: 4 << 20,
            request_timeout: Duration::from_secs(30),
            auth: true,
            rate_limit: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
        }
    }
}

impl ServerConfig {
    /// Stamps requests by `clock` instead of the system clock (a
    /// [`ManualClock`](aiki::ManualClock) shared with the test's workers).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.time = Time(Arc::new(clock));
        self
    }

    /// Serves every route without an API key: anyone who reaches the server may do anything.
    /// Only for a server no one else can reach (a test's, one inside a private network you
    /// trust); `aiki server` asks for `--insecure-no-auth` to do this.
    pub fn insecure_no_auth(mut self) -> Self {
        self.auth = false;
        self
    }

    /// Allows each API key `per_second` requests a second on average, in bursts of up to
    /// `burst`; a request over it is answered 429 `rate_limited` (which `HttpStore` retries
    /// after a pause, as an outage). Default: no limit. Keys share nothing: one key's burst
    /// never slows another's. Needs keys (no limit applies without them).
    pub fn rate_limit(
        mut self,
        per_second: std::num::NonZeroU32,
        burst: std::num::NonZeroU32,
    ) -> Self {
        self.rate_limit = Some((per_second, burst));
        self
    }

    /// Refuses request bodies over `bytes` with 413 and a `too_large` error (default 4 MiB).
    /// Keep it above what one request holding a payload at the store's limit needs
    /// ([`aiki_store::limit::DEFAULT_PAYLOAD_LIMIT`], 2 MiB, plus the request's own fields), so
    /// that such a payload reaches the store, which keeps it; a larger payload is refused by
    /// the store with the same error. Raising the store's limit means raising this one too.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// How long [`serve`](crate::serve), once its shutdown signal came, lets the requests in
    /// flight finish before it drops their connections (default [`DEFAULT_SHUTDOWN_GRACE`],
    /// 10 s). Waiting long polls are answered at once, and requests that still arrive are
    /// refused with 503 and `Retry-After`, whatever the grace.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Keeps at most `connections` connections open (default [`DEFAULT_MAX_CONNECTIONS`]; fewer
    /// when the process may not open that many descriptors). At the cap a new connection closes
    /// the one idle the longest, or is closed itself when none is idle. Applies to
    /// [`serve`](crate::serve), not to a [`router`](crate::router) mounted elsewhere.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Closes a connection whose next request's head has not arrived within `timeout` (default
    /// [`DEFAULT_HEADER_READ_TIMEOUT`]): a socket that sends nothing, or sends slowly, and an
    /// idle keep-alive connection. Applies to [`serve`](crate::serve).
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Answers 408 to a request not done within `timeout` (default 30 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
}

impl Time {
    /// The time of a request: the server's, whatever the caller sent.
    pub(crate) fn now(&self) -> Millis {
        self.0.now()
    }
}
