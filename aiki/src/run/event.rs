//! Events: per-name queues of received events, read in order, and recorded timeouts.

use std::marker::PhantomData;
use std::time::Duration;

use aiki_store::{EventRecord, Queue};
use serde_json::Value;

use super::Run;
use super::sleep::{SleepState, check_duration};
use super::suspend::Block;
use crate::error::WorkflowError;
use crate::workflow::Event;

/// A wait for the next event of type `E` in a run: [`wait`](EventWait::wait) or
/// [`wait_timeout`](EventWait::wait_timeout).
#[derive(Debug)]
pub struct EventWait<'r, E> {
    run: &'r Run,
    _event: PhantomData<fn() -> E>,
}

impl<E: Event> EventWait<'_, E> {
    /// Waits for the next event of this name. The k-th wait of a name reads the k-th event;
    /// if it has not arrived, the run suspends until it does.
    pub async fn wait(self) -> Result<E::Payload, WorkflowError> {
        let data = self
            .run
            .wait_event(E::NAME, None, crate::schema::example::<E::Payload>)
            .await?;
        let data = data.expect("BUG: an event wait without timeout returned a timeout");
        decode_event::<E>(self.run, data)
    }

    /// As [`wait`](EventWait::wait), giving up after `timeout`: `Ok(None)`. The timeout is
    /// recorded, so replay returns it again. A timeout longer than ten years is refused with
    /// [`WorkflowError::DurationTooLong`].
    pub async fn wait_timeout(
        self,
        timeout: Duration,
    ) -> Result<Option<E::Payload>, WorkflowError> {
        match self
            .run
            .wait_event(E::NAME, Some(timeout), crate::schema::example::<E::Payload>)
            .await?
        {
            Some(data) => decode_event::<E>(self.run, data).map(Some),
            None => Ok(None),
        }
    }
}

/// A received payload, checked against the current payload type (recorded without a
/// fingerprint, so always checked); a mismatch fails the run.
fn decode_event<E: Event>(run: &Run, data: Value) -> Result<E::Payload, WorkflowError> {
    crate::schema::decode_recorded(data, None).map_err(|message| {
        run.fail_fatally(WorkflowError::EventPayloadMismatch {
            event: E::NAME.to_owned(),
            message,
        })
    })
}

impl Run {
    /// Waits for the next event of type `E`.
    pub fn event<E: Event>(&self) -> EventWait<'_, E> {
        EventWait {
            run: self,
            _event: PhantomData,
        }
    }

    /// Reads the next event of `name` (or its recorded timeout: `None`), or blocks. `example`
    /// makes a payload for the impact check to look past the wait with.
    pub(crate) async fn wait_event(
        &self,
        name: &str,
        timeout: Option<Duration>,
        example: fn() -> Option<Value>,
    ) -> Result<Option<Value>, WorkflowError> {
        self.check_fatal()?;
        if let Some(timeout) = timeout {
            check_duration(
                || format!("timeout of the wait for event `{name}`"),
                timeout,
            )?;
        }
        let (index, recorded) = self.next_event_slot(name);
        if let Some(record) = recorded {
            return Ok(record.data.filter(|_| !record.timed_out));
        }
        let deadline = match timeout {
            None => None,
            Some(timeout) => {
                match self
                    .sleep_until(&Queue::EventTimeout(name.to_owned()).stored_name(), timeout)
                    .await?
                {
                    SleepState::Until(deadline) => Some(deadline),
                    SleepState::Done { .. } if self.probing() => return Ok(None),
                    SleepState::Done { .. } => {
                        let record = self.record_timeout(name, index).await?;
                        return Ok(record.data.filter(|_| !record.timed_out));
                    }
                }
            }
        };
        if self.looking_ahead() {
            match (example(), timeout) {
                (Some(payload), _) => {
                    self.assume(format!("event `{name}` arrives"));
                    return Ok(Some(payload));
                }
                (None, Some(_)) => {
                    self.assume(format!("the wait for event `{name}` times out"));
                    return Ok(None);
                }
                (None, None) => {
                    self.assume_value(format!("event `{name}`"), None);
                }
            }
        }
        match self
            .block(Block::Event {
                name: name.to_owned(),
                index,
                deadline,
            })
            .await {}
    }

    pub(super) fn next_event_slot(&self, name: &str) -> (u32, Option<EventRecord>) {
        let mut replay = self.replay();
        let queue = replay.events.entry(name.to_owned()).or_default();
        let index = queue.next as u32;
        queue.next += 1;
        (
            index,
            queue
                .records
                .iter()
                .find(|event| event.index == index)
                .cloned(),
        )
    }

    pub(super) async fn record_timeout(
        &self,
        name: &str,
        index: u32,
    ) -> Result<EventRecord, WorkflowError> {
        let revision = self.inner.revision;
        let id = self.inner.id;
        let now = self.now();
        self.write(move |store| {
            let name = name.to_owned();
            async move {
                store
                    .record_event_timeout(id, revision, &name, index, now)
                    .await
            }
        })
        .await
    }
}
