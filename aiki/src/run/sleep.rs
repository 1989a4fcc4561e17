//! Durable sleeps: per-name queues of recorded sleeps, read in order.

use std::time::Duration;

use aiki_store::{Millis, SleepRecord};

use super::suspend::Block;
use super::{Found, Run};
use crate::clock::{MAX_DURATION, millis};
use crate::error::WorkflowError;

/// Refuses a sleep, retry delay or wait timeout longer than ten years.
pub(super) fn check_duration(
    what: impl FnOnce() -> String,
    duration: Duration,
) -> Result<(), WorkflowError> {
    if duration > MAX_DURATION {
        return Err(WorkflowError::DurationTooLong {
            what: what(),
            duration,
        });
    }
    Ok(())
}

/// What a durable sleep ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SleepOutcome {
    /// `true` when `wakeup()` ended the sleep early.
    pub cancelled: bool,
}

/// Where a sleep stands: over, or ending at a time.
pub(super) enum SleepState {
    Done { cancelled: bool },
    Until(Millis),
}

/// A sleep asked for with another duration than the recorded one, as the impact check notes it.
fn changed(name: &str, record: &SleepRecord, wanted: Millis, ends: Millis) -> Found {
    Found::SleepChanged {
        name: name.to_owned(),
        recorded_ms: record.duration_ms,
        wanted_ms: wanted,
        new_end: ends,
    }
}

impl Run {
    /// A durable sleep named `name`. The k-th sleep of a name reads the k-th recorded sleep of
    /// that name: a sleep recorded for a shorter duration sleeps the difference more (once); one
    /// recorded for a longer duration ends at once. `wakeup()` ends it early:
    /// `cancelled = true`.
    ///
    /// Sleeps with the same name share a queue: give different sleeps different names.
    ///
    /// A sleep longer than ten years is refused with [`WorkflowError::DurationTooLong`].
    pub async fn sleep(
        &self,
        name: &str,
        duration: Duration,
    ) -> Result<SleepOutcome, WorkflowError> {
        self.check_fatal()?;
        check_duration(|| format!("sleep `{name}`"), duration)?;
        let wake_at = self.sleep_until(name, duration).await?;
        match wake_at {
            SleepState::Done { cancelled } => Ok(SleepOutcome { cancelled }),
            SleepState::Until(_) if self.looking_ahead() => {
                self.assume(format!("sleep `{name}` ends"));
                Ok(SleepOutcome { cancelled: false })
            }
            SleepState::Until(wake_at) => {
                let name = name.to_owned();
                match self.block(Block::Sleep { wake_at, name }).await {}
            }
        }
    }

    /// Reads or records the next sleep of `name`, and says when it ends.
    pub(super) async fn sleep_until(
        &self,
        name: &str,
        duration: Duration,
    ) -> Result<SleepState, WorkflowError> {
        let wanted = millis(duration);
        let now = self.now();
        let (index, recorded) = {
            let mut replay = self.replay();
            let queue = replay.sleeps.entry(name.to_owned()).or_default();
            let index = queue.next as u32;
            queue.next += 1;
            (index, queue.records.get(index as usize).cloned())
        };
        // `from`: the wake time counts from now (a new sleep, or a lengthened one whose
        // recorded end has passed), and the store moves it onto its clock; without, it counts
        // from the recorded end, which is the store's already.
        let (record, from) = match recorded {
            Some(record) if record.cancelled => return Ok(SleepState::Done { cancelled: true }),
            Some(record) if wanted <= record.duration_ms => {
                let ends = record.wake_at - (record.duration_ms - wanted);
                if wanted < record.duration_ms {
                    self.note(|| changed(name, &record, wanted, ends));
                }
                return Ok(if ends <= now {
                    SleepState::Done { cancelled: false }
                } else {
                    SleepState::Until(ends)
                });
            }
            // Longer than recorded: sleep the difference more, folded into the record.
            Some(mut record) => {
                let from = (record.wake_at < now).then_some(now);
                let ends = record
                    .wake_at
                    .max(now)
                    .saturating_add(wanted - record.duration_ms);
                self.note(|| changed(name, &record, wanted, ends));
                record.wake_at = ends;
                record.duration_ms = wanted;
                (record, from)
            }
            None => (
                SleepRecord::new(
                    self.inner.id,
                    name,
                    index,
                    wanted,
                    now.saturating_add(wanted),
                ),
                Some(now),
            ),
        };
        // In the queue at its index before the write awaits, so that a concurrent sleep of
        // the same name takes the next slot; then as the store stored it.
        self.keep_sleep(name, index, record.clone());
        let wake_at = if self.probing() {
            record.wake_at
        } else {
            let revision = self.inner.revision;
            let stored = self
                .write(move |store| {
                    let record = record.clone();
                    async move { store.put_sleep(revision, record, from).await }
                })
                .await?;
            let wake_at = stored.wake_at;
            self.keep_sleep(name, index, stored);
            wake_at
        };
        Ok(if wake_at <= now {
            SleepState::Done { cancelled: false }
        } else {
            SleepState::Until(wake_at)
        })
    }

    /// Keeps `record` as the `index`-th sleep of `name` in the replay's queue.
    fn keep_sleep(&self, name: &str, index: u32, record: SleepRecord) {
        let mut replay = self.replay();
        let queue = replay.sleeps.entry(name.to_owned()).or_default();
        if (index as usize) < queue.records.len() {
            queue.records[index as usize] = record;
        } else {
            queue.records.push(record);
        }
    }
}
