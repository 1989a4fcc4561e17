//! The operations of the [`Store`](crate::Store) contract, written once for both databases
//! (claims are in `claims`, transitions in `transitions`, the operator's actions in
//! `actions`). Each is one statement or one transaction; their costs in statements are pinned
//! by the backends' tests.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{
    AppendOutcome, ChangeFacts, CreateOutcome, EntryRecord, EventRecord, History, Lease, Millis,
    Namespace, NewEvent, NewRun, RunCounts, RunId, RunRecord, RunStatus, SleepRecord, StatusChange,
    StoreError,
};

use super::decode;
use super::dialect::{Dialect, On, Tx, params};
use super::starts::Started;
use super::{SqlStore, binds};

impl<D: Dialect> SqlStore<D> {
    /// Inserts a run unless its namespace and reference id name one already.
    pub(super) async fn insert_run(
        &self,
        on: On<'_, Tx<D>>,
        run: &NewRun,
    ) -> Result<Option<RunRecord>, StoreError> {
        self.insert_run_by(on, &self.sql.insert_run, run).await
    }

    /// Inserts a run with `sql`, the statement `insert_run` or a variant of it.
    pub(super) async fn insert_run_by(
        &self,
        on: On<'_, Tx<D>>,
        sql: &str,
        run: &NewRun,
    ) -> Result<Option<RunRecord>, StoreError> {
        let doc = self.fetch_text(on, sql, &binds::insert_run(run)).await?;
        doc.map(|doc| decode::run_from_json(&doc)).transpose()
    }

    /// The run holding a new run's namespace and reference id.
    pub(super) async fn select_by_reference(
        &self,
        on: On<'_, Tx<D>>,
        run: &NewRun,
    ) -> Result<RunRecord, StoreError> {
        let doc = self
            .fetch_text(on, &self.sql.select_by_reference, &binds::by_reference(run))
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                message: format!(
                    "the run holding reference id {:?} in {} vanished while starting another",
                    run.reference_id, run.namespace
                ),
            })?;
        decode::run_from_json(&doc)
    }

    /// Upserts an entry if its run has revision `expected`; whether it was written.
    pub(super) async fn upsert_entry(
        &self,
        on: On<'_, Tx<D>>,
        expected: u64,
        entry: &EntryRecord,
    ) -> Result<bool, StoreError> {
        let written = self
            .execute(
                on,
                &self.sql.upsert_entry,
                &binds::upsert_entry(expected, entry),
            )
            .await?;
        Ok(written == 1)
    }

    pub(crate) async fn create_run(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        // Group commit: concurrent starts share one statement (see `starts`). A repeat of an
        // operation (which may find its answer) starts alone.
        let answer = match self.answered_operation() {
            Some(_) if !crate::operation::is_fresh() => return self.create_run_alone(run).await,
            Some(id) => Some((
                crate::operation::key(&id, "create_run"),
                crate::operation::asked(),
            )),
            None => None,
        };
        let outcome = match self.starts.insert(run, answer).await? {
            Started::Created(created) => CreateOutcome::Created(created),
            Started::Answered(outcome) => outcome,
            Started::Taken(run) => {
                return Ok(CreateOutcome::Existing(
                    self.select_by_reference(On::Write, &run).await?,
                ));
            }
            Started::Alone(run) => return self.create_run_alone(run).await,
        };
        if let CreateOutcome::Created(created) = &outcome {
            self.hint_started(created).await;
        }
        Ok(outcome)
    }

    /// Starts `run` in statements of its own: in a transaction that records its answer when an
    /// operation is in scope.
    async fn create_run_alone(&self, run: NewRun) -> Result<CreateOutcome, StoreError> {
        if self.answers_in_scope() {
            if let Some(answer) = self.first_answer("create_run").await? {
                return Ok(answer);
            }
            let mut tx = self.begin().await?;
            let outcome = match self.insert_started(On::Tx(&mut tx), &run).await? {
                Some(created) => CreateOutcome::Created(created),
                None => {
                    CreateOutcome::Existing(self.select_by_reference(On::Tx(&mut tx), &run).await?)
                }
            };
            let outcome = self.commit_answer(tx, "create_run", outcome).await?;
            if let CreateOutcome::Created(created) = &outcome {
                self.hint_started(created).await;
            }
            return Ok(outcome);
        }
        if let Some(created) = self.insert_started(On::Write, &run).await? {
            self.hint_started(&created).await;
            return Ok(CreateOutcome::Created(created));
        }
        Ok(CreateOutcome::Existing(
            self.select_by_reference(On::Write, &run).await?,
        ))
    }

    pub(crate) async fn get_run(&self, id: RunId) -> Result<RunRecord, StoreError> {
        let doc = self
            .fetch_text(On::Read, &self.sql.get_run, &[id.into()])
            .await?;
        decode::run_from_json(&doc.ok_or_else(|| StoreError::run_not_found(id))?)
    }

    pub(crate) async fn load_history(&self, id: RunId) -> Result<History, StoreError> {
        // One statement: one snapshot, one round trip.
        let mut row = self
            .fetch_optional(On::Read, &self.sql.load_history, &[id.into()])
            .await?
            .unwrap_or_default();
        decode::history_from_json(
            id,
            row.take_text(0)?,
            row.take_text(1)?,
            row.take_text(2)?,
            row.take_text(3)?,
            row.take_text(4)?,
        )
    }

    pub(crate) async fn put_entry(
        &self,
        expected: u64,
        entry: EntryRecord,
    ) -> Result<(), StoreError> {
        // Group commit: concurrent calls share one statement (see `batch`).
        self.entries.put(expected, entry).await
    }

    pub(crate) async fn start_child(
        &self,
        expected: u64,
        mut entry: EntryRecord,
        child: NewRun,
    ) -> Result<RunRecord, StoreError> {
        if let Some(answer) = self.first_answer("start_child").await? {
            return Ok(answer);
        }
        let mut tx = self.begin().await?;
        entry.output = Some(Value::String(child.id.to_string()));
        // No child starts while a pause is requested, as no task attempt does.
        let written = self
            .execute(
                On::Tx(&mut tx),
                &self.sql.upsert_child_entry,
                &binds::upsert_entry(expected, &entry),
            )
            .await?;
        if written != 1 {
            return Err(
                match self
                    .check_failed(On::Tx(&mut tx), entry.run_id, expected)
                    .await
                {
                    // The revision was right: the pause request refused the start.
                    StoreError::RevisionConflict {
                        run_id,
                        expected,
                        actual,
                    } if actual == expected => StoreError::PauseRequested { run_id },
                    error => error,
                },
            );
        }
        let (run, created) = match self.insert_started(On::Tx(&mut tx), &child).await? {
            Some(created) => (created, true),
            None => {
                let existing = self.select_by_reference(On::Tx(&mut tx), &child).await?;
                entry.output = Some(Value::String(existing.id.to_string()));
                self.upsert_entry(On::Tx(&mut tx), expected, &entry).await?;
                (existing, false)
            }
        };
        let run = self.commit_answer(tx, "start_child", run).await?;
        if created {
            self.hint_started(&run).await;
        }
        Ok(run)
    }

    pub(crate) async fn put_sleep(
        &self,
        expected: u64,
        mut sleep: SleepRecord,
        from: Option<Millis>,
    ) -> Result<SleepRecord, StoreError> {
        let written = self
            .fetch_optional(
                On::Write,
                &self.sql.put_sleep,
                &binds::put_sleep(&sleep, expected, from),
            )
            .await?;
        let Some(row) = written else {
            return Err(self.check_failed(On::Write, sleep.run_id, expected).await);
        };
        sleep.wake_at = row.int(0)?.unwrap_or(sleep.wake_at);
        Ok(sleep)
    }

    pub(crate) async fn append_event(
        &self,
        mut event: NewEvent,
    ) -> Result<AppendOutcome, StoreError> {
        event.check_name()?;
        if let Some(answer) = self.first_answer("append_event").await? {
            return Ok(answer);
        }
        let mut tx = self.begin().await?;
        // Locking the run (PostgreSQL; SQLite's transaction holds the write lock) serializes
        // index assignment per run, and makes the wake-up see the run's latest status.
        let (locked, status) = loop {
            let locked = self
                .fetch_optional(
                    On::Tx(&mut tx),
                    &self.sql.lock_status,
                    &[event.run_id.into()],
                )
                .await?
                .ok_or_else(|| StoreError::run_not_found(event.run_id))?;
            let status: crate::RunStatus =
                locked
                    .text(0)?
                    .unwrap_or_default()
                    .parse()
                    .map_err(|error| StoreError::Corrupt {
                        message: format!("{error}"),
                    })?;
            // A run that continued as new hands its events on to its successor.
            match self.successor_of(&mut tx, event.run_id, status).await? {
                Some(next) => event.run_id = next,
                None => break (locked, status),
            }
        };
        if status.is_terminal() {
            return Err(StoreError::InvalidTransition {
                run_id: event.run_id,
                from: status,
                to: crate::RunStatus::Queued,
            });
        }
        let wait = locked
            .text(1)?
            .map(|text| decode::wait_set(event.run_id, &text))
            .transpose()?;
        let wakes = crate::WaitSpec::woken_by_event(status, wait.as_ref());
        let data = decode::json_text(&event.data);
        let params = binds::event(&event, &data, wakes);
        let inserted = self
            .fetch_optional(On::Tx(&mut tx), &self.sql.own.insert_event, &params)
            .await?;
        let index = inserted.map(|row| row.int(0)).transpose()?.flatten();
        let wake_apart = !self.sql.own.insert_event_wakes;
        if index.is_some() && wake_apart && wakes {
            self.execute(On::Tx(&mut tx), &self.sql.wake_for_event, &params)
                .await?;
        }
        let outcome = match index {
            None => AppendOutcome::Duplicate,
            Some(index) => AppendOutcome::Appended {
                index: u32::try_from(index).map_err(|_| StoreError::Corrupt {
                    message: format!("event index {index} is out of range"),
                })?,
                woke: wakes,
            },
        };
        self.commit_answer(tx, "append_event", outcome).await
    }

    pub(crate) async fn record_event_slot(
        &self,
        expected: u64,
        slot: EventRecord,
    ) -> Result<EventRecord, StoreError> {
        let id = slot.run_id;
        let data = slot.data.as_ref().map(decode::json_text);
        let inserted = self
            .execute(
                On::Write,
                &self.sql.insert_slot,
                &binds::event_slot(&slot, data.as_deref(), expected),
            )
            .await?;
        if inserted == 1 {
            return Ok(slot);
        }
        let mut row = self
            .fetch_optional(
                On::Write,
                &self.sql.event_slot,
                &params![id, slot.name.as_str(), i64::from(slot.index)],
            )
            .await?
            .unwrap_or_default();
        let actual = row.int(0)?;
        let held = row.take_text(1)?;
        decode::slot_outcome(id, expected, actual, held)
    }

    pub(crate) async fn wake_due(
        &self,
        lease: &Lease,
        now: Millis,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let params = self.fenced(&params![now, i64::from(limit)], lease);
        self.execute(On::Write, &self.sql.wake_due, &params).await
    }

    pub(crate) async fn release_stale_claims(
        &self,
        lease: &Lease,
        now: Millis,
        timing: crate::ClaimTiming,
        limit: u32,
    ) -> Result<Vec<RunId>, StoreError> {
        let params = self.fenced(
            &params![
                now,
                timing.idle_timeout_ms,
                timing.confirm_ms,
                i64::from(limit),
                timing.marks_trusted_since
            ],
            lease,
        );
        // The previous release's one phase binds no trust (`$5`): it has no marks.
        let one_phase = if self.level.operations {
            &params[..]
        } else {
            &params[..4]
        };
        let rows = self
            .fetch(On::Write, &self.sql.release_stale, one_phase)
            .await?;
        if let Some(mark) = &self.sql.mark_stale {
            self.execute(On::Write, mark, &params).await?;
        }
        let ids = rows
            .iter()
            .map(|row| Ok(row.text(0)?.unwrap_or_default()))
            .collect::<Result<Vec<_>, StoreError>>()?;
        decode::parse_ids(&ids)
    }

    pub(crate) async fn run_counts(&self) -> Result<Vec<RunCounts>, StoreError> {
        let rows = self.fetch(On::Read, &self.sql.run_counts, &[]).await?;
        let mut counts: BTreeMap<(String, String), RunCounts> = BTreeMap::new();
        for row in rows {
            let (workflow, version) = (
                row.text(0)?.unwrap_or_default(),
                row.text(1)?.unwrap_or_default(),
            );
            let entry = counts
                .entry((workflow.clone(), version.clone()))
                .or_insert_with(|| RunCounts::new(Namespace::new(workflow, version)));
            match row.text(2)? {
                Some(status) => {
                    let status: RunStatus =
                        status.parse().map_err(|error| StoreError::Incompatible {
                            message: format!("counting runs: {error}"),
                        })?;
                    let count = u64::try_from(row.int(3)?.unwrap_or_default()).unwrap_or(0);
                    entry.record(status, count);
                }
                None => entry.oldest_queued_at = row.int(4)?,
            }
        }
        Ok(counts.into_values().collect())
    }

    pub(crate) async fn timeline(&self, id: RunId) -> Result<Vec<StatusChange>, StoreError> {
        let rows = self
            .fetch(On::Read, &self.sql.timeline, &[id.into()])
            .await?;
        if rows.is_empty() {
            // No run, or one created before the store kept a timeline.
            self.get_run(id).await?;
        }
        let status = |text: Option<String>| -> Result<Option<RunStatus>, StoreError> {
            text.map(|text| {
                text.parse().map_err(|error| StoreError::Incompatible {
                    message: format!("the timeline of run {id}: {error}"),
                })
            })
            .transpose()
        };
        rows.into_iter()
            .map(|row| {
                let from = status(row.text(1)?)?;
                let to = status(row.text(2)?)?.ok_or_else(|| StoreError::Corrupt {
                    message: format!("a change in the timeline of run {id} has no status"),
                })?;
                let cause = row
                    .text(6)?
                    .map(|cause| {
                        cause.parse().map_err(|message| StoreError::Incompatible {
                            message: format!("the timeline of run {id}: {message}"),
                        })
                    })
                    .transpose()?;
                let error_kind = row.text(8)?;
                // Rows written before the timeline kept facts hold their words instead.
                let reason = match row.int(7)? {
                    Some(retry) => {
                        let facts = ChangeFacts::default()
                            .cause(cause)
                            .retry(retry != 0)
                            .error_kind(error_kind.as_deref())
                            .by_actor(row.text(4)?.is_some());
                        StatusChange::reason_for(from, to, &facts)
                    }
                    None => row.text(3)?.unwrap_or_default(),
                };
                Ok(StatusChange {
                    run_id: id,
                    revision: decode::unsigned(row.int(0)?.unwrap_or_default(), "revision")?,
                    from,
                    to,
                    reason,
                    cause,
                    error_kind,
                    actor: row.text(4)?,
                    at: row.int(5)?.unwrap_or_default(),
                })
            })
            .collect()
    }

    pub(crate) async fn stall_undelivered(
        &self,
        lease: &Lease,
        now: Millis,
        max_age_ms: i64,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let params = self.fenced(
            &params![now, now.saturating_sub(max_age_ms), i64::from(limit)],
            lease,
        );
        self.execute(On::Write, &self.sql.stall, &params).await
    }
}
