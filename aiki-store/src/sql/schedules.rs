//! Schedules on both SQL databases: one row per schedule (the record as JSON beside the
//! columns the sweep selects on) and the schedules' log, unique by (schedule, key); each write
//! of [`crate::schedule`] is one transaction.

use super::dialect::Row;
use super::statements::{fence, status_list};
use super::{Dialect, On, SqlStore, Tx, decode, params};
use crate::schedule::{
    ATTEMPTS, Declared, MAX_LOG_ROWS, acted, busy, check_declared, exists_otherwise, plan_absent,
    plan_action, plan_create, plan_declared,
};
use crate::{
    DueSchedule, Lease, Millis, RunAction, RunStatus, ScheduleActed, ScheduleAction,
    ScheduleCreated, ScheduleLogEntry, ScheduleRecord, ScheduleWrite, StoreError,
};

/// The columns of a schedule read with whether its last run is open (`s`, its last run `r`).
fn read_columns() -> String {
    format!(
        "s.record, s.revision, (CASE WHEN r.id IS NOT NULL AND r.status NOT IN {terminal} \
         THEN 1 ELSE 0 END)::bigint",
        terminal = status_list(RunStatus::is_terminal)
    )
}

impl<D: Dialect> SqlStore<D> {
    /// `sql` for this dialect, or the refusal of a schema without schedules.
    fn schedule_statement(&self, sql: &str) -> Result<String, StoreError> {
        if !self.level.schedules {
            return Err(StoreError::Invalid {
                message: "schedules need the schedule tables of this release's schema; migrate \
                          the store first (`aiki migrate`)"
                    .to_owned(),
            });
        }
        Ok((D::DRIVER.render)(sql))
    }

    pub(crate) async fn schedules(&self) -> Result<Vec<ScheduleRecord>, StoreError> {
        if !self.level.schedules {
            return Ok(Vec::new());
        }
        let sql = self.schedule_statement(&format!(
            "SELECT {read} FROM aiki_schedules s LEFT JOIN aiki_runs r ON r.id = s.last_run \
             ORDER BY s.name",
            read = read_columns()
        ))?;
        let rows = self.fetch(On::Read, &sql, &[]).await?;
        rows.iter().map(|row| Ok(due(row)?.record)).collect()
    }

    pub(crate) async fn schedule(&self, name: &str) -> Result<ScheduleRecord, StoreError> {
        Ok(self
            .read_due(name)
            .await?
            .ok_or_else(|| crate::schedule::not_found(name))?
            .record)
    }

    async fn read_due(&self, name: &str) -> Result<Option<DueSchedule>, StoreError> {
        let sql = self.schedule_statement(&format!(
            "SELECT {read} FROM aiki_schedules s LEFT JOIN aiki_runs r ON r.id = s.last_run \
             WHERE s.name = $1",
            read = read_columns()
        ))?;
        self.fetch_optional(On::Read, &sql, &params![name])
            .await?
            .map(|row| due(&row))
            .transpose()
    }

    pub(crate) async fn schedule_log(
        &self,
        name: &str,
        limit: u32,
    ) -> Result<Vec<ScheduleLogEntry>, StoreError> {
        let sql = self.schedule_statement(
            "SELECT l.entry, s.name FROM aiki_schedules s LEFT JOIN \
             (SELECT seq, entry FROM aiki_schedule_log WHERE schedule = $1 \
              ORDER BY seq DESC LIMIT $2) l ON true WHERE s.name = $1 ORDER BY l.seq",
        )?;
        let rows = self
            .fetch(On::Read, &sql, &params![name, i64::from(limit)])
            .await?;
        if rows.is_empty() {
            return Err(crate::schedule::not_found(name));
        }
        rows.iter()
            .filter_map(|row| row.text(0).transpose())
            .map(|text| json(&text?, "a schedule's log row"))
            .collect()
    }

    pub(crate) async fn due_schedules(
        &self,
        now: Millis,
        limit: u32,
    ) -> Result<Vec<DueSchedule>, StoreError> {
        if !self.level.schedules {
            return Ok(Vec::new());
        }
        let sql = self.schedule_statement(&format!(
            "SELECT {read} FROM aiki_schedules s LEFT JOIN aiki_runs r ON r.id = s.last_run \
             WHERE s.status = 'active' AND (s.fire_at <= $1 OR (s.buffered_at IS NOT NULL \
             AND (r.id IS NULL OR r.status IN {terminal}))) \
             ORDER BY s.fire_at LIMIT $2",
            read = read_columns(),
            terminal = status_list(RunStatus::is_terminal),
        ))?;
        let rows = self
            .fetch(On::Read, &sql, &params![now, i64::from(limit)])
            .await?;
        // A row this release cannot read (a newer release's) is left for that release.
        Ok(rows
            .iter()
            .filter_map(|row| {
                due(row)
                    .inspect_err(|error| tracing::error!(%error, "a schedule is not readable"))
                    .ok()
            })
            .collect())
    }

    /// The sweep's write, fenced by `lease`, in one transaction; whether it was written.
    pub(crate) async fn advance_schedule(
        &self,
        lease: &Lease,
        write: ScheduleWrite,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        if !self.write_in(&mut tx, Some(lease), write).await? {
            return Ok(false);
        }
        self.commit(tx).await?;
        Ok(true)
    }

    pub(crate) async fn create_schedule(
        &self,
        record: ScheduleRecord,
        actor: Option<String>,
    ) -> Result<ScheduleCreated, StoreError> {
        crate::schedule::check(&record.name, &record.definition)?;
        if let Some(answer) = self.first_answer("create_schedule").await? {
            return Ok(answer);
        }
        for _ in 0..ATTEMPTS {
            if let Some(found) = self.read_due(&record.name).await? {
                if found.record.definition == record.definition {
                    return Ok(ScheduleCreated::Existing(found.record));
                }
                return Err(exists_otherwise(&found.record));
            }
            let write = plan_create(record.clone(), actor.clone());
            let created = ScheduleCreated::Created(write.record.clone());
            let mut tx = self.begin().await?;
            if self.write_in(&mut tx, None, write).await? {
                return self.commit_answer(tx, "create_schedule", created).await;
            }
        }
        Err(busy(&record.name))
    }

    /// An operator's action: read, decided by [`crate::schedule`], written by compare-and-set
    /// with the operation's first answer (read again and retried when another write came
    /// first).
    pub(crate) async fn act_on_schedule(
        &self,
        name: &str,
        action: ScheduleAction,
        actor: Option<String>,
        now: Millis,
    ) -> Result<ScheduleActed, StoreError> {
        if let Some(answer) = self.first_answer("act_on_schedule").await? {
            return Ok(answer);
        }
        for _ in 0..ATTEMPTS {
            let due = self
                .read_due(name)
                .await?
                .ok_or_else(|| crate::schedule::not_found(name))?;
            let mut tx = self.begin().await?;
            if action == ScheduleAction::Delete {
                let answer = ScheduleActed {
                    schedule: due.record.clone(),
                    runs: Vec::new(),
                    log: Vec::new(),
                };
                if self.remove_in(&mut tx, name, due.record.revision).await? {
                    return self.commit_answer(tx, "act_on_schedule", answer).await;
                }
                continue;
            }
            let write = plan_action(&due, &action, actor.clone(), now)?;
            let answer = acted(&write);
            if self.write_in(&mut tx, None, write).await? {
                return self.commit_answer(tx, "act_on_schedule", answer).await;
            }
        }
        Err(busy(name))
    }

    pub(crate) async fn declare_schedules(
        &self,
        declared: Vec<ScheduleRecord>,
        serves: Vec<crate::Namespace>,
        worker: &str,
        now: Millis,
    ) -> Result<Vec<Declared>, StoreError> {
        check_declared(&declared)?;
        let mut outcomes = Vec::new();
        for record in &declared {
            outcomes.push(self.declare_one(record, worker, now).await?);
        }
        for stored in self.schedules().await? {
            for _ in 0..ATTEMPTS {
                let Some(due) = self.read_due(&stored.name).await? else {
                    break;
                };
                let Some((outcome, write)) = plan_absent(&due, &declared, &serves, worker, now)
                else {
                    break;
                };
                let mut tx = self.begin().await?;
                if self.write_in(&mut tx, None, write).await? {
                    self.commit(tx).await?;
                    outcomes.push(outcome);
                    break;
                }
            }
        }
        Ok(outcomes)
    }

    /// Reconciles one declaration (read again and retried when another write came first).
    async fn declare_one(
        &self,
        record: &ScheduleRecord,
        worker: &str,
        now: Millis,
    ) -> Result<Declared, StoreError> {
        for _ in 0..ATTEMPTS {
            let stored = self.read_due(&record.name).await?;
            let (outcome, write) = plan_declared(stored.as_ref(), record, worker, now);
            let Some(write) = write else {
                return Ok(outcome);
            };
            let mut tx = self.begin().await?;
            if self.write_in(&mut tx, None, write).await? {
                self.commit(tx).await?;
                return Ok(outcome);
            }
        }
        Err(busy(&record.name))
    }

    /// Writes `write` in `tx` (fenced by `lease` when given); whether it did (`false`: the
    /// transaction is to be dropped, nothing of it kept).
    async fn write_in(
        &self,
        tx: &mut Tx<D>,
        lease: Option<&Lease>,
        mut write: ScheduleWrite,
    ) -> Result<bool, StoreError> {
        let revision = write.expected.map_or(1, |revision| revision + 1);
        write.record.revision = revision;
        let record = to_json(&write.record)?;
        let record_params = params![
            write.record.name.as_str(),
            record,
            write.record.status.as_str(),
            write.record.fire_at(),
            write.record.buffered_at,
            write.record.last_run.map(|id| id.to_string()),
            i64::try_from(revision).unwrap_or(i64::MAX),
            write.record.id.as_str(),
        ];
        let written = match write.expected {
            None => {
                let sql = self.schedule_statement(
                    "INSERT INTO aiki_schedules \
                     (name, record, status, fire_at, buffered_at, last_run, revision, id) \
                     VALUES ($1, $2, $3, $4, $5, $6::uuid, $7, $8) ON CONFLICT (name) DO NOTHING",
                )?;
                self.execute(On::Tx(tx), &sql, &record_params).await?
            }
            Some(expected) => {
                let mut all = record_params.to_vec();
                all.extend(params![i64::try_from(expected).unwrap_or(i64::MAX)]);
                // The sweep's write is fenced by its lease at its `now` ($10).
                let fenced = match lease {
                    Some(lease) => {
                        all.extend(params![write.record.updated_at]);
                        all = self.fenced(&all, lease);
                        fence(&self.dialect, self.level, "$10", 11)
                    }
                    None => String::new(),
                };
                let sql = self.schedule_statement(&format!(
                    "UPDATE aiki_schedules SET record = $2, status = $3, fire_at = $4, \
                     buffered_at = $5, last_run = $6::uuid, revision = $7 \
                     WHERE name = $1 AND id = $8 AND revision = $9{fenced}"
                ))?;
                self.execute(On::Tx(tx), &sql, &all).await?
            }
        };
        if written == 0 {
            return Ok(false);
        }
        let insert_row = self.schedule_statement(
            "INSERT INTO aiki_schedule_log (schedule, key, run_id, entry) \
             VALUES ($1, $2, $3::uuid, $4) ON CONFLICT (schedule, key) DO NOTHING",
        )?;
        for row in &write.log {
            let entry = to_json(row)?;
            let params = params![
                row.schedule.as_str(),
                row.key.as_str(),
                row.run_id.map(|id| id.to_string()),
                entry,
            ];
            if self.execute(On::Tx(tx), &insert_row, &params).await? == 0 {
                return Ok(false);
            }
        }
        if !write.log.is_empty() {
            // The log keeps its newest rows: those past the bound go. `seq + 0` keeps
            // PostgreSQL's generic plan from walking every schedule's rows down the primary
            // key to find this one's: it reads this schedule's (at most the bound and one
            // write) by the (schedule, key) index and sorts them.
            let trim = self.schedule_statement(
                "DELETE FROM aiki_schedule_log WHERE schedule = $1 AND seq <= \
                 (SELECT seq FROM aiki_schedule_log WHERE schedule = $1 \
                  ORDER BY seq + 0 DESC LIMIT 1 OFFSET $2)",
            )?;
            let keep = i64::try_from(MAX_LOG_ROWS).unwrap_or(i64::MAX);
            let params = params![write.record.name.as_str(), keep];
            self.execute(On::Tx(tx), &trim, &params).await?;
        }
        if let Some(id) = write.cancel {
            // The run locked before it is read, as an operator's cancel does, so that what is
            // checked is what is written over.
            if let Some((_, lock_run)) = &self.sql.own.lock_first {
                self.execute(On::Tx(tx), lock_run, &[id.into()]).await?;
            }
            let doc = self
                .fetch_text(On::Tx(tx), &self.sql.get_run, &[id.into()])
                .await?;
            if let Some(doc) = doc {
                let run = decode::run_from_json(&doc)?;
                if RunAction::Cancel.applies_to(run.status) {
                    let actor = Some(format!("schedule {}", write.record.name));
                    let transition = RunAction::Cancel.transition(write.record.updated_at, actor);
                    // A run its executor moved meanwhile is left as it is.
                    self.transition_in(tx, id, run.revision, &transition)
                        .await?;
                }
            }
        }
        for run in &write.runs {
            if self.insert_run(On::Tx(tx), run).await?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Removes the schedule and its log in `tx` if its revision is `expected`.
    async fn remove_in(
        &self,
        tx: &mut Tx<D>,
        name: &str,
        expected: u64,
    ) -> Result<bool, StoreError> {
        let sql = self
            .schedule_statement("DELETE FROM aiki_schedules WHERE name = $1 AND revision = $2")?;
        let params = params![name, i64::try_from(expected).unwrap_or(i64::MAX)];
        if self.execute(On::Tx(tx), &sql, &params).await? == 0 {
            return Ok(false);
        }
        let sql = self.schedule_statement("DELETE FROM aiki_schedule_log WHERE schedule = $1")?;
        self.execute(On::Tx(tx), &sql, &params![name]).await?;
        Ok(true)
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| StoreError::Invalid {
        message: format!("a schedule cannot be written: {error}"),
    })
}

fn json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|error| StoreError::Corrupt {
        message: format!("{what} cannot be read: {error}"),
    })
}

/// A row of [`read_columns`].
fn due(row: &Row) -> Result<DueSchedule, StoreError> {
    let mut record: ScheduleRecord = json(&row.text(0)?.unwrap_or_default(), "a schedule")?;
    record.revision = u64::try_from(row.int(1)?.unwrap_or_default()).unwrap_or_default();
    Ok(DueSchedule {
        record,
        previous_open: row.int(2)?.unwrap_or_default() != 0,
    })
}
