//! First answers of operations (see [`crate::operation`]) on both SQL databases: one row per
//! operation, written in the transaction of the write it answers, or, where one statement may
//! write two tables (PostgreSQL, a transition that needs no transaction of its own), in the
//! write's own statement.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::dialect::{Dialect, On, Param, Tx, params};
use super::statements::{Level, fence};
use super::{SqlStore, decode};
use crate::operation::{self, OperationId};
use crate::{Lease, Millis, RunRecord, StoreError};

/// The statements of the answers table, on a schema that has it.
#[derive(Debug)]
pub(crate) struct AnswerStatements {
    /// The answer of id `$1`, and the digest of the request it answered (`NULL` on a schema
    /// without digests).
    first: String,
    /// Records answer `$2` for id `$1` at `$3` (with digest `$4` on a schema that keeps them),
    /// unless the id has one.
    record: String,
    /// Forgets up to `$3` answers recorded before `$1 - $2`, fenced by the lease from `$4` on.
    forget: String,
    /// Whether the schema keeps the digests of requests (`Level::answer_digests`).
    pub(crate) digests: bool,
}

impl AnswerStatements {
    /// The statements in `D`'s syntax, or `None` on a schema without answers.
    pub(crate) fn new<D: Dialect>(dialect: &D, level: Level) -> Option<Self> {
        if !level.answers {
            return None;
        }
        let render = |sql: String| (D::DRIVER.render)(&sql);
        let (digest, digest_value) = if level.answer_digests {
            ("digest", ", $4")
        } else {
            ("NULL", "")
        };
        Some(Self {
            first: render(format!(
                "SELECT answer, {digest} FROM aiki_operation_answers WHERE id = $1"
            )),
            record: render(format!(
                "INSERT INTO aiki_operation_answers (id, answer, recorded_at{columns}) \
                 VALUES ($1, $2, $3{digest_value}) ON CONFLICT (id) DO NOTHING",
                columns = if level.answer_digests { ", digest" } else { "" },
            )),
            // By the caller's clock: answers are recorded by this machine's.
            forget: render(format!(
                "DELETE FROM aiki_operation_answers WHERE id IN (SELECT id FROM \
                 aiki_operation_answers WHERE recorded_at < $1 - $2 ORDER BY recorded_at \
                 LIMIT $3){fence}",
                fence = fence(dialect, level, "$1", 4),
            )),
            digests: level.answer_digests,
        })
    }

    /// The parameters that record `answer` as operation `id`'s answer to a write of `kind`,
    /// now: its key, the answer, the time, and where the schema keeps it the digest of the
    /// request in scope.
    pub(crate) fn record_params(
        &self,
        id: &OperationId,
        kind: &str,
        answer: String,
    ) -> Vec<Param<'static>> {
        let mut params = Vec::from(params![operation::key(id, kind), answer, wall_clock()]);
        if self.digests {
            params.push(Param::from(operation::asked()));
        }
        params
    }
}

/// The operation in scope, if this store records answers.
fn in_scope<D: Dialect>(store: &SqlStore<D>) -> Option<(OperationId, &AnswerStatements)> {
    Some((operation::current()?, store.sql.answers.as_ref()?))
}

impl<D: Dialect> SqlStore<D> {
    /// Whether a write should be done in a transaction that records its answer: an operation
    /// is in scope and the schema keeps answers.
    pub(crate) fn answers_in_scope(&self) -> bool {
        in_scope(self).is_some()
    }

    /// The operation in scope, if this store records answers (its writes record theirs).
    pub(crate) fn answered_operation(&self) -> Option<OperationId> {
        in_scope(self).map(|(id, _)| id)
    }

    /// The first answer of the operation in scope to a write of `kind`, if one was recorded.
    pub(crate) async fn first_answer<T: DeserializeOwned>(
        &self,
        kind: &str,
    ) -> Result<Option<T>, StoreError> {
        let Some((id, sql)) = in_scope(self) else {
            return Ok(None);
        };
        if operation::is_fresh() {
            return Ok(None);
        }
        self.recorded_answer(&id, sql, kind).await
    }

    /// The answer recorded for the operation in scope and a write of `kind`, if any, looked
    /// for even on a first send (whose write was refused for a repeat that answered first).
    pub(crate) async fn recorded_answer_in_scope<T: DeserializeOwned>(
        &self,
        kind: &str,
    ) -> Result<Option<T>, StoreError> {
        match in_scope(self) {
            Some((id, sql)) => self.recorded_answer(&id, sql, kind).await,
            None => Ok(None),
        }
    }

    /// The answer recorded for operation `id` and a write of `kind`, if any.
    async fn recorded_answer<T: DeserializeOwned>(
        &self,
        id: &OperationId,
        sql: &AnswerStatements,
        kind: &str,
    ) -> Result<Option<T>, StoreError> {
        let Some(answer) = self.recorded_text(id, sql, kind).await? else {
            return Ok(None);
        };
        serde_json::from_str(&answer)
            .map(Some)
            .map_err(|error| StoreError::Corrupt {
                message: format!("the recorded answer of operation {id} ({kind}): {error}"),
            })
    }

    /// The text of the answer recorded for operation `id` and a write of `kind`, if any,
    /// once it is known to answer the request in scope: [`StoreError::KeyReused`] when it
    /// answered a request with another digest.
    async fn recorded_text(
        &self,
        id: &OperationId,
        sql: &AnswerStatements,
        kind: &str,
    ) -> Result<Option<String>, StoreError> {
        let key = operation::key(id, kind);
        let Some(mut row) = self
            .fetch_optional(On::Read, &sql.first, &params![key])
            .await?
        else {
            return Ok(None);
        };
        operation::same_request(id, row.text(1)?.as_deref())?;
        row.take_text(0)
    }

    /// Commits `tx`, and with it `answer` as the first answer of the operation in scope to a
    /// write of `kind`. A repeat of the operation that recorded its answer first (concurrently,
    /// through another server) wins: this write is rolled back and that answer returned.
    pub(crate) async fn commit_answer<T: Serialize + DeserializeOwned>(
        &self,
        mut tx: Tx<D>,
        kind: &str,
        answer: T,
    ) -> Result<T, StoreError> {
        if let Some((id, sql)) = in_scope(self) {
            let text = serde_json::to_string(&answer).expect("BUG: an answer serializes");
            let params = sql.record_params(&id, kind, text);
            if self.execute(On::Tx(&mut tx), &sql.record, &params).await? == 0 {
                drop(tx);
                return self.recorded_answer(&id, sql, kind).await?.ok_or_else(|| {
                    StoreError::Corrupt {
                        message: format!("operation {id} ({kind}) was answered, then forgotten"),
                    }
                });
            }
        }
        self.commit(tx).await?;
        Ok(answer)
    }

    /// Forgets up to `limit` answers recorded more than `older_than_ms` before `now`.
    pub(crate) async fn forget_operations(
        &self,
        lease: &Lease,
        now: Millis,
        older_than_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let Some(sql) = &self.sql.answers else {
            return Ok(0);
        };
        let params = self.fenced(&params![now, older_than_ms, i64::from(limit)], lease);
        self.execute(On::Write, &sql.forget, &params).await
    }
}

/// The kind of the answers a transition records in its own statement (PostgreSQL: see
/// `DialectStatements::transition_answered`): the run's document as the statement returns it,
/// where [`SqlStore::commit_answer`] keeps the serialized outcome under `transition`. A kind of
/// its own, so that the previous release, which knows only `transition`, finds no answer it
/// would misread (its repeat redoes the transition: a revision conflict, no second effect). A
/// new run keeps its serialized answer in its transaction: a repeat through the previous
/// release must find it, or it would start a second run.
const TRANSITION_DOC: &str = "transition-doc";

impl<D: Dialect> SqlStore<D> {
    /// The first answer of the transition in scope, recorded as a run document (PostgreSQL's
    /// one-statement transition) or serialized (in a transaction). A first send looks only
    /// when `even_fresh` (its write was refused: a repeat racing it may have done it first).
    pub(crate) async fn first_transition_answer(
        &self,
        even_fresh: bool,
    ) -> Result<Option<RunRecord>, StoreError> {
        let Some((id, sql)) = in_scope(self) else {
            return Ok(None);
        };
        if operation::is_fresh() && !even_fresh {
            return Ok(None);
        }
        if let Some(run) = self.recorded_doc(&id, sql).await? {
            return Ok(Some(run));
        }
        self.recorded_answer(&id, sql, "transition").await
    }

    /// Runs `statement`, a transition that records the run document it returns as the answer
    /// of the operation in scope (`params` are the transition's; the answer's key and time are
    /// appended): the run, `None` when the guard matched no row, or the answer a repeat
    /// recorded first (the statement then wrote nothing).
    pub(crate) async fn transition_answered_in_statement(
        &self,
        statement: &str,
        params: &mut Vec<Param<'_>>,
    ) -> Result<Option<RunRecord>, StoreError> {
        let (id, sql) = in_scope(self).expect("BUG: a transition answered out of scope");
        params.push(Param::from(operation::key(&id, TRANSITION_DOC)));
        params.push(wall_clock());
        if sql.digests {
            params.push(Param::from(operation::asked()));
        }
        match self.fetch_text(On::Write, statement, params).await {
            Ok(doc) => doc.map(|doc| decode::run_from_json(&doc)).transpose(),
            Err(StoreError::AlreadyExists { what }) if what == super::error::ANSWER_TAKEN => {
                match self.recorded_doc(&id, sql).await? {
                    Some(run) => Ok(Some(run)),
                    None => Err(StoreError::Corrupt {
                        message: format!(
                            "operation {id} (transition) was answered, then forgotten"
                        ),
                    }),
                }
            }
            Err(error) => Err(error),
        }
    }

    /// The run document recorded as operation `id`'s answer to a transition, if any.
    async fn recorded_doc(
        &self,
        id: &OperationId,
        sql: &AnswerStatements,
    ) -> Result<Option<RunRecord>, StoreError> {
        self.recorded_text(id, sql, TRANSITION_DOC)
            .await?
            .map(|doc| decode::run_from_json(&doc))
            .transpose()
    }
}

/// This machine's clock: when an answer was recorded.
fn wall_clock() -> Param<'static> {
    Param::from(operation::wall_clock_ms())
}
