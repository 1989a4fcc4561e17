//! Group commit for starts: the runs that callers start while a start's statement is in
//! flight are inserted together by the next one, as entry writes are (see [`crate::batch`]).
//!
//! A child's start, which writes its parent's entry in its transaction, does not take this
//! path. Nothing waits to fill a batch: a lone start is the single-row statement it always was,
//! so its latency does not change. A batch skips the runs whose namespace and reference id are
//! taken, by a stored run or by an earlier run of the same batch, as the single-row statement
//! does; their callers then read the run holding it. A start that records its operation's
//! answer (through a server) is batched in a transaction that inserts the runs, reads the
//! holders of taken reference ids and records every answer; if a repeat of one of those
//! operations recorded its answer first, or the database refuses something in the batch, the
//! transaction is rolled back and each caller starts its run alone, as before. Each caller's
//! start is durable when its call returns.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::batch::{Lane, answer_all};
use crate::{CreateOutcome, NewRun, RunRecord, StoreError};

use super::dialect::{Dialect, On, Param, Row, Tx};
use super::statements::{Level, RUN_PARAMS, insert_runs, run_doc};
use super::{StatementCounter, binds, decode};

/// The runs one statement inserts at most.
pub(crate) const MAX_STARTS: usize = 1 << (SIZES - 1);

/// How many sizes a batch takes: a power of two up to [`MAX_STARTS`]. Each size is a statement
/// of its own, and the drivers keep 100 prepared statements per connection; with any size up to
/// 32, the 64 statements of the batches would push the hot path's own out of them.
const SIZES: usize = 6;

/// A start waiting for its batch: the run, the key of its operation's answer when it records
/// one (and the digest of the request it answers, if known), and where its outcome goes.
struct Queued {
    run: NewRun,
    answer: Option<(String, Option<String>)>,
    reply: oneshot::Sender<Result<Started, StoreError>>,
}

/// What became of a start in its batch.
#[derive(Debug)]
pub(crate) enum Started {
    /// The run, inserted.
    Created(RunRecord),
    /// Not inserted: its namespace and reference id are taken; the caller reads the run
    /// holding them. The run, given back.
    Taken(NewRun),
    /// The outcome, committed with the operation's answer.
    Answered(CreateOutcome),
    /// Nothing written: the caller starts the run alone. The run, given back.
    Alone(NewRun),
}

/// The front of a store's starts: one statement in flight, every start queued meanwhile in the
/// next.
#[derive(Debug)]
pub(crate) struct StartBatcher<D> {
    writer: Starts<D>,
    lane: Lane<Queued>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued").field("run", &self.run.id).finish()
    }
}

impl<D: Dialect> StartBatcher<D> {
    /// A batcher inserting runs for a schema at `level` over `dialect`, with the statement
    /// that leaves ready hints to the store when `quiet`.
    pub(crate) fn new(
        dialect: D,
        level: Level,
        quiet: bool,
        statements: Arc<StatementCounter>,
        by_reference: &str,
    ) -> Self {
        let by_reference = Arc::from(by_reference);
        StartBatcher {
            writer: Starts {
                dialect,
                level,
                quiet,
                statements,
                inserts: Arc::new(std::array::from_fn(|_| OnceLock::new())),
                answers: Arc::new(std::array::from_fn(|_| OnceLock::new())),
                by_reference,
            },
            lane: Lane::default(),
        }
    }

    /// Inserts `run` with the starts queued beside it, and records `answer` (a serialized
    /// [`CreateOutcome`] under this key, with this request digest) with it when set.
    pub(crate) async fn insert(
        &self,
        run: NewRun,
        answer: Option<(String, Option<String>)>,
    ) -> Result<Started, StoreError> {
        let (reply, outcome) = oneshot::channel();
        let queued = Queued { run, answer, reply };
        if self
            .lane
            .send(queued, |queue| drain(self.writer.clone(), queue))
            .is_err()
        {
            return Err(writer_stopped());
        }
        outcome.await.unwrap_or_else(|_| Err(writer_stopped()))
    }

    /// Lets the task end once the starts already queued are inserted.
    pub(crate) fn close(&self) {
        self.lane.close();
    }
}

/// The error of a start whose task stopped (its runtime shut down) before answering.
fn writer_stopped() -> StoreError {
    StoreError::Unavailable {
        message: "the start writer stopped before answering (its runtime shut down); the run \
                  may or may not have been started, start it again with the same reference id"
            .to_owned(),
        source: None,
    }
}

/// Inserts batches of runs, one statement each.
#[derive(Clone, Debug)]
struct Starts<D> {
    dialect: D,
    level: Level,
    quiet: bool,
    statements: Arc<StatementCounter>,
    /// The statement inserting `2^n` runs, rendered when first used.
    inserts: Arc<[OnceLock<String>; SIZES]>,
    /// The statement recording `2^n` answers, rendered when first used.
    answers: Arc<[OnceLock<String>; SIZES]>,
    /// The run with `$1` namespace and `$2` reference id.
    by_reference: Arc<str>,
}

impl<D: Dialect> Starts<D> {
    /// The statement inserting `rows` runs, a power of two.
    fn insert_statement(&self, rows: usize) -> &str {
        self.inserts[size_index(rows)].get_or_init(|| {
            let run = run_doc("", self.level);
            (D::DRIVER.render)(&insert_runs(self.level, &run, self.quiet, rows))
        })
    }

    /// The statement recording `rows` answers, a power of two: `$1` the time, then each id and
    /// answer (and the digest of its request, on a schema that keeps them).
    fn answer_statement(&self, rows: usize) -> &str {
        self.answers[size_index(rows)].get_or_init(|| {
            let digests = self.level.answer_digests;
            let per_row = if digests { 3 } else { 2 };
            let values: Vec<String> = (0..rows)
                .map(|row| {
                    let first = per_row * row + 2;
                    if digests {
                        format!("(${first}, ${}, $1, ${})", first + 1, first + 2)
                    } else {
                        format!("(${first}, ${}, $1)", first + 1)
                    }
                })
                .collect();
            (D::DRIVER.render)(&format!(
                "INSERT INTO aiki_operation_answers (id, answer, recorded_at{}) VALUES {} \
                 ON CONFLICT (id) DO NOTHING RETURNING id",
                if digests { ", digest" } else { "" },
                values.join(", ")
            ))
        })
    }

    /// Inserts `runs` in one statement: the document of each one inserted, in any order.
    async fn write(&self, on: On<'_, Tx<D>>, runs: &[Queued]) -> Result<Vec<Row>, StoreError> {
        let binds: Vec<[Param<'_>; RUN_PARAMS]> = runs
            .iter()
            .map(|queued| binds::insert_run(&queued.run))
            .collect();
        let params: Vec<Param<'_>> = binds.into_iter().flatten().collect();
        self.statements.add(1);
        let rows = self
            .dialect
            .fetch(on, self.insert_statement(runs.len()), &params)
            .await?;
        Ok(rows)
    }

    /// Inserts `runs` (some record an answer) in one transaction with their answers; `None`
    /// (nothing written) when one of those operations was answered already.
    async fn write_answered(
        &self,
        runs: &[Queued],
    ) -> Result<Option<Vec<CreateOutcome>>, StoreError> {
        self.statements.add(1);
        let mut tx = self.dialect.begin().await?;
        let mut inserted = decode_all(&self.write(On::Tx(&mut tx), runs).await?)?;
        let mut outcomes = Vec::with_capacity(runs.len());
        for queued in runs {
            outcomes.push(match take(&mut inserted, &queued.run) {
                Some(created) => CreateOutcome::Created(created),
                None => {
                    self.statements.add(1);
                    let params = binds::by_reference(&queued.run);
                    let doc = self
                        .dialect
                        .fetch(On::Tx(&mut tx), &self.by_reference, &params)
                        .await?;
                    let Some(doc) = doc.first().map(|row| row.text(0)).transpose()?.flatten()
                    else {
                        // Taken by a run that is gone: let the caller's own start say so.
                        return Ok(None);
                    };
                    CreateOutcome::Existing(decode::run_from_json(&doc)?)
                }
            });
        }
        let texts: Vec<(&str, String, Option<&str>)> = runs
            .iter()
            .zip(&outcomes)
            .filter_map(|(queued, outcome)| {
                let text = serde_json::to_string(outcome).expect("BUG: an answer serializes");
                let (key, asked) = queued.answer.as_ref()?;
                Some((key.as_str(), text, asked.as_deref()))
            })
            .collect();
        // In sizes of a power of two, as the inserts.
        let mut recorded = 0;
        let mut rest = texts.as_slice();
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(largest_size(rest.len()));
            rest = after;
            let mut params = vec![Param::from(crate::operation::wall_clock_ms())];
            for (key, text, asked) in chunk {
                params.push(Param::from(*key));
                params.push(Param::from(text.as_str()));
                if self.level.answer_digests {
                    params.push(Param::from(*asked));
                }
            }
            self.statements.add(1);
            let statement = self.answer_statement(chunk.len());
            recorded += self
                .dialect
                .fetch(On::Tx(&mut tx), statement, &params)
                .await?
                .len();
        }
        if recorded != texts.len() {
            // A repeat answered first: dropping the transaction rolls it back.
            return Ok(None);
        }
        self.statements.add(1);
        D::commit(tx).await?;
        Ok(Some(outcomes))
    }
}

/// The largest batch size (a power of two, at most [`MAX_STARTS`]) of at most `n` starts.
fn largest_size(n: usize) -> usize {
    debug_assert!(n > 0);
    1 << n.min(MAX_STARTS).ilog2()
}

/// The index of a batch size (a power of two) among the [`SIZES`].
fn size_index(rows: usize) -> usize {
    debug_assert!(rows.is_power_of_two() && rows <= MAX_STARTS);
    rows.trailing_zeros() as usize
}

/// The runs in the documents a statement returned.
fn decode_all(rows: &[Row]) -> Result<Vec<RunRecord>, StoreError> {
    rows.iter()
        .map(|row| decode::run_from_json(&row.text(0)?.unwrap_or_default()))
        .collect()
}

/// The record of `run` among the runs a statement `inserted`, taken out of them.
fn take(inserted: &mut Vec<RunRecord>, run: &NewRun) -> Option<RunRecord> {
    let at = inserted.iter().position(|record| record.id == run.id)?;
    Some(inserted.swap_remove(at))
}

/// The task: takes what is queued (up to [`MAX_STARTS`] at a time), writes it in batches of
/// which up to [`Dialect::START_FLIGHTS`] are in flight at once, until the store is dropped or
/// closed and every batch in flight is answered.
async fn drain<D: Dialect>(writer: Starts<D>, mut queue: mpsc::UnboundedReceiver<Queued>) {
    let mut held: VecDeque<Queued> = VecDeque::new();
    let mut flights = JoinSet::new();
    loop {
        if held.is_empty() {
            tokio::select! {
                Some(first) = queue.recv() => held.push_back(first),
                Some(_) = flights.join_next(), if !flights.is_empty() => continue,
                else => return,
            }
        }
        if flights.len() >= D::START_FLIGHTS {
            flights.join_next().await;
        }
        while held.len() < MAX_STARTS {
            let Ok(next) = queue.try_recv() else {
                break;
            };
            held.push_back(next);
        }
        // The rest goes first in the next batch.
        let batch: Vec<Queued> = held.drain(..largest_size(held.len())).collect();
        flights.spawn(write_batch(writer.clone(), batch));
    }
}

/// Writes one batch and answers its starts.
async fn write_batch<D: Dialect>(writer: Starts<D>, mut batch: Vec<Queued>) {
    // Batches in flight at once take the reference ids they insert in one order, so that two
    // of them never wait on each other crosswise (PostgreSQL would abort one as a deadlock).
    batch.sort_by(|a, b| {
        (&a.run.namespace, &a.run.reference_id).cmp(&(&b.run.namespace, &b.run.reference_id))
    });
    if batch.iter().any(|queued| queued.answer.is_some()) {
        match writer.write_answered(&batch).await {
            Ok(Some(outcomes)) => {
                for (queued, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = queued.reply.send(Ok(Started::Answered(outcome)));
                }
            }
            // A repeat answered first: nothing was written.
            Ok(None) => alone(&mut batch),
            Err(error) => fail(&mut batch, error),
        }
        return;
    }
    // Decoded only once the outcome of the statement is known: a run it inserted must not be
    // inserted again by its caller.
    let written = writer.write(On::Write, &batch).await;
    match written.map(|rows| decode_all(&rows)) {
        Ok(Err(error)) => answer_all(batch.drain(..).map(|queued| queued.reply), error),
        Ok(Ok(mut inserted)) => {
            for queued in batch {
                let started = match take(&mut inserted, &queued.run) {
                    Some(created) => Started::Created(created),
                    None => Started::Taken(queued.run),
                };
                let _ = queued.reply.send(Ok(started));
            }
        }
        Err(error) => fail(&mut batch, error),
    }
}

/// Answers the starts of a batch whose statement failed.
fn fail(batch: &mut Vec<Queued>, error: StoreError) {
    // Something in the batch the database refuses (a run id taken, text it cannot store):
    // nothing was written, and each caller starts its run alone, so that only the offending
    // start fails.
    if !error.is_transient() && batch.len() > 1 {
        return alone(batch);
    }
    // The database is unreachable: every caller gets it (and retries).
    answer_all(batch.drain(..).map(|queued| queued.reply), error);
}

/// Answers every start of a batch that wrote nothing: its caller starts it alone.
fn alone(batch: &mut Vec<Queued>) {
    for queued in batch.drain(..) {
        let _ = queued.reply.send(Ok(Started::Alone(queued.run)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_take_the_largest_power_of_two_up_to_the_limit() {
        let sizes: Vec<usize> = [1, 2, 3, 7, 8, 31, 32, 33, 500]
            .into_iter()
            .map(largest_size)
            .collect();
        assert_eq!(sizes, [1, 2, 2, 4, 8, 16, 32, 32, 32]);
        assert_eq!(size_index(MAX_STARTS), SIZES - 1);
    }
}
