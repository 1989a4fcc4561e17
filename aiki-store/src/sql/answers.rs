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
    /// The answer of id `$1`.
    first: String,
    /// Records answer `$2` for id `$1` at `$3`, unless the id has one.
    record: String,
    /// Forgets up to `$3` answers recorded before `$1 - $2`, fenced by the lease from `$4` on.
    forget: String,
}

impl AnswerStatements {
    /// The statements in `D`'s syntax, or `None` on a schema without answers.
    pub(crate) fn new<D: Dialect>(dialect: &D, level: Level) -> Option<Self> {
        if !level.answers {
            return None;
        }
        let render = |sql: String| (D::DRIVER.render)(&sql);
        Some(Self {
            first: render("SELECT answer FROM aiki_operation_answers WHERE id = $1".to_owned()),
            record: render(
                "INSERT INTO aiki_operation_answers (id, answer, recorded_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"
                    .to_owned(),
            ),
            // By the caller's clock: answers are recorded by this machine's.
            forget: render(format!(
                "DELETE FROM aiki_operation_answers WHERE id IN (SELECT id FROM \
                 aiki_operation_answers WHERE recorded_at < $1 - $2 ORDER BY recorded_at \
                 LIMIT $3){fence}",
                fence = fence(dialect, level, "$1", 4),
            )),
        })
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

    /// The answer recorded for operation `id` and a write of `kind`, if any.
    async fn recorded_answer<T: DeserializeOwned>(
        &self,
        id: &OperationId,
        sql: &AnswerStatements,
        kind: &str,
    ) -> Result<Option<T>, StoreError> {
        let key = operation::key(id, kind);
        let Some(answer) = self.fetch_text(On::Read, &sql.first, &params![key]).await? else {
            return Ok(None);
        };
        serde_json::from_str(&answer)
            .map(Some)
            .map_err(|error| StoreError::Corrupt {
                message: format!("the recorded answer of operation {id} ({kind}): {error}"),
            })
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
            let params = params![operation::key(&id, kind), text, wall_clock()];
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

    /// Records `answer` for the operation in scope after its write committed, in a statement
    /// of its own: for claims, whose repeat after a crash between the two statements costs a
    /// delay and never a second effect (the runs the lost answer claimed are released by claim
    /// recovery, their tasks never run twice), and whose long polls claim nothing far more
    /// often than something, which a transaction per attempt would make cost three
    /// statements instead of one. The answer to give: this one, or the one a concurrent repeat
    /// recorded first.
    pub(crate) async fn record_after<T: Serialize + DeserializeOwned>(
        &self,
        kind: &str,
        answer: T,
    ) -> Result<T, StoreError> {
        let Some((id, sql)) = in_scope(self) else {
            return Ok(answer);
        };
        let text = serde_json::to_string(&answer).expect("BUG: an answer serializes");
        let params = params![operation::key(&id, kind), text, wall_clock()];
        if self.execute(On::Write, &sql.record, &params).await? == 0 {
            return Ok(self
                .recorded_answer(&id, sql, kind)
                .await?
                .unwrap_or(answer));
        }
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
        let key = operation::key(id, TRANSITION_DOC);
        self.fetch_text(On::Read, &sql.first, &params![key])
            .await?
            .map(|doc| decode::run_from_json(&doc))
            .transpose()
    }
}

/// This machine's clock: when an answer was recorded.
fn wall_clock() -> Param<'static> {
    Param::from(operation::wall_clock_ms())
}
