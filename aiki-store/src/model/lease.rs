//! Leases: a store-wide duty held by one process at a time.

use serde::{Deserialize, Serialize};

use crate::Millis;

/// The name of the daemons' lease: the process holding it is the one that sweeps.
pub const DAEMONS_LEASE: &str = "daemons";

/// A lease on a store-wide duty (the daemons' sweeps): who holds it, until when (by the store's
/// claim clock) and its fencing token. The token grows each time the duty changes hands, and
/// every operation done under the lease checks it in its own transaction: a holder that stalled
/// past its expiry (a frozen process) does nothing with its operations once another holder took
/// over (see [`Sweeper`](crate::Sweeper)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The duty, e.g. [`DAEMONS_LEASE`].
    pub name: String,
    /// Who holds it (a worker id).
    pub holder: String,
    /// The fencing token.
    pub token: i64,
    /// When it expires unless renewed (ms since the epoch, by the store's claim clock).
    pub expires_at: Millis,
}
