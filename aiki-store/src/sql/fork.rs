//! Forks: the new run and its carried history, in one transaction.

use crate::{CreateOutcome, NewFork, StoreError};

use super::dialect::{Dialect, On, params};
use super::{SqlStore, binds};

impl<D: Dialect> SqlStore<D> {
    pub(crate) async fn fork_run(&self, fork: NewFork) -> Result<CreateOutcome, StoreError> {
        let mut tx = self.begin().await?;
        let Some(run) = self.insert_run(On::Tx(&mut tx), &fork.run).await? else {
            // Forked before with the same options: that fork, untouched.
            let existing = self.select_by_reference(On::Tx(&mut tx), &fork.run).await?;
            self.commit(tx).await?;
            return Ok(CreateOutcome::Existing(existing));
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
            let params = binds::put_sleep(&sleep, run.revision);
            self.execute(On::Tx(&mut tx), &self.sql.put_sleep, &params)
                .await?;
        }
        for event in &fork.events {
            let data = event
                .data
                .as_ref()
                .map(|data| serde_json::to_string(data).expect("BUG: JSON serializes"));
            let params = params![
                run.id,
                event.name.as_str(),
                i64::from(event.index),
                data,
                event.timed_out,
                &event.reference_id,
                event.received_at,
            ];
            self.execute(On::Tx(&mut tx), &self.sql.copy_event, &params)
                .await?;
        }
        self.commit(tx).await?;
        Ok(CreateOutcome::Created(run))
    }
}
