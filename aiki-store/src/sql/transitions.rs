//! Run transitions, one run or many at once, each guarded by the run's revision (and, for a
//! run leaving `running`, by its claim) in the statement that applies it.

use crate::{Millis, RunId, RunRecord, StoreError, Transition, WaitSpec};

use super::dialect::{Dialect, On, Param, Tx, params};
use super::{SqlStore, binds, decode};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn transition(
        &self,
        id: RunId,
        expected: u64,
        mut transition: Transition,
    ) -> Result<RunRecord, StoreError> {
        if let Some(answer) = self.first_transition_answer(false).await? {
            return Ok(answer);
        }
        if transition.awaits_retries() {
            // The run's claimer wrote these entries, fenced by the revision the transition
            // checks: read before it, they are what it suspends on.
            transition.retry_times_from(&self.retry_times(id).await?);
        }
        match self.guarded_transition(id, expected, &transition).await? {
            Some(run) => Ok(run),
            // A repeat racing this send may have moved the run first: its answer is ours.
            None => match self.first_transition_answer(true).await? {
                Some(answer) => Ok(answer),
                None => Err(self.explain_refusal(id, expected, transition.to).await),
            },
        }
    }

    /// Run `id`'s entries awaiting a retry, as `Transition::retry_times_from` reads them.
    async fn retry_times(&self, id: RunId) -> Result<Vec<(String, u32, Millis)>, StoreError> {
        let rows = self
            .fetch(On::Read, &self.sql.retry_times, &[id.into()])
            .await?;
        let mut recorded = Vec::with_capacity(rows.len());
        for mut row in rows {
            let attempts = row.int(1)?.unwrap_or_default();
            let at = row.int(2)?;
            if let (Some(address), Some(at)) = (row.take_text(0)?, at) {
                recorded.push((address, u32::try_from(attempts).unwrap_or(0), at));
            }
        }
        Ok(recorded)
    }

    pub(crate) async fn transition_all(
        &self,
        moves: Vec<crate::Move>,
    ) -> Result<Vec<RunRecord>, StoreError> {
        if let Some(answer) = self.first_answer("transition_all").await? {
            return Ok(answer);
        }
        let mut tx = self.begin().await?;
        // Each run locked first, in id order, so two such operations never wait on each other
        // crosswise (SQLite's transaction holds the write lock already).
        if let Some((_, lock_run)) = &self.sql.own.lock_first {
            let mut ids: Vec<RunId> = moves.iter().map(|m| m.id).collect();
            ids.sort();
            for id in ids {
                self.execute(On::Tx(&mut tx), lock_run, &[id.into()])
                    .await?;
            }
        }
        let mut docs = Vec::with_capacity(moves.len());
        for change in &moves {
            let written = self
                .transition_in(&mut tx, change.id, change.expected, &change.transition)
                .await?;
            match written {
                Some(doc) => docs.push(doc),
                None => {
                    drop(tx);
                    let (id, expected) = (change.id, change.expected);
                    return Err(self
                        .explain_refusal(id, expected, change.transition.to)
                        .await);
                }
            }
        }
        let runs = docs
            .iter()
            .map(|doc| decode::run_from_json(doc))
            .collect::<Result<Vec<_>, _>>()?;
        self.commit_answer(tx, "transition_all", runs).await
    }

    /// The transition's guarded update, in a transaction when the dialect must lock first, a
    /// step needs a statement of its own or the answer is recorded (an operation in scope);
    /// the run, or `None` when the guard matched no row.
    async fn guarded_transition(
        &self,
        id: RunId,
        expected: u64,
        transition: &Transition,
    ) -> Result<Option<RunRecord>, StoreError> {
        if !self.needs_transaction(transition) {
            if !self.answers_in_scope() {
                let params = binds::transition(id, expected, transition);
                return self
                    .fetch_text(On::Write, &self.sql.own.transition, &params)
                    .await?
                    .map(|doc| decode::run_from_json(&doc))
                    .transpose();
            }
            if let Some(answered) = &self.sql.own.transition_answered {
                let mut params = binds::transition(id, expected, transition);
                return self
                    .transition_answered_in_statement(answered, &mut params)
                    .await;
            }
        }
        let mut tx = self.begin().await?;
        let Some(doc) = self
            .transition_in(&mut tx, id, expected, transition)
            .await?
        else {
            return Ok(None);
        };
        let run = decode::run_from_json(&doc)?;
        self.commit_answer(tx, "transition", run).await.map(Some)
    }

    /// Whether a transition needs more than its one guarded statement.
    fn needs_transaction(&self, transition: &Transition) -> bool {
        let own = &self.sql.own;
        let awaits = transition
            .wait
            .as_ref()
            .is_some_and(WaitSpec::awaits_others);
        // A terminal transition wakes a waiting parent through the `aiki_runs_wake_parent`
        // trigger, inside its own statement: it needs no transaction.
        let depends_on_others =
            (transition.to.is_suspended() && awaits) || transition.cancel_sleeps;
        (own.lock_first.is_some() && depends_on_others)
            || (own.cancel_sleeps.is_some() && transition.cancel_sleeps)
            || !transition.rerun.is_empty()
            || !transition.forget.is_empty()
    }

    /// A transition's statements inside an open transaction: the locks its outcome depends
    /// on, the guarded update, and the steps a dialect runs apart (cancelled sleeps, entries
    /// to run again, event records to forget). `None` when the guard matched no row.
    pub(super) async fn transition_in(
        &self,
        tx: &mut Tx<D>,
        id: RunId,
        expected: u64,
        transition: &Transition,
    ) -> Result<Option<String>, StoreError> {
        let own = &self.sql.own;
        let params = binds::transition(id, expected, transition);
        let to = transition.to;
        let awaits = transition
            .wait
            .as_ref()
            .is_some_and(WaitSpec::awaits_others);
        let depends_on_others = (to.is_suspended() && awaits) || transition.cancel_sleeps;
        if let Some((lock_children, lock_run)) =
            own.lock_first.as_ref().filter(|_| depends_on_others)
        {
            let children: Vec<String> = transition
                .wait
                .iter()
                .flat_map(|wait| wait.children.iter().map(|child| child.id.to_string()))
                .collect();
            if to.is_suspended() && !children.is_empty() {
                self.execute(On::Tx(&mut *tx), lock_children, &[Param::List(children)])
                    .await?;
            }
            self.execute(On::Tx(&mut *tx), lock_run, &[id.into()])
                .await?;
        }
        let Some(doc) = self
            .fetch_text(On::Tx(&mut *tx), &own.transition, &params)
            .await?
        else {
            return Ok(None);
        };
        if let Some(cancel) = own
            .cancel_sleeps
            .as_ref()
            .filter(|_| transition.cancel_sleeps)
        {
            self.execute(On::Tx(&mut *tx), cancel, &params![id, transition.now])
                .await?;
        }
        let due = transition.due_at.unwrap_or(transition.now);
        for call in &transition.rerun {
            let params = params![
                id,
                call.address.as_str(),
                i64::from(call.index),
                due,
                transition.now
            ];
            self.execute(On::Tx(&mut *tx), &self.sql.rerun_entry, &params)
                .await?;
        }
        for slot in &transition.forget {
            let params = params![id, slot.name.as_str(), i64::from(slot.index)];
            self.execute(On::Tx(&mut *tx), &self.sql.forget_event, &params)
                .await?;
        }
        Ok(Some(doc))
    }
}
