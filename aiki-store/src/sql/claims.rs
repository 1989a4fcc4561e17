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

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn claim(&self, request: ClaimRequest) -> Result<Claimed, StoreError> {
        if request.limit == 0 || request.namespaces.is_empty() {
            return Ok(Claimed::default());
        }
        let params = claim_params(&request);
        if let Some(answer) = self.first_answer("claim").await? {
            return Ok(answer);
        }
        let rows = self.fetch(On::Write, &self.sql.own.claim, &params).await?;
        if rows.is_empty() {
            // Nothing changed, nothing to answer again: a long poll claims anew.
            return claimed(rows);
        }
        self.record_after("claim", claimed(rows)?).await
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
        if let Some(answer) = self.first_answer("claim_run").await? {
            return Ok(answer);
        }
        let rows = self
            .fetch(On::Write, &self.sql.own.claim_run, &params)
            .await?;
        if rows.is_empty() {
            // Not claimable now, or not there at all.
            self.get_run(id).await?;
            return claimed(rows);
        }
        self.record_after("claim_run", claimed(rows)?).await
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

/// The runs a claim's rows return (the run document, the idle timeout in force), oldest first.
fn claimed(rows: Vec<Row>) -> Result<Claimed, StoreError> {
    let idle = ConfigKey::ClaimIdleTimeout;
    let mut idle_ms = idle.default_value();
    let mut runs = Vec::with_capacity(rows.len());
    for mut row in rows {
        if let Some(stored) = row.int(1)?.and_then(|value| idle.check(value).ok()) {
            idle_ms = stored;
        }
        runs.push(decode::run_from_json(
            &row.take_text(0)?.unwrap_or_default(),
        )?);
    }
    decode::sort_claimed(&mut runs);
    Ok(Claimed::new(runs, idle_ms))
}
