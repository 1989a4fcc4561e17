//! Forks: the new run and its carried history, in one transaction.

use crate::{CreateOutcome, NewFork, StoreError};

use super::dialect::{Dialect, On};
use super::{SqlStore, binds, decode};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError> {
        if let Some(answer) = self.first_answer("fork_run").await? {
            return Ok(answer);
        }
        let mut tx = self.begin().await?;
        let Some(run) = self.insert_run(On::Tx(&mut tx), &fork.run).await? else {
            // Forked before with the same options: that fork, untouched.
            let existing = self.select_by_reference(On::Tx(&mut tx), &fork.run).await?;
            let outcome = CreateOutcome::Existing(existing);
            return self.commit_answer(tx, "fork_run", outcome).await;
        };
        for entry in &fork.entries {
            let mut entry = entry.clone();
            entry.run_id = run.id;
            self.upsert_entry(On::Tx(&mut tx), run.revision, &entry)
                .await?;
        }
        for sleep in &fork.sleeps {
            let mut sleep = sleep.clone();
            sleep.run_id = run.id;
            let params = binds::put_sleep(&sleep, run.revision, None);
            self.execute(On::Tx(&mut tx), &self.sql.put_sleep, &params)
                .await?;
        }
        for event in &fork.events {
            let mut event = event.clone();
            event.run_id = run.id;
            let data = event.data.as_ref().map(decode::json_text);
            let params = binds::event_slot(&event, data.as_deref(), run.revision);
            self.execute(On::Tx(&mut tx), &self.sql.insert_slot, &params)
                .await?;
        }
        self.commit_answer(tx, "fork_run", CreateOutcome::Created(run))
            .await
    }
}
