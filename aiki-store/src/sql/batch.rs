//! The SQL stores' [`EntryWriter`]: a batch of entry writes in one statement, and (only when
//! some were refused) one more that reads their runs to say why.

use std::collections::HashSet;
use std::sync::Arc;

use crate::StoreError;
use crate::batch::{EntryWriter, Pending, duplicate};

/// One write of a batch as the SQL statements read it (a JSON array of these).
#[derive(serde::Serialize)]
pub(crate) struct Row<'a> {
    run_id: String,
    address: &'a str,
    idx: i64,
    kind: &'static str,
    status: &'static str,
    output: Option<String>,
    fingerprint: Option<&'a str>,
    attempts: i64,
    error_kind: Option<&'a str>,
    error_message: Option<&'a str>,
    retry_at: Option<i64>,
    updated_at: i64,
    expected: i64,
    input: Option<String>,
}

/// The JSON array of a batch's rows.
pub(crate) fn rows_json(batch: &[Pending]) -> String {
    let rows: Vec<Row<'_>> = batch
        .iter()
        .map(|pending| {
            let entry = &pending.entry;
            Row {
                run_id: entry.run_id.to_string(),
                address: &entry.address,
                idx: i64::from(entry.index),
                kind: entry.kind.as_str(),
                status: entry.status.as_str(),
                output: entry.output.as_ref().map(super::decode::json_text),
                fingerprint: entry.fingerprint.as_deref(),
                attempts: i64::from(entry.attempts),
                error_kind: entry.error.as_ref().map(|error| error.kind.as_str()),
                error_message: entry.error.as_ref().map(|error| error.message.as_str()),
                retry_at: entry.retry_at,
                updated_at: entry.updated_at,
                expected: super::decode::revision(pending.expected),
                input: entry.input.as_ref().map(super::decode::json_text),
            }
        })
        .collect();
    serde_json::to_string(&rows).expect("BUG: entry rows serialize")
}

/// The writes of a batch that the statement did not write (its `RETURNING` rows are
/// `written`): their indexes in the batch, and their run ids.
pub(crate) fn refused(
    batch: &[Pending],
    written: &[(String, String, i64)],
) -> (Vec<usize>, Vec<String>) {
    let written: HashSet<(&str, &str, i64)> = written
        .iter()
        .map(|(run_id, address, idx)| (run_id.as_str(), address.as_str(), *idx))
        .collect();
    let mut ids = Vec::new();
    let refused: Vec<usize> = batch
        .iter()
        .enumerate()
        .filter(|(_, pending)| {
            let entry = &pending.entry;
            let id = entry.run_id.to_string();
            let hit =
                written.contains(&(id.as_str(), entry.address.as_str(), i64::from(entry.index)));
            if !hit {
                ids.push(id);
            }
            !hit
        })
        .map(|(index, _)| index)
        .collect();
    (refused, ids)
}

/// What the store holds of a run whose entry write was refused: its revision, and whether a
/// pause is requested of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunState {
    /// The run id, as text.
    pub(crate) id: String,
    /// Its revision.
    pub(crate) revision: i64,
    /// A pause is requested.
    pub(crate) pause_requested: bool,
}

/// Every write's outcome: `Ok` unless refused, in which case its run's state (read after the
/// statement) explains why: another revision, or, for a new attempt, a pause requested.
pub(crate) fn outcomes(
    batch: &[Pending],
    refused: &[usize],
    runs: &[RunState],
) -> Vec<Result<(), StoreError>> {
    let mut outcomes: Vec<Result<(), StoreError>> = batch.iter().map(|_| Ok(())).collect();
    for &index in refused {
        let entry = &batch[index].entry;
        let id = entry.run_id.to_string();
        let state = runs.iter().find(|run| run.id == id);
        let expected = batch[index].expected;
        outcomes[index] = Err(match state {
            Some(run)
                if run.revision == super::decode::revision(expected)
                    && run.pause_requested
                    && entry.status == crate::EntryStatus::Running =>
            {
                StoreError::PauseRequested {
                    run_id: entry.run_id,
                }
            }
            _ => super::decode::check_failed(entry.run_id, expected, state.map(|run| run.revision)),
        });
    }
    outcomes
}

/// The outcomes of a batch whose refused writes could not be explained (reading their runs'
/// revisions failed): the written ones succeeded, the refused ones get that error.
pub(crate) fn refused_with(
    batch: &[Pending],
    refused: &[usize],
    error: StoreError,
) -> Vec<Result<(), StoreError>> {
    let mut outcomes: Vec<Result<(), StoreError>> = batch.iter().map(|_| Ok(())).collect();
    for &index in refused {
        outcomes[index] = Err(duplicate(&error));
    }
    outcomes
}

/// The group-commit writer of a SQL store: a batch in one statement, and (only when some
/// writes were refused) one more that reads their runs' revisions to explain why.
#[derive(Clone, Debug)]
pub(crate) struct Entries<D> {
    pub(crate) dialect: D,
    pub(crate) sql: Arc<super::statements::Statements>,
    pub(crate) statements: Arc<super::StatementCounter>,
}

impl<D: super::Dialect> EntryWriter for Entries<D> {
    async fn write(&self, batch: &[Pending]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        use super::dialect::{On, Param};
        self.statements.add(1);
        let rows = rows_json(batch);
        let written = self
            .dialect
            .fetch(
                On::Write,
                &self.sql.own.upsert_entries,
                &[Param::Text(Some(&rows))],
            )
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.text(0)?.unwrap_or_default(),
                    row.text(1)?.unwrap_or_default(),
                    row.int(2)?.unwrap_or_default(),
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let (refused, ids) = refused(batch, &written);
        if ids.is_empty() {
            return Ok(outcomes(batch, &refused, &[]));
        }
        self.statements.add(1);
        let revisions = self
            .dialect
            .fetch(On::Write, &self.sql.own.revisions_of, &[Param::List(ids)])
            .await
            .and_then(|rows| {
                rows.iter()
                    .map(|row| {
                        Ok(RunState {
                            id: row.text(0)?.unwrap_or_default(),
                            revision: row.int(1)?.unwrap_or_default(),
                            pause_requested: row.int(2)? == Some(1),
                        })
                    })
                    .collect::<Result<Vec<_>, StoreError>>()
            });
        Ok(match revisions {
            Ok(revisions) => outcomes(batch, &refused, &revisions),
            Err(error) => refused_with(batch, &refused, error),
        })
    }
}
