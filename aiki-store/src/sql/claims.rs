//! Claims: taking queued runs (by the oldest first, or one by its name), refreshing a claim,
//! and an operator's release of one whose executor is gone.

use crate::{ClaimRequest, Claimed, ConfigKey, Millis, RunId, RunRecord, RunStatus, StoreError};

use super::SqlStore;
use super::decode::{self, revision};
use super::dialect::{Dialect, On, Param, Row, params};

/// The parameters of the dialect's `claim` statement for `request`.
fn claim_params(request: &ClaimRequest) -> [Param<'_>; 6] {
    let namespaces = request.namespaces.iter().map(|n| n.to_string()).collect();
    [
        Param::from(&request.owner),
        Param::from(request.now),
        Param::from(&request.pool),
        Param::List(namespaces),
        Param::from(i64::from(request.limit)),
        Param::List(request.skip.iter().map(RunId::to_string).collect()),
    ]
}

/// The kind of the answers a claim records in its own statement (PostgreSQL: see
/// `DialectStatements::claims_answered`): what it claimed as the statement returns it, where
/// a claim in a transaction keeps the serialized `Claimed` under `claim`. A kind of its own, so
/// that the previous release, which knows only `claim`, finds no answer it would misread (its
/// repeat claims anew, and the runs of the lost answer wait for claim recovery, as they did).
pub(crate) const CLAIM_DOCS: &str = "claim-docs";

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn claim(&self, request: ClaimRequest) -> Result<Claimed, StoreError> {
        if request.limit == 0 || request.namespaces.is_empty() {
            return Ok(Claimed::default());
        }
        let params = claim_params(&request);
        if let Some(answer) = self.first_claim_answer("claim", false).await? {
            return Ok(answer);
        }
        if self.answers_in_scope() {
            let statements = self.sql.own.claims_answered.as_ref();
            return self
                .claim_answered(
                    "claim",
                    &self.sql.own.claim,
                    statements.map(|s| &s.0),
                    params.into(),
                )
                .await;
        }
        let rows = self.fetch(On::Write, &self.sql.own.claim, &params).await?;
        claimed(rows)
    }

    /// The first answer of the claim in scope (`kind`: `claim` or `claim_run`), in whichever
    /// form it was recorded; a first send looks only when `even_fresh`.
    async fn first_claim_answer(
        &self,
        kind: &str,
        even_fresh: bool,
    ) -> Result<Option<Claimed>, StoreError> {
        if !self.answers_in_scope() || (crate::operation::is_fresh() && !even_fresh) {
            return Ok(None);
        }
        let docs_kind = claim_docs_kind(kind);
        if let Some(docs) = self.recorded_answer_in_scope(&docs_kind).await? {
            return claimed_docs(docs).map(Some);
        }
        self.recorded_answer_in_scope(kind).await
    }

    /// Claims by `statement` (`claim` or `claim_run`, with `params`) as the operation in scope,
    /// recording what it claimed, if anything, as the operation's answer where the claim
    /// commits: in the claim's own statement (`answered`, PostgreSQL), or in a transaction. A
    /// claim that claims nothing records nothing (a long poll claims again), and a crash never
    /// leaves claimed runs whose answer a repeat would not find.
    async fn claim_answered(
        &self,
        kind: &str,
        statement: &str,
        answered: Option<&String>,
        mut params: Vec<Param<'_>>,
    ) -> Result<Claimed, StoreError> {
        if let Some(answered) = answered {
            let key = self
                .answered_operation()
                .expect("BUG: a claim answered out of scope");
            params.push(Param::from(crate::operation::key(
                &key,
                &claim_docs_kind(kind),
            )));
            params.push(Param::from(crate::operation::wall_clock_ms()));
            if self
                .sql
                .answers
                .as_ref()
                .is_some_and(|answers| answers.digests)
            {
                params.push(Param::from(crate::operation::asked()));
            }
            return match self.fetch(On::Write, answered, &params).await {
                Ok(rows) => claimed(rows),
                Err(StoreError::AlreadyExists { what })
                    if what.contains("aiki_operation_answers") =>
                {
                    self.first_claim_answer(kind, true)
                        .await?
                        .ok_or_else(|| StoreError::Corrupt {
                            message: format!(
                                "operation {key} ({kind}) was answered, then forgotten"
                            ),
                        })
                }
                Err(error) => Err(error),
            };
        }
        let mut tx = self.begin().await?;
        let rows = self.fetch(On::Tx(&mut tx), statement, &params).await?;
        if rows.is_empty() {
            // Nothing changed, nothing to answer again: rolled back.
            return claimed(rows);
        }
        self.commit_answer(tx, kind, claimed(rows)?).await
    }

    /// The query plan of `request`'s claim: the text in column `column` of each row that
    /// `explain` (the database's `EXPLAIN` keyword) followed by the claim statement returns.
    /// Nothing is claimed.
    pub(crate) async fn explain_claim(
        &self,
        request: &ClaimRequest,
        explain: &str,
        column: usize,
    ) -> Result<String, StoreError> {
        let params = claim_params(request);
        self.explain(On::Write, explain, &self.sql.own.claim, &params, column)
            .await
    }

    pub(crate) async fn claim_run(
        &self,
        request: ClaimRequest,
        id: RunId,
    ) -> Result<Claimed, StoreError> {
        let namespaces = request.namespaces.iter().map(|n| n.to_string()).collect();
        let params = [
            Param::from(&request.owner),
            Param::from(request.now),
            id.into(),
            Param::List(namespaces),
        ];
        if let Some(answer) = self.first_claim_answer("claim_run", false).await? {
            return Ok(answer);
        }
        let rows = if self.answers_in_scope() {
            let statements = self.sql.own.claims_answered.as_ref();
            let claimed = self
                .claim_answered(
                    "claim_run",
                    &self.sql.own.claim_run,
                    statements.map(|s| &s.1),
                    params.into(),
                )
                .await?;
            if !claimed.runs.is_empty() {
                return Ok(claimed);
            }
            Vec::new()
        } else {
            self.fetch(On::Write, &self.sql.own.claim_run, &params)
                .await?
        };
        if rows.is_empty() {
            // Not claimable now, or not there at all.
            self.get_run(id).await?;
        }
        claimed(rows)
    }

    pub(crate) async fn refresh_claim(
        &self,
        id: RunId,
        owner: &str,
        expected: u64,
        now: Millis,
    ) -> Result<crate::ClaimState, StoreError> {
        let refreshed = self
            .fetch_optional(
                On::Write,
                &self.sql.refresh_claim,
                &params![id, revision(expected), owner, now],
            )
            .await?;
        let Some(row) = refreshed else {
            return Err(self.check_failed(On::Write, id, expected).await);
        };
        Ok(crate::ClaimState {
            pause_requested: row.int(0)? == Some(1),
        })
    }

    pub(crate) async fn release_claim(
        &self,
        id: RunId,
        expected: u64,
        now: Millis,
        confirm_ms: Option<i64>,
        actor: Option<String>,
    ) -> Result<Option<RunRecord>, StoreError> {
        let Some(release) = &self.sql.release_claim else {
            return Err(StoreError::Schema {
                message: format!(
                    "releasing run {id}'s claim needs the schema of this release (the \
                     database's is older: run `aiki migrate`)"
                ),
            });
        };
        let params = params![id, revision(expected), now, confirm_ms, actor];
        if self.answers_in_scope() {
            if let Some(answer) = self.first_answer("release_claim").await? {
                return Ok(answer);
            }
            let mut tx = self.begin().await?;
            if let Some(doc) = self.fetch_text(On::Tx(&mut tx), release, &params).await? {
                let run = Some(decode::run_from_json(&doc)?);
                return self.commit_answer(tx, "release_claim", run).await;
            }
        } else if let Some(doc) = self.fetch_text(On::Write, release, &params).await? {
            return decode::run_from_json(&doc).map(Some);
        }
        let run = self.get_run(id).await?;
        if run.status == RunStatus::Running && run.revision == expected {
            return Ok(None);
        }
        Err(self.explain_refusal(id, expected, RunStatus::Queued).await)
    }
}

/// The kind of the answer a claim of `kind` records in its own statement.
fn claim_docs_kind(kind: &str) -> String {
    format!("{kind}:{CLAIM_DOCS}")
}

/// The runs a claim's rows return (the run document, the idle timeout in force), oldest first.
fn claimed(rows: Vec<Row>) -> Result<Claimed, StoreError> {
    let mut docs = Vec::with_capacity(rows.len());
    for mut row in rows {
        let idle = row.int(1)?;
        docs.push((row.take_text(0)?.unwrap_or_default(), idle));
    }
    claimed_docs(docs)
}

/// The runs of a claim's `(document, idle timeout)` pairs, oldest first.
fn claimed_docs(docs: Vec<(String, Option<i64>)>) -> Result<Claimed, StoreError> {
    let idle = ConfigKey::ClaimIdleTimeout;
    let mut idle_ms = idle.default_value();
    let mut runs = Vec::with_capacity(docs.len());
    for (doc, stored) in docs {
        if let Some(stored) = stored.and_then(|value| idle.check(value).ok()) {
            idle_ms = stored;
        }
        runs.push(decode::run_from_json(&doc)?);
    }
    decode::sort_claimed(&mut runs);
    Ok(Claimed::new(runs, idle_ms))
}
