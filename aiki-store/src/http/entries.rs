//! Group commit over HTTP: the entry writes of every run an executor process runs, queued while
//! its previous request is in flight, travel in its next request ([`path::ENTRY_WRITES`]), each
//! checked against its own run's revision and answered on its own (see [`crate::batch`]). A
//! lone task step still costs one request; under load, many runs' steps share one.
//!
//! A server of an earlier release does not serve that route (it answers [`api::NO_ROUTE`]):
//! the writes then go as they went to it before, one request per run's writes, and this store
//! does not try the route again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::{Method, StatusCode};
use serde::Serialize;

use super::Transport;
use crate::api::{self, path, run_path};
use crate::batch::{EntryBatcher, EntryWriter, Pending, duplicate};
use crate::{EntryRecord, ErrorBody, StoreError};

/// The most bytes of writes one request carries (a larger write goes alone): well below a
/// server's default body limit (4 MiB).
const REQUEST_BYTES: usize = 1 << 20;

/// The [`EntryWriter`] of an [`HttpStore`](super::HttpStore).
#[derive(Clone)]
pub(crate) struct EntryRequests {
    transport: Transport,
    /// Set once the server answered that it does not serve [`path::ENTRY_WRITES`].
    unserved: Arc<AtomicBool>,
}

/// One write of a request's body: an [`api::PutEntry`], borrowed.
#[derive(Serialize)]
struct Write<'a> {
    expected: u64,
    entry: &'a EntryRecord,
}

impl EntryRequests {
    /// The batcher of a store that sends its requests with `transport`.
    pub(crate) fn batcher(transport: &Transport) -> Arc<EntryBatcher<EntryRequests>> {
        Arc::new(EntryBatcher::new(EntryRequests {
            transport: transport.clone(),
            unserved: Arc::default(),
        }))
    }

    /// Sends `writes` (serialized [`Write`]s) in one request; `None` when the server does not
    /// serve the route.
    async fn together(
        &self,
        writes: &[String],
    ) -> Result<Option<Vec<Result<(), StoreError>>>, StoreError> {
        let length: usize = writes.iter().map(|write| write.len() + 1).sum();
        let mut body = Vec::with_capacity(length + 16);
        body.extend_from_slice(b"{\"writes\":[");
        for (i, write) in writes.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(write.as_bytes());
        }
        body.extend_from_slice(b"]}");
        // Entry writes are upserts checked against a revision they do not change: a repeat
        // writes the same rows again, so each request may have a key of its own.
        let operation = uuid::Uuid::new_v4().to_string();
        let (status, bytes) = self
            .transport
            .exchange(
                Method::POST,
                path::ENTRY_WRITES,
                Some(body),
                &operation,
                true,
            )
            .await?;
        if status == StatusCode::NOT_FOUND
            && serde_json::from_slice::<ErrorBody>(&bytes)
                .is_ok_and(|error| error.code == api::NO_ROUTE)
        {
            return Ok(None);
        }
        let answers: Vec<Option<ErrorBody>> = super::decode(path::ENTRY_WRITES, status, &bytes)?;
        if answers.len() != writes.len() {
            return Err(StoreError::Corrupt {
                message: format!(
                    "the server answered {} of {} entry writes",
                    answers.len(),
                    writes.len()
                ),
            });
        }
        Ok(Some(
            answers
                .into_iter()
                .map(|answer| answer.map_or(Ok(()), |error| Err(StoreError::from_body(&error))))
                .collect(),
        ))
    }

    /// Sends `batch` as to a server of an earlier release: each run's writes in a request of
    /// their own, all at once, a refusal answering each write of its request.
    async fn by_run(&self, batch: &[Pending]) -> Vec<Result<(), StoreError>> {
        let mut groups: Vec<&[Pending]> = Vec::new();
        let mut rest = batch;
        while let Some(first) = rest.first() {
            let same = rest
                .iter()
                .take_while(|pending| {
                    pending.entry.run_id == first.entry.run_id && pending.expected == first.expected
                })
                .count();
            let (group, after) = rest.split_at(same);
            groups.push(group);
            rest = after;
        }
        let batched = self.transport.stated_payload_limit().is_some();
        let sent = groups.iter().map(|group| async move {
            let first = &group[0];
            let outcome = if group.len() > 1 && batched {
                let body = api::PutEntries {
                    expected: first.expected,
                    entries: group.iter().map(|pending| pending.entry.clone()).collect(),
                };
                let path = run_path(path::ENTRY_BATCH, first.entry.run_id);
                self.transport.post(&path, &body).await
            } else {
                let mut first_refusal = Ok(());
                for pending in group.iter() {
                    let body = Write {
                        expected: pending.expected,
                        entry: &pending.entry,
                    };
                    let path = run_path(path::ENTRIES, pending.entry.run_id);
                    let outcome = self.transport.post(&path, &body).await;
                    if first_refusal.is_ok() {
                        first_refusal = outcome;
                    }
                }
                first_refusal
            };
            (group.len(), outcome)
        });
        let mut outcomes = Vec::with_capacity(batch.len());
        for (n, outcome) in futures_util::future::join_all(sent).await {
            match outcome {
                Ok(()) => outcomes.extend((0..n).map(|_| Ok(()))),
                Err(error) => {
                    outcomes.extend((1..n).map(|_| Err(duplicate(&error))));
                    outcomes.push(Err(error));
                }
            }
        }
        outcomes
    }
}

impl EntryWriter for EntryRequests {
    async fn write(&self, batch: &[Pending]) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let writes = batch
            .iter()
            .map(|pending| {
                serde_json::to_string(&Write {
                    expected: pending.expected,
                    entry: &pending.entry,
                })
                .map_err(|error| StoreError::Invalid {
                    message: format!("an entry write does not serialize: {error}"),
                })
            })
            .collect::<Result<Vec<String>, StoreError>>()?;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut start = 0;
        while start < batch.len() {
            let mut end = start + 1;
            let mut bytes = writes[start].len();
            while end < batch.len()
                && end - start < api::MAX_ENTRY_WRITES
                && bytes + writes[end].len() <= REQUEST_BYTES
            {
                bytes += writes[end].len();
                end += 1;
            }
            let answered = if self.unserved.load(Ordering::Relaxed) {
                None
            } else {
                self.together(&writes[start..end]).await?
            };
            match answered {
                Some(answered) => outcomes.extend(answered),
                None => {
                    self.unserved.store(true, Ordering::Relaxed);
                    outcomes.extend(self.by_run(&batch[start..end]).await);
                }
            }
            start = end;
        }
        Ok(outcomes)
    }
}
