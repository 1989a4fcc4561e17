//! Continue-as-new on both SQL databases (see [`crate::ExecutorStore::continue_run`]): one
//! transaction that frees the predecessor's reference id, creates the successor, hands it the
//! predecessor's waiters, schedule and unconsumed events, and completes the predecessor.

use crate::{Continuation, Continued, Queue, RunId, RunStatus, StoreError, Transition};

use super::dialect::{On, Tx, params};
use super::statements::run_doc;
use super::{Dialect, SqlStore, decode};

impl<D: Dialect> SqlStore<D> {
    /// `sql` for this dialect, or the refusal of a schema without the continuation columns.
    fn continuation_statement(&self, sql: &str) -> Result<String, StoreError> {
        if !self.level.continuation {
            return Err(StoreError::Schema {
                message: "continuing a run as new needs the continuation columns of this \
                          release's schema; migrate the store first (`aiki migrate`)"
                    .to_owned(),
            });
        }
        Ok((D::DRIVER.render)(sql))
    }

    pub(crate) async fn continue_run(
        &self,
        id: RunId,
        expected: u64,
        continuation: Continuation,
    ) -> Result<Continued, StoreError> {
        if let Some(answer) = self.first_answer("continue_run").await? {
            return Ok(answer);
        }
        let run = self.continuation_statement(&format!(
            "SELECT {doc}::text FROM aiki_runs WHERE id = $1::uuid",
            doc = run_doc("", self.level)
        ))?;
        let give_up = self.continuation_statement(
            "UPDATE aiki_runs SET reference_id = NULL, continued_as = $2::uuid \
             WHERE id = $1::uuid AND revision = $3 AND status = 'running'",
        )?;
        let mark = self.continuation_statement(&format!(
            "UPDATE aiki_runs SET continued_from = $2::uuid WHERE id = $1::uuid \
             RETURNING {doc}::text",
            doc = run_doc("", self.level)
        ))?;
        let mut tx = self.begin().await?;
        let predecessor = self
            .fetch_text(On::Tx(&mut tx), &run, &params![id])
            .await?
            .ok_or_else(|| StoreError::run_not_found(id))?;
        let predecessor = decode::run_from_json(&predecessor)?;
        let now = continuation.now;
        let new = continuation.successor_of(&predecessor);
        let to = new.id;
        let revision = decode::revision(expected);
        let freed = self
            .execute(On::Tx(&mut tx), &give_up, &params![id, to, revision])
            .await?;
        if freed != 1 {
            drop(tx);
            return Err(self
                .explain_refusal(id, expected, RunStatus::Completed)
                .await);
        }
        if self.insert_run(On::Tx(&mut tx), &new).await?.is_none() {
            let holder = self.select_by_reference(On::Tx(&mut tx), &new).await?;
            return Err(crate::model::held_reference(&holder));
        }
        let successor = self
            .fetch_text(On::Tx(&mut tx), &mark, &params![to, id])
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                message: format!("the successor {to} of run {id} vanished as it was created"),
            })?;
        self.carry_events(&mut tx, id, to, &continuation.consumed)
            .await?;
        self.hand_waiters_over(&mut tx, id, to).await?;
        let completed = self
            .transition_in(
                &mut tx,
                id,
                expected,
                &Transition::to(RunStatus::Completed, now),
            )
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                message: format!("run {id} changed under its continuation's lock"),
            })?;
        let continued = Continued::new(
            decode::run_from_json(&completed)?,
            decode::run_from_json(&successor)?,
        );
        self.commit_answer(tx, "continue_run", continued).await
    }

    /// Copies the events run `from` received and did not consume to run `to`, numbered from 0
    /// in each name's queue.
    async fn carry_events(
        &self,
        tx: &mut Tx<D>,
        from: RunId,
        to: RunId,
        consumed: &std::collections::BTreeMap<String, u32>,
    ) -> Result<(), StoreError> {
        let names = self.continuation_statement(
            "SELECT DISTINCT name FROM aiki_events WHERE run_id = $1::uuid",
        )?;
        let copy = self.continuation_statement(
            "INSERT INTO aiki_events (run_id, name, idx, data, timed_out, reference_id, \
             received_at, sent_by) \
             SELECT $2::uuid, name, ROW_NUMBER() OVER (ORDER BY idx) - 1, data, timed_out, \
             reference_id, received_at, sent_by FROM aiki_events \
             WHERE run_id = $1::uuid AND name = $3 AND idx >= $4 AND timed_out = false",
        )?;
        let rows = self.fetch(On::Tx(&mut *tx), &names, &params![from]).await?;
        for row in rows {
            let name = row.text(0)?.unwrap_or_default();
            if !matches!(Queue::parse(&name), Queue::Named(_)) {
                continue;
            }
            let first = i64::from(consumed.get(&name).copied().unwrap_or(0));
            self.execute(
                On::Tx(&mut *tx),
                &copy,
                &params![from, to, name.as_str(), first],
            )
            .await?;
        }
        Ok(())
    }

    /// Makes whatever waits on run `from` wait on run `to`: suspended runs whose wait set names
    /// it (their wait rows and their wait sets as shown), and a schedule whose last run it is.
    async fn hand_waiters_over(
        &self,
        tx: &mut Tx<D>,
        from: RunId,
        to: RunId,
    ) -> Result<(), StoreError> {
        let statements = [
            "UPDATE aiki_runs SET wait_set = replace(wait_set, $1, $2) \
             WHERE id IN (SELECT waiter FROM aiki_waits WHERE child = $1::uuid)",
            "UPDATE aiki_waits SET child = $2::uuid WHERE child = $1::uuid",
            "UPDATE aiki_schedules SET last_run = $2::uuid, record = replace(record, $1, $2) \
             WHERE last_run = $1::uuid",
        ];
        for sql in statements {
            let sql = self.continuation_statement(sql)?;
            self.execute(
                On::Tx(&mut *tx),
                &sql,
                &params![from.to_string(), to.to_string()],
            )
            .await?;
        }
        Ok(())
    }

    /// The run `id` continued as, when it ended (`status`) by continuing as new.
    pub(super) async fn successor_of(
        &self,
        tx: &mut Tx<D>,
        id: RunId,
        status: RunStatus,
    ) -> Result<Option<RunId>, StoreError> {
        if status != RunStatus::Completed || !self.level.continuation {
            return Ok(None);
        }
        let sql = self.continuation_statement(
            "SELECT continued_as::text FROM aiki_runs WHERE id = $1::uuid",
        )?;
        let next = self
            .fetch_optional(On::Tx(&mut *tx), &sql, &params![id])
            .await?
            .map(|row| row.text(0))
            .transpose()?
            .flatten();
        next.map(|text| decode::parse_id(&text)).transpose()
    }
}
