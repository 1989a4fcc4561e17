//! What differs between the SQL databases, and the neutral values that cross the line.
//!
//! The shared code in [`super`] speaks only these types: statements as text, parameters as
//! [`Param`]s, result rows as [`Row`]s of [`Cell`]s. A [`Dialect`] binds and runs them on its
//! driver, renders the shared statement text into its syntax, classifies its error codes, and
//! writes the statements that truly differ, including the locking a transition needs.

use std::fmt;
use std::future::Future;

use crate::{RunId, StoreError};

/// A statement parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Param<'a> {
    /// Text, or `NULL`.
    Text(Option<&'a str>),
    /// Owned text, or `NULL`.
    Owned(Option<String>),
    /// A 64-bit integer, or `NULL`.
    Int(Option<i64>),
    /// A boolean.
    Bool(bool),
    /// A list of text: a PostgreSQL `text[]`, a JSON array for SQLite (read with `json_each`).
    List(Vec<String>),
    /// A list of integers: a PostgreSQL `bigint[]`, a JSON array for SQLite.
    IntList(Vec<i64>),
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(text: &'a str) -> Self {
        Param::Text(Some(text))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(text: &'a String) -> Self {
        Param::Text(Some(text))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(text: Option<&'a str>) -> Self {
        Param::Text(text)
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(text: &'a Option<String>) -> Self {
        Param::Text(text.as_deref())
    }
}

impl From<String> for Param<'_> {
    fn from(text: String) -> Self {
        Param::Owned(Some(text))
    }
}

impl From<Option<String>> for Param<'_> {
    fn from(text: Option<String>) -> Self {
        Param::Owned(text)
    }
}

impl From<i64> for Param<'_> {
    fn from(value: i64) -> Self {
        Param::Int(Some(value))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(value: Option<i64>) -> Self {
        Param::Int(value)
    }
}

impl From<bool> for Param<'_> {
    fn from(value: bool) -> Self {
        Param::Bool(value)
    }
}

impl From<RunId> for Param<'_> {
    fn from(id: RunId) -> Self {
        Param::Owned(Some(id.to_string()))
    }
}

#[cfg(feature = "sqlite")]
impl Param<'_> {
    /// A list parameter as a JSON array (SQLite's form).
    pub(crate) fn list_json(&self) -> Option<String> {
        let json = match self {
            Param::List(items) => serde_json::to_string(items),
            Param::IntList(items) => serde_json::to_string(items),
            _ => return None,
        };
        Some(json.expect("BUG: lists serialize"))
    }
}

/// The parameters of a statement, in `$1, $2, …` order.
macro_rules! params {
    ($($value:expr),* $(,)?) => {
        [$($crate::sql::dialect::Param::from($value)),*]
    };
}
pub(crate) use params;

/// One value of a result row.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    /// `NULL`.
    Null,
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
}

/// A result row.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Row(pub(crate) Vec<Cell>);

impl Row {
    fn cell(&self, index: usize) -> Result<&Cell, StoreError> {
        self.0.get(index).ok_or_else(|| StoreError::Corrupt {
            message: format!("BUG: a statement returned no column {index}"),
        })
    }

    /// Column `index` as text (`None` for `NULL`).
    pub(crate) fn text(&self, index: usize) -> Result<Option<String>, StoreError> {
        match self.cell(index)? {
            Cell::Null => Ok(None),
            Cell::Text(text) => Ok(Some(text.clone())),
            Cell::Int(value) => Err(StoreError::Corrupt {
                message: format!("column {index} holds the integer {value} where text belongs"),
            }),
        }
    }

    /// Column `index` as an integer (`None` for `NULL`).
    pub(crate) fn int(&self, index: usize) -> Result<Option<i64>, StoreError> {
        match self.cell(index)? {
            Cell::Null => Ok(None),
            Cell::Int(value) => Ok(Some(*value)),
            Cell::Text(text) => Err(StoreError::Corrupt {
                message: format!("column {index} holds the text `{text}` where a number belongs"),
            }),
        }
    }

    /// Moves column `index` out as text.
    pub(crate) fn take_text(&mut self, index: usize) -> Result<Option<String>, StoreError> {
        match self
            .0
            .get_mut(index)
            .map(|cell| std::mem::replace(cell, Cell::Null))
        {
            Some(Cell::Text(text)) => Ok(Some(text)),
            Some(Cell::Null) => Ok(None),
            Some(Cell::Int(value)) => Err(StoreError::Corrupt {
                message: format!("column {index} holds the integer {value} where text belongs"),
            }),
            None => Err(StoreError::Corrupt {
                message: format!("BUG: a statement returned no column {index}"),
            }),
        }
    }
}

/// Where a statement runs.
#[derive(Debug)]
pub(crate) enum On<'a, Tx> {
    /// A read that needs no transaction (SQLite: its read pool, so reads never wait behind
    /// writes).
    Read,
    /// A write outside a transaction (SQLite: its one writer connection).
    Write,
    /// Inside an open transaction.
    Tx(&'a mut Tx),
}

/// An open transaction of a dialect's database.
pub(crate) type Tx<D> = sqlx::Transaction<'static, <D as Dialect>::Db>;

/// One SQL database: its driver, its syntax, its error codes and the operations whose control
/// flow differs from the other's.
pub(crate) trait Dialect: Clone + Send + Sync + fmt::Debug + Sized + 'static {
    /// The sqlx database.
    type Db: sqlx::Database;

    /// How the shared driver glue renders, classifies errors, binds and reads here.
    const DRIVER: super::driver::Driver<Self::Db>;

    /// Statements that differ in more than placeholders and casts, in this database's syntax,
    /// for a schema at `level`.
    fn statements(&self, level: super::statements::Level) -> DialectStatements;

    /// The SQL for the time a claim is taken or refreshed at, and claims are judged stale
    /// against, given the placeholder of the caller's `now`: the caller's time unless the
    /// store reads the database's clock (see `ClaimClock`).
    fn claim_time(&self, now: &str) -> String {
        now.to_owned()
    }

    /// Opens a transaction that holds the write lock from its first statement on.
    fn begin(&self) -> impl Future<Output = Result<Tx<Self>, StoreError>> + Send;

    /// Commits a transaction.
    fn commit(tx: Tx<Self>) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Applies the pending migrations of `migrator`, safely when several processes do so at
    /// once.
    fn migrate<'a>(
        &'a self,
        migrator: &'a sqlx::migrate::Migrator,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'a;

    /// This database's embedded migrations.
    fn migrator() -> &'static sqlx::migrate::Migrator;

    /// The oldest schema version this release reads correctly (a store in
    /// [`MigrationMode::Check`](crate::MigrationMode::Check) refuses older ones).
    const OLDEST_READABLE: i64;

    /// The version of the operations migration (see
    /// [`Level::operations`](super::statements::Level::operations)).
    const OPERATIONS: i64;

    /// The version of the contract migration (see
    /// [`Level::contract`](super::statements::Level::contract)).
    const CONTRACT: i64;

    /// The version of the leases migration (see
    /// [`Level::leases`](super::statements::Level::leases)).
    const LEASES: i64;

    /// The version of the configuration migration (see
    /// [`Level::config`](super::statements::Level::config)).
    const CONFIG: i64;

    /// The version of the API keys migration (see
    /// [`Level::keys`](super::statements::Level::keys)).
    const KEYS: i64;
    /// The version of the operation answers migration (see
    /// [`Level::answers`](super::statements::Level::answers)).
    const ANSWERS: i64;
    /// The migration that keeps the digest of each answered request.
    const ANSWER_DIGESTS: i64;
    /// The migration that adds push endpoints.
    const ENDPOINTS: i64;
    /// The migration that adds schedules and their log.
    const SCHEDULES: i64;
    /// The migration that adds the index of ended runs (`aiki_runs_ended`).
    const ENDED_RUNS: i64;
    /// The migration that adds the continuation columns (continue-as-new).
    const CONTINUATION: i64;
    /// The version of the migration whose trigger notifies ready runs (`i64::MAX` where the
    /// database has no such signal).
    const READY_NOTIFY: i64 = i64::MAX;

    /// The version of the migration from which the store, not the trigger, sends the ready
    /// hints of the runs it starts (`i64::MAX` where the database has no such signal).
    const START_HINTS: i64 = i64::MAX;

    /// How many batches of starts may be in flight at once (see `sql::starts`): one where the
    /// database has one writer, more where concurrent transactions commit together.
    const START_FLIGHTS: usize = 1;

    /// The process's feed of the database's ready hints, on a schema whose trigger sends them.
    fn ready_signals(&self) -> Option<crate::ReadySignals> {
        None
    }

    /// The channel ready hints are sent on, where the database has one.
    fn ready_channel(&self) -> Option<String> {
        None
    }

    /// Closes the connections, waiting for statements in flight.
    fn close(&self) -> impl Future<Output = ()> + Send;

    /// Runs a statement; the number of rows it changed.
    fn execute<'a>(
        &'a self,
        on: On<'a, Tx<Self>>,
        sql: &'a str,
        params: &'a [Param<'a>],
    ) -> impl Future<Output = Result<u64, StoreError>> + Send + 'a;

    /// Runs a statement; the rows it returned.
    fn fetch<'a>(
        &'a self,
        on: On<'a, Tx<Self>>,
        sql: &'a str,
        params: &'a [Param<'a>],
    ) -> impl Future<Output = Result<Vec<Row>, StoreError>> + Send + 'a;
}

/// The statements a dialect writes in its own syntax (list parameters, locking).
#[derive(Clone, Debug)]
pub(crate) struct DialectStatements {
    /// Claims queued runs: `$1` owner, `$2` now, `$3` pool, `$4` namespaces (a list), `$5`
    /// limit, `$6` runs to skip (a list); returns run documents (see [`super::statements::run_doc`]).
    pub(crate) claim: String,
    /// Claims run `$3` if it is queued and of the namespaces `$4` (a list): `$1` owner, `$2`
    /// now; returns its document and the idle timeout, as `claim` does.
    pub(crate) claim_run: String,
    /// For a database whose one statement may write two tables (PostgreSQL), on a schema that
    /// keeps answers: `claim` and `claim_run` that also record what they claimed, if anything,
    /// as the answer of an operation (under [`CLAIM_DOCS`](super::claims::CLAIM_DOCS): a JSON
    /// array of `[document, idle timeout]`), the answer's key and time the two parameters
    /// after theirs. When the operation has an answer already the statement fails on the
    /// answers' key and claims nothing. Elsewhere a claim in an operation's scope is a
    /// transaction that records its answer before it commits.
    pub(crate) claims_answered: Option<(String, String)>,
    /// The guarded update of a transition (parameters: `binds::transition`), returning the
    /// run document.
    pub(crate) transition: String,
    /// For a database whose one statement may write two tables (PostgreSQL), on a schema that
    /// keeps answers: `transition` that also records the run document it returns as the answer
    /// of an operation, `$23` the answer's key and `$24` the time. When the operation has an
    /// answer already the statement fails on the answers' key and writes nothing.
    pub(crate) transition_answered: Option<String>,
    /// For a database that must lock before a transition whose outcome depends on other rows
    /// (an awaited event or child, pending sleeps): locks the awaited children `$1` (a list)
    /// and then the run `$1`, so the update's snapshot follows every racing write to them.
    pub(crate) lock_first: Option<(String, String)>,
    /// For a database whose transition statement cannot cancel the pending sleeps itself: the
    /// statement that does, for run `$1` at `$2`, in the transition's transaction.
    pub(crate) cancel_sleeps: Option<String>,
    /// Upserts a batch of entries (`$1`: a JSON array of `batch::Row`), each only if its run's
    /// revision is the one it expects; returns `(run_id, address, idx)` of the written ones.
    pub(crate) upsert_entries: String,
    /// `(id, revision)` of the runs in `$1` (a list of ids).
    pub(crate) revisions_of: String,
    /// Inserts an event (see `statements::insert_event`), and, where the database can do both
    /// in one statement, wakes the run too (`statements::wake_for_event`); returns the event's
    /// index.
    pub(crate) insert_event: String,
    /// Whether `insert_event` wakes the run itself; otherwise `wake_for_event` follows it.
    pub(crate) insert_event_wakes: bool,
    /// How the change stream is read (`None` on a schema before the outbox).
    pub(crate) outbox: Option<super::outbox::OutboxStatements>,
    /// 1 when the table named `$1` (the migration bookkeeping, the compatibility record)
    /// exists where the store looks for its tables, 0 otherwise.
    pub(crate) table_exists: String,
}

/// Drops every `::type` cast (`::uuid`, `::text[]`) from a statement: SQLite's rendering.
#[cfg(any(feature = "sqlite", test))]
pub(crate) fn strip_casts(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("::") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let mut skipped = &after[name_len..];
        if let Some(array) = skipped.strip_prefix("[]") {
            skipped = array;
        }
        rest = skipped;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_are_stripped_whole() {
        assert_eq!(
            strip_casts("SELECT r.id::text FROM t WHERE id = $1::uuid AND x = ANY($2::text[])"),
            "SELECT r.id FROM t WHERE id = $1 AND x = ANY($2)"
        );
        assert_eq!(strip_casts("no casts here"), "no casts here");
        assert_eq!(strip_casts("json_agg(x)::text"), "json_agg(x)");
    }

    #[test]
    fn rows_type_their_cells() {
        let mut row = Row(vec![Cell::Text("a".into()), Cell::Int(7), Cell::Null]);
        assert_eq!(row.text(0).unwrap().as_deref(), Some("a"));
        assert_eq!(row.int(1).unwrap(), Some(7));
        assert_eq!(row.int(2).unwrap(), None);
        assert!(matches!(row.text(1), Err(StoreError::Corrupt { .. })));
        assert!(matches!(row.int(3), Err(StoreError::Corrupt { .. })));
        assert_eq!(row.take_text(0).unwrap().as_deref(), Some("a"));
    }
}
