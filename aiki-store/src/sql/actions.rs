//! The operator's actions on a run, each one transaction that checks the run's status and
//! writes the action.

use crate::{Millis, RunAction, RunId, RunRecord, RunStatus, StoreError};

use super::SqlStore;
use super::decode;
use super::dialect::{Dialect, On, params};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn act(
        &self,
        id: RunId,
        action: RunAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<RunRecord, StoreError> {
        if let Some(answer) = self.first_answer("act").await? {
            return Ok(answer);
        }
        let mut tx = self.begin().await?;
        // The run locked before it is read (SQLite's transaction holds the write lock already),
        // so that what is checked is what is written over.
        if let Some((_, lock_run)) = &self.sql.own.lock_first {
            self.execute(On::Tx(&mut tx), lock_run, &[id.into()])
                .await?;
        }
        let doc = self
            .fetch_text(On::Tx(&mut tx), &self.sql.get_run, &[id.into()])
            .await?
            .ok_or_else(|| StoreError::run_not_found(id))?;
        let run = decode::run_from_json(&doc)?;
        if !action.applies_to(run.status) {
            return Err(StoreError::InvalidTransition {
                run_id: id,
                from: run.status,
                to: action.to(),
            });
        }
        // Never fence a task in flight: a running run is asked to pause at its executor's next
        // durable point (a schema without requests pauses it at once).
        if let (RunAction::Pause, RunStatus::Running, Some(request)) =
            (action, run.status, &self.sql.request_pause)
        {
            let params = params![id, actor.clone(), now];
            if let Some(doc) = self.fetch_text(On::Tx(&mut tx), request, &params).await? {
                let run = decode::run_from_json(&doc)?;
                return self.commit_answer(tx, "act", run).await;
            }
        }
        let transition = action.transition(now, actor);
        match self
            .transition_in(&mut tx, id, run.revision, &transition)
            .await?
        {
            Some(doc) => {
                let run = decode::run_from_json(&doc)?;
                self.commit_answer(tx, "act", run).await
            }
            None => {
                drop(tx);
                Err(self.explain_refusal(id, run.revision, transition.to).await)
            }
        }
    }
}
