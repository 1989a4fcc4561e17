//! The driver glue both dialects share: binding [`Param`]s, running a statement where
//! [`On`] says, and reading result rows as [`Cell`]s. Generic over sqlx's database; each
//! dialect instantiates it with its own, and supplies how a list parameter is bound and which
//! type names are integers.

use sqlx::query::Query;
use sqlx::{Database, Decode, Encode, Executor, IntoArguments, Pool, Transaction, Type};
use sqlx::{Row as _, TypeInfo as _, ValueRef as _};

use crate::StoreError;

use super::dialect::{Cell, On, Param, Row};

/// A statement of `DB` with (some of) its parameters bound.
type Bound<'q, DB> = Query<'q, DB, <DB as Database>::Arguments<'q>>;

/// What the glue needs to know of one database.
pub(crate) struct Driver<DB: Database> {
    /// The backend's name (`sqlite`, `postgres`).
    pub(crate) backend: &'static str,
    /// Renders a shared statement (see [`super::statements`]) into this database's syntax.
    pub(crate) render: fn(&str) -> String,
    /// Whether a database error code means "try again later" on this database.
    pub(crate) is_transient: fn(&str) -> bool,
    /// Binds a list parameter ([`Param::List`], [`Param::IntList`]).
    pub(crate) bind_list: for<'q> fn(Bound<'q, DB>, &'q Param<'q>) -> Bound<'q, DB>,
    /// Whether a value's type name is an integer type.
    pub(crate) is_integer: fn(&str) -> bool,
}

impl<DB: Database> Driver<DB> {
    /// Begins a transaction on `pool` with `statement` (the database's own `BEGIN` when
    /// `None`), on a tokio task of its own, so that it is cancel-safe.
    ///
    /// sqlx's `begin` is not: a caller dropped while its `BEGIN` is in flight (an aborted
    /// worker, a `select!`, a timeout) can leave the session inside a transaction that nothing
    /// ends (sqlx issues 2054 and 4393: PostgreSQL's `begin`, and SQLite's custom `BEGIN`
    /// statements after their acknowledgement), and the pool hands that connection out again:
    /// every later statement on it runs inside that transaction, unseen by other connections,
    /// until the process exits. On a task of its own the `BEGIN` runs to its end whatever
    /// happens to the caller; a transaction nobody received is dropped, which rolls it back.
    pub(crate) async fn begin(
        &self,
        pool: &Pool<DB>,
        statement: Option<&'static str>,
    ) -> Result<Transaction<'static, DB>, StoreError> {
        let pool = pool.clone();
        let begun = tokio::spawn(async move {
            match statement {
                Some(statement) => pool.begin_with(statement).await,
                None => pool.begin().await,
            }
        });
        match begun.await {
            Ok(result) => result.map_err(|error| self.map_error(error)),
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Only a runtime shutting down cancels the task.
            Err(error) => Err(StoreError::Unavailable {
                message: format!("the transaction could not begin: {error}"),
                source: None,
            }),
        }
    }

    /// Maps a driver error onto a [`StoreError`] kind.
    pub(crate) fn map_error(&self, error: sqlx::Error) -> StoreError {
        super::error::map_error(error, self.is_transient)
    }

    /// Maps a migration error.
    pub(crate) fn map_migrate_error(&self, error: sqlx::migrate::MigrateError) -> StoreError {
        super::error::map_migrate_error(error, self.is_transient)
    }
}

/// SQLite: lists bound as JSON arrays (read with `json_each`), values typed by their own
/// storage class.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: Driver<sqlx::Sqlite> = Driver {
    backend: "sqlite",
    render: super::statements::render_for_sqlite,
    is_transient: super::error::sqlite_code_is_transient,
    bind_list: |query, list| query.bind(list.list_json()),
    is_integer: |name| name == "INTEGER",
};

/// PostgreSQL: lists bound as arrays, values typed by their column (every statement casts
/// what it returns to `text` or `bigint`).
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: Driver<sqlx::Postgres> = Driver {
    backend: "postgres",
    render: str::to_owned,
    is_transient: super::error::postgres_code_is_transient,
    bind_list: |query, list| match list {
        Param::IntList(items) => query.bind(items.as_slice()),
        Param::List(items) => query.bind(items.as_slice()),
        _ => unreachable!("BUG: only lists are bound as arrays"),
    },
    is_integer: |name| name == "INT8",
};

/// A statement with its parameters bound.
fn bind<'q, DB: Database>(
    driver: &Driver<DB>,
    sql: &'q str,
    params: &'q [Param<'q>],
) -> Bound<'q, DB>
where
    Option<&'q str>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    bool: Encode<'q, DB> + Type<DB>,
{
    let mut query = sqlx::query::<DB>(sql);
    for param in params {
        query = match param {
            Param::Text(text) => query.bind(*text),
            Param::Owned(text) => query.bind(text.as_deref()),
            Param::Int(value) => query.bind(*value),
            Param::Bool(value) => query.bind(*value),
            Param::List(_) | Param::IntList(_) => (driver.bind_list)(query, param),
        };
    }
    query
}

/// Runs a statement on the pool `on` names (`read` or `write`) or in its transaction; the rows
/// it changed.
pub(crate) async fn execute<'a, DB: Database>(
    driver: &Driver<DB>,
    (read, write): (&'a Pool<DB>, &'a Pool<DB>),
    on: On<'a, Transaction<'static, DB>>,
    sql: &'a str,
    params: &'a [Param<'a>],
) -> Result<u64, StoreError>
where
    for<'c> &'c mut <DB as Database>::Connection: Executor<'c, Database = DB>,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    Option<&'a str>: Encode<'a, DB> + Type<DB>,
    Option<i64>: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
    DB::QueryResult: RowsAffected,
{
    let query = bind(driver, sql, params);
    let done = match on {
        On::Read => query.execute(read).await,
        On::Write => query.execute(write).await,
        On::Tx(tx) => query.execute(&mut **tx).await,
    };
    done.map(|done| done.rows_affected())
        .map_err(|error| driver.map_error(error))
}

#[cfg(feature = "sqlite")]
/// Runs a statement on a connection the caller holds (see [`Lane`]); the rows it changed.
pub(crate) async fn execute_on<'a, DB: Database>(
    driver: &Driver<DB>,
    connection: &'a mut DB::Connection,
    sql: &'a str,
    params: &'a [Param<'a>],
) -> Result<u64, StoreError>
where
    for<'c> &'c mut <DB as Database>::Connection: Executor<'c, Database = DB>,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    Option<&'a str>: Encode<'a, DB> + Type<DB>,
    Option<i64>: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
    DB::QueryResult: RowsAffected,
{
    bind(driver, sql, params)
        .execute(connection)
        .await
        .map(|done| done.rows_affected())
        .map_err(|error| driver.map_error(error))
}

#[cfg(feature = "sqlite")]
/// Runs a statement on a connection the caller holds (see [`Lane`]); the rows it returned.
pub(crate) async fn fetch_on<'a, DB: Database>(
    driver: &Driver<DB>,
    connection: &'a mut DB::Connection,
    sql: &'a str,
    params: &'a [Param<'a>],
) -> Result<Vec<Row>, StoreError>
where
    for<'c> &'c mut <DB as Database>::Connection: Executor<'c, Database = DB>,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    Option<&'a str>: Encode<'a, DB> + Type<DB>,
    Option<i64>: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
{
    bind(driver, sql, params)
        .fetch_all(connection)
        .await
        .map_err(|error| driver.map_error(error))?
        .iter()
        .map(|row| cells(driver, row))
        .collect()
}

#[cfg(feature = "sqlite")]
/// A pool's only connection, held between statements instead of going back to the pool after
/// each one.
///
/// A statement through a `Pool` acquires the connection, runs, and on release sqlx spawns a
/// task that pings the connection (one more hand-off to the driver's thread for SQLite, one
/// more round trip for a server) before the next waiter may take it: on a one-connection
/// pool, that release is on the critical path of every write. The lane keeps the connection
/// after a statement that succeeded, so that the next statement (callers queue on a fair
/// mutex, in arrival order) runs on it at once. It gives the connection back to the pool (and
/// its release check) when a statement failed or its caller was dropped mid-statement, and
/// when a transaction is to begin ([`Lane::begin`]), so that transactions keep using the
/// pool as before.
pub(crate) struct Lane<DB: Database> {
    pool: Pool<DB>,
    slot: std::sync::Arc<tokio::sync::Mutex<Option<sqlx::pool::PoolConnection<DB>>>>,
}

#[cfg(feature = "sqlite")]
impl<DB: Database> Clone for Lane<DB> {
    fn clone(&self) -> Self {
        Lane {
            pool: self.pool.clone(),
            slot: self.slot.clone(),
        }
    }
}

#[cfg(feature = "sqlite")]
impl<DB: Database> std::fmt::Debug for Lane<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").finish_non_exhaustive()
    }
}

#[cfg(feature = "sqlite")]
/// The lane's connection, held for one statement: kept in the lane when [`Held::settle`] is
/// given the statement's success, given back to the pool otherwise (a failed statement, a
/// caller dropped midway).
pub(crate) struct Held<DB: Database> {
    slot: tokio::sync::OwnedMutexGuard<Option<sqlx::pool::PoolConnection<DB>>>,
    keep: bool,
}

#[cfg(feature = "sqlite")]
impl<DB: Database> Held<DB> {
    /// The connection.
    pub(crate) fn connection(&mut self) -> &mut DB::Connection {
        self.slot
            .as_mut()
            .expect("BUG: a held lane has its connection")
    }

    /// Keeps the connection in the lane for the next statement if `outcome` (the statement
    /// run on it) succeeded, else gives it back to the pool; returns `outcome`.
    pub(crate) fn settle<T>(mut self, outcome: Result<T, StoreError>) -> Result<T, StoreError> {
        self.keep = outcome.is_ok();
        outcome
    }
}

#[cfg(feature = "sqlite")]
impl<DB: Database> Drop for Held<DB> {
    fn drop(&mut self) {
        if !self.keep {
            // Back to the pool, whose release check flushes what a statement cut short left.
            drop(self.slot.take());
        }
    }
}

#[cfg(feature = "sqlite")]
impl<DB: Database> Lane<DB> {
    /// A lane over a one-connection pool.
    pub(crate) fn new(pool: Pool<DB>) -> Self {
        Lane {
            pool,
            slot: std::sync::Arc::new(tokio::sync::Mutex::new(None)),
        }
    }

    /// Waits for the lane (in arrival order), taking the connection from the pool if the lane
    /// does not hold it.
    pub(crate) async fn hold(&self, driver: &Driver<DB>) -> Result<Held<DB>, StoreError> {
        let mut slot = self.slot.clone().lock_owned().await;
        if slot.is_none() {
            *slot = Some(
                self.pool
                    .acquire()
                    .await
                    .map_err(|error| driver.map_error(error))?,
            );
        }
        Ok(Held { slot, keep: false })
    }

    /// Begins a transaction on the pool (see [`Driver::begin`]) in the lane's turn: the lane
    /// gives its connection back to the pool first, and holds its turn until the transaction
    /// has the connection, so that no statement takes it back in between.
    pub(crate) async fn begin(
        &self,
        driver: &Driver<DB>,
        statement: Option<&'static str>,
    ) -> Result<Transaction<'static, DB>, StoreError> {
        let mut slot = self.slot.lock().await;
        drop(slot.take());
        let begun = driver.begin(&self.pool, statement).await;
        drop(slot);
        begun
    }

    /// Gives the connection back to the pool (before the pool closes).
    pub(crate) async fn release(&self) {
        drop(self.slot.lock().await.take());
    }
}

/// The number of rows a statement changed (each driver's result type has it, but no common
/// trait does).
pub(crate) trait RowsAffected {
    /// As the driver reports it.
    fn rows_affected(&self) -> u64;
}

macro_rules! rows_affected {
    ($($feature:literal => $result:ty),*) => {$(
        #[cfg(feature = $feature)]
        impl RowsAffected for $result {
            fn rows_affected(&self) -> u64 {
                <$result>::rows_affected(self)
            }
        }
    )*};
}

rows_affected!(
    "sqlite" => sqlx::sqlite::SqliteQueryResult,
    "postgres" => sqlx::postgres::PgQueryResult
);

/// Runs a statement like [`execute`]; the rows it returned, as cells.
pub(crate) async fn fetch<'a, DB: Database>(
    driver: &Driver<DB>,
    (read, write): (&'a Pool<DB>, &'a Pool<DB>),
    on: On<'a, Transaction<'static, DB>>,
    sql: &'a str,
    params: &'a [Param<'a>],
) -> Result<Vec<Row>, StoreError>
where
    for<'c> &'c mut <DB as Database>::Connection: Executor<'c, Database = DB>,
    for<'q> <DB as Database>::Arguments<'q>: IntoArguments<'q, DB>,
    Option<&'a str>: Encode<'a, DB> + Type<DB>,
    Option<i64>: Encode<'a, DB> + Type<DB>,
    bool: Encode<'a, DB> + Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
{
    let query = bind(driver, sql, params);
    let rows = match on {
        On::Read => query.fetch_all(read).await,
        On::Write => query.fetch_all(write).await,
        On::Tx(tx) => query.fetch_all(&mut **tx).await,
    };
    rows.map_err(|error| driver.map_error(error))?
        .iter()
        .map(|row| cells(driver, row))
        .collect()
}

/// A result row as cells, by each value's type.
fn cells<DB: Database>(driver: &Driver<DB>, row: &DB::Row) -> Result<Row, StoreError>
where
    usize: sqlx::ColumnIndex<DB::Row>,
    for<'r> i64: Decode<'r, DB> + Type<DB>,
    for<'r> String: Decode<'r, DB> + Type<DB>,
{
    (0..row.len())
        .map(|index| {
            let raw = row
                .try_get_raw(index)
                .map_err(|error| driver.map_error(error))?;
            if raw.is_null() {
                return Ok(Cell::Null);
            }
            let integer = (driver.is_integer)(raw.type_info().name());
            Ok(if integer {
                Cell::Int(
                    row.try_get(index)
                        .map_err(|error| driver.map_error(error))?,
                )
            } else {
                Cell::Text(
                    row.try_get(index)
                        .map_err(|error| driver.map_error(error))?,
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Row)
}

/// The `execute`, `fetch` and `commit` methods of a [`Dialect`](super::Dialect) impl, over its
/// `(read, write)` pools as `$pools` (an expression of `self`). PostgreSQL's; SQLite's go
/// through its writer lane.
#[cfg(feature = "postgres")]
macro_rules! dialect_methods {
    ($self:ident => $pools:expr) => {
        async fn commit(tx: $crate::sql::dialect::Tx<Self>) -> Result<(), $crate::StoreError> {
            tx.commit()
                .await
                .map_err(|error| Self::DRIVER.map_error(error))
        }

        async fn execute<'a>(
            &'a $self,
            on: $crate::sql::On<'a, $crate::sql::dialect::Tx<Self>>,
            sql: &'a str,
            params: &'a [$crate::sql::Param<'a>],
        ) -> Result<u64, $crate::StoreError> {
            $crate::sql::driver::execute(&Self::DRIVER, $pools, on, sql, params).await
        }

        async fn fetch<'a>(
            &'a $self,
            on: $crate::sql::On<'a, $crate::sql::dialect::Tx<Self>>,
            sql: &'a str,
            params: &'a [$crate::sql::Param<'a>],
        ) -> Result<Vec<$crate::sql::Row>, $crate::StoreError> {
            $crate::sql::driver::fetch(&Self::DRIVER, $pools, on, sql, params).await
        }
    };
}
#[cfg(feature = "postgres")]
pub(crate) use dialect_methods;
