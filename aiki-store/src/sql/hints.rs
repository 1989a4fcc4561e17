//! The ready hints of the runs a store starts, sent by the store once they are committed,
//! instead of by the schema's trigger inside the start's transaction (PostgreSQL from migration
//! 0026).
//!
//! `NOTIFY` takes a database-wide lock from the start of its transaction's commit to the end
//! of it, so transactions that notify commit one after another: when every start notified from
//! its own transaction, concurrent starts ran at one connection's commit rate, whatever the
//! number of connections. Sent afterwards, concurrent starts share one statement, and only
//! that statement (which writes nothing, so has no WAL to flush) takes the lock. A start
//! returns once its hint is sent, so a process that starts a run and exits does not take the
//! hint with it. A hint that cannot be sent is logged and dropped: a hint is never a claim,
//! and the listeners' safety poll finds the run.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{RunRecord, RunStatus};

use super::SqlStore;
use super::dialect::{Dialect, On, Param};

/// Distinct hints one statement carries at most.
const PER_STATEMENT: usize = 100;

/// The hints waiting to be sent, and the statements that sent them.
#[derive(Debug)]
pub(crate) struct StartHints {
    /// The channel the hints go to.
    channel: String,
    /// The payloads waiting, and the number of the send that will take them.
    waiting: Mutex<Waiting>,
    /// Held by the one caller sending; the others wait for it, and find theirs sent or send
    /// everything waiting themselves.
    sending: tokio::sync::Mutex<()>,
    /// The number of the last send done.
    sent: AtomicU64,
}

#[derive(Debug)]
struct Waiting {
    /// The send that will take `payloads` (the first is 1).
    number: u64,
    payloads: BTreeSet<String>,
}

impl StartHints {
    /// Hints sent on `channel`.
    pub(crate) fn new(channel: String) -> Self {
        StartHints {
            channel,
            waiting: Mutex::new(Waiting {
                number: 1,
                payloads: BTreeSet::new(),
            }),
            sending: tokio::sync::Mutex::new(()),
            sent: AtomicU64::new(0),
        }
    }
}

impl<D: Dialect> SqlStore<D> {
    /// Inserts a run as [`insert_run`](SqlStore::insert_run) does, leaving its ready hint to
    /// [`hint_started`](SqlStore::hint_started) where this store sends them.
    pub(super) async fn insert_started(
        &self,
        on: On<'_, super::dialect::Tx<D>>,
        run: &crate::NewRun,
    ) -> Result<Option<RunRecord>, crate::StoreError> {
        match &self.sql.insert_run_quiet {
            Some(quiet) if self.start_hints.is_some() => self.insert_run_by(on, quiet, run).await,
            _ => self.insert_run(on, run).await,
        }
    }

    /// Sends the ready hint of `run`, inserted by
    /// [`insert_started`](SqlStore::insert_started) and committed, if it is queued; returns
    /// once a statement sent after this call began has carried it.
    pub(super) async fn hint_started(&self, run: &RunRecord) {
        let Some(hints) = &self.start_hints else {
            return;
        };
        if run.status != RunStatus::Queued {
            return;
        }
        let payload = format!(
            "{}\t{}\t{}",
            run.pool, run.namespace.workflow, run.namespace.version
        );
        let mine = {
            let mut waiting = hints.waiting.lock().unwrap_or_else(|e| e.into_inner());
            waiting.payloads.insert(payload);
            waiting.number
        };
        let _sending = hints.sending.lock().await;
        if hints.sent.load(Ordering::Acquire) >= mine {
            // Another caller's statement took it.
            return;
        }
        let (number, payloads) = {
            let mut waiting = hints.waiting.lock().unwrap_or_else(|e| e.into_inner());
            let number = waiting.number;
            waiting.number += 1;
            (number, std::mem::take(&mut waiting.payloads))
        };
        let payloads: Vec<String> = payloads.into_iter().collect();
        for chunk in payloads.chunks(PER_STATEMENT) {
            let calls: Vec<String> = (0..chunk.len())
                .map(|i| format!("pg_notify($1, ${})", i + 2))
                .collect();
            let sql = format!("SELECT {}", calls.join(", "));
            let mut params: Vec<Param<'_>> = vec![hints.channel.as_str().into()];
            params.extend(chunk.iter().map(|payload| Param::from(payload.as_str())));
            if let Err(error) = self.execute(On::Write, &sql, &params).await {
                tracing::warn!(
                    %error,
                    "could not send the ready hints of runs just started; listeners find them \
                     at their next poll"
                );
            }
        }
        hints.sent.store(number, Ordering::Release);
    }
}
