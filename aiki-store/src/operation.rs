//! Operations done once however often they are sent: a write made inside [`scope`] records
//! its answer under the scope's [`OperationId`] in the same transaction as the change (on
//! PostgreSQL, a transition that needs no transaction records it in its own statement), and a
//! repeat of it (the same id, the same kind of write) gets that first answer back instead of
//! doing the write again, before any revision or status check.
//!
//! This is how an answer lost on the way costs nothing: an aiki server runs each write request
//! inside a scope named by the request's idempotency key (see [`crate::api::IDEMPOTENCY_KEY`]),
//! so a client that sends the request again, to the same server or to another one in front of
//! the same store, even after the first server was restarted, gets the first answer: the same
//! claimed runs, the same new run, the same transition, never a spurious revision conflict, a
//! second run or a second event.
//!
//! A claim records its answer only when it claims something (a long poll's empty attempts
//! stay one statement each): on PostgreSQL in the claim's own statement, elsewhere in a
//! transaction with it. So a server killed mid-claim never leaves runs claimed whose answer a
//! repeat would not find.
//!
//! A caller that retries a write names it once for all its retries with [`resend_scope`]:
//! a transport ([`HttpStore`](crate::http::HttpStore)) sends that name as the request's
//! idempotency key each time, so that the server answers every retry with the first answer,
//! whichever retry layer (the transport's own, the runtime's, the client's) sends it again. A
//! store that records answers records none for it: it names a request to a server, which
//! records the answers.
//!
//! Outside a scope, writes are done as ever and record nothing. Answers are kept for
//! [`KEPT_FOR_MS`] and then forgotten by the leader's sweep
//! ([`Sweeper::forget_operations`](crate::Sweeper::forget_operations)).
//!
//! ```
//! use aiki_store::operation::{self, OperationId};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let id = OperationId::new("b1f2c3d4-request-7").unwrap();
//! let seen = operation::scope(id.clone(), async { operation::current() }).await;
//! assert_eq!(seen, Some(id));
//! assert_eq!(operation::current(), None);
//! # });
//! ```

use std::fmt;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use crate::StoreError;

/// How long a first answer is kept for its repeats: ten minutes, far beyond a client's
/// resends (seconds) and a server's restart, and short enough that the answers of a busy store
/// stay a small table.
pub const KEPT_FOR_MS: i64 = 10 * 60 * 1000;

/// The longest operation id.
pub const MAX_LEN: usize = 128;

/// The id of one operation, the same for every repeat of it: at most [`MAX_LEN`] ASCII
/// letters, digits and `-_.:`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OperationId(String);

impl OperationId {
    /// An operation id, checked.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] for an empty or too long id, or one with other characters.
    pub fn new(id: impl Into<String>) -> Result<Self, StoreError> {
        let id = id.into();
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-_.:".contains(c);
        if id.is_empty() || id.len() > MAX_LEN || !id.chars().all(allowed) {
            return Err(StoreError::Invalid {
                message: format!(
                    "operation id {id:?} is not 1 to {MAX_LEN} ASCII letters, digits and `-_.:`"
                ),
            });
        }
        Ok(Self(id))
    }

    /// A new id, unlike any other (a random UUID): the name of one logical write, for all
    /// its sends.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name of one logical write for all its sends ([`resend_scope`]): an [`OperationId`]
/// made when a transport first asks for it, and the same for every send after. A store in this
/// process never asks, so a write to it costs no random id (whose system call, made for each
/// of a thousand concurrent task writes, slowed a fan-out by half).
#[derive(Clone, Debug, Default)]
pub struct WriteName(Arc<OnceLock<OperationId>>);

impl WriteName {
    /// A write not named yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The write's id: made at the first call ([`OperationId::random`]), the same after.
    pub fn id(&self) -> OperationId {
        self.0.get_or_init(OperationId::random).clone()
    }
}

/// How the operation in scope is named: by its id, or (a [`resend_scope`]) by a name made on
/// demand.
#[derive(Clone, Debug)]
enum Named {
    Id(OperationId),
    OnDemand(WriteName),
}

impl Named {
    fn id(&self) -> OperationId {
        match self {
            Named::Id(id) => id.clone(),
            Named::OnDemand(name) => name.id(),
        }
    }
}

/// The operation in scope: its name, whether it is known to be sent for the first time, and
/// whether the store records its answer (a [`resend_scope`] only names a request).
#[derive(Clone, Debug)]
struct Scope {
    id: Named,
    fresh: bool,
    recorded: bool,
    /// The digest of the request that names the operation, if known: recorded with the
    /// answer, and compared with a repeat's.
    asked: Option<String>,
}

tokio::task_local! {
    static CURRENT: Scope;
}

/// Runs `work` as operation `id`: each write it makes to a store is done once per id (see the
/// module's documentation). One scope is meant for one write.
pub async fn scope<F: Future>(id: OperationId, work: F) -> F::Output {
    request_scope(id, false, None, work).await
}

/// [`scope`], for an operation the caller knows to be new (an id it has just made, sent for
/// the first time): the store records its answer without first looking for one. Should it be
/// a repeat after all, a write it does is rolled back for the first answer; a write its own
/// checks refuse is refused.
pub async fn fresh_scope<F: Future>(id: OperationId, work: F) -> F::Output {
    request_scope(id, true, None, work).await
}

/// Runs `work` as operation `id` as [`scope`] does ([`fresh_scope`] when `fresh`), for a
/// request whose digest is `asked` (an aiki server's: a hash of the request's body): the store
/// records it with the answer, and a later request under the same id with another digest is
/// not a repeat: refused with [`StoreError::KeyReused`], nothing done. `None`: not checked.
pub async fn request_scope<F: Future>(
    id: OperationId,
    fresh: bool,
    asked: Option<String>,
    work: F,
) -> F::Output {
    let scope = Scope {
        id: Named::Id(id),
        fresh,
        recorded: true,
        asked,
    };
    CURRENT.scope(scope, work).await
}

/// Runs `work`, one send of a write that its caller sends again on a transient error, as the
/// write `name`: a transport sends its id ([`WriteName::id`]) as the idempotency key of the
/// request `work` makes, so that a server answers each send with the first answer; `resent` is
/// `false` for the first send (the server need not look for an answer), `true` for every later
/// one. Stores record nothing for it ([`current`] does not see it). Name each logical write
/// once ([`WriteName::new`]), and give every send of it the same name.
pub async fn resend_scope<F: Future>(name: WriteName, resent: bool, work: F) -> F::Output {
    let scope = Scope {
        id: Named::OnDemand(name),
        fresh: !resent,
        recorded: false,
        asked: None,
    };
    CURRENT.scope(scope, work).await
}

/// The operation in scope on this task whose answer a store records, if any.
pub fn current() -> Option<OperationId> {
    CURRENT
        .try_with(|scope| scope.recorded.then(|| scope.id.id()))
        .ok()
        .flatten()
}

/// The idempotency key of a request made in this task, if a scope names it (a [`scope`] or a
/// [`resend_scope`]), and whether it is known to be sent for the first time.
pub fn request_key() -> Option<(OperationId, bool)> {
    CURRENT.try_with(|scope| (scope.id.id(), scope.fresh)).ok()
}

/// The digest of the request of the operation in scope, if known (see [`request_scope`]).
pub(crate) fn asked() -> Option<String> {
    CURRENT.try_with(|scope| scope.asked.clone()).ok().flatten()
}

/// Whether a recorded answer whose request had digest `recorded` answers the operation in
/// scope: `Err` when both digests are known and differ (the id was reused for another
/// request).
pub(crate) fn same_request(id: &OperationId, recorded: Option<&str>) -> Result<(), StoreError> {
    match (asked(), recorded) {
        (Some(asked), Some(recorded)) if asked != recorded => Err(StoreError::KeyReused {
            message: format!(
                "operation {id} was answered for another request: a repeat sends the same \
                 request, and a new operation an id (idempotency key) of its own"
            ),
        }),
        _ => Ok(()),
    }
}

/// Whether the operation in scope is known to be new (see [`fresh_scope`]).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn is_fresh() -> bool {
    CURRENT
        .try_with(|scope| scope.recorded && scope.fresh)
        .unwrap_or(false)
}

/// This machine's clock in unix ms: when an answer is recorded.
pub(crate) fn wall_clock_ms() -> crate::Millis {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// A recorded first answer's key: the operation and the kind of write, so that an id reused
/// for another kind of write is not mistaken for a repeat.
pub(crate) fn key(id: &OperationId, kind: &str) -> String {
    format!("{kind}/{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(OperationId::new("9f1c-ab_12.x:y").is_ok());
        for bad in ["", "has space", "ünïcode", &"x".repeat(MAX_LEN + 1)] {
            let error = OperationId::new(bad).unwrap_err();
            assert!(matches!(error, StoreError::Invalid { .. }), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn the_scope_ends_with_its_work() {
        let id = OperationId::new("one").unwrap();
        let inner = scope(id.clone(), async {
            tokio::task::yield_now().await;
            current()
        })
        .await;
        assert_eq!(inner, Some(id));
        assert_eq!(current(), None);
    }

    #[tokio::test]
    async fn a_resend_scope_names_requests_and_records_nothing() {
        let name = WriteName::new();
        let first = resend_scope(name.clone(), false, async { (current(), request_key()) }).await;
        let (recorded, Some((id, true))) = first else {
            panic!("the first send is named, as fresh: {first:?}");
        };
        assert_eq!(recorded, None);
        let again = resend_scope(name.clone(), true, async { request_key() }).await;
        assert_eq!(again, Some((id.clone(), false)), "every send, one name");
        assert_eq!(name.id(), id);
        assert_ne!(WriteName::new().id(), id, "another write, another name");
        assert_eq!(request_key(), None);
    }
}
