//! `LISTEN` for the ready hints of the schema (migration 0020): one listening connection per
//! database and schema in a process, shared by every store, worker and server long-poll on it,
//! opened when the first receiver subscribes and closed when the last feed is dropped.
//!
//! A hint goes to the channel [`channel`] names whenever a run becomes `queued` (a start, an
//! event or a child's end that wakes it, a due timer swept, a released or requeued claim),
//! with the payload `pool TAB workflow TAB version`; task writes never send one. The schema's
//! trigger sends them, except a start's from migration 0026 on, which the store sends after
//! the start commits (see `sql::hints`). After
//! every (re)connect the feed sends [`Ready::Anything`], since hints sent while it was away
//! are lost: whoever listens then looks at everything it serves.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgListener};
use tokio::sync::broadcast;

use crate::Namespace;
use crate::ready::{Ready, ReadySignals, ReadySource};

/// Hints a listener keeps for a receiver that has not read them yet; one that falls further
/// behind is told it lagged (and then looks at everything).
const BUFFER: usize = 1024;

/// The longest wait between two attempts to reconnect.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The channel of the schema `schema`'s hints: `aiki_ready_` and the schema's name,
/// cut at PostgreSQL's 63 bytes (as the trigger cuts it).
pub(super) fn channel(schema: &str) -> String {
    let mut channel = format!("aiki_ready_{schema}");
    // Schema names are plain ASCII identifiers: any byte is a character boundary.
    channel.truncate(63);
    channel
}

/// Reads a hint's payload: `pool TAB workflow TAB version`. Anything else (a payload of a
/// later release) is a hint that anything may be ready.
fn parse(payload: &str) -> Ready {
    let mut parts = payload.splitn(3, '\t');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(pool), Some(workflow), Some(version)) => Ready::Namespace {
            namespace: Namespace::new(workflow, version),
            pool: pool.to_owned(),
        },
        _ => Ready::Anything,
    }
}

/// The process's listeners, by connection target and channel.
fn listeners() -> &'static Mutex<HashMap<String, Weak<Listener>>> {
    static LISTENERS: OnceLock<Mutex<HashMap<String, Weak<Listener>>>> = OnceLock::new();
    LISTENERS.get_or_init(Default::default)
}

/// The ready hints of one schema: the process's one listener on it.
pub(super) fn signals(options: &PgConnectOptions, channel: String) -> ReadySignals {
    let key = format!(
        "{}:{}/{}?{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default(),
        channel
    );
    let mut listeners = listeners()
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    listeners.retain(|_, listener| listener.strong_count() > 0);
    if let Some(listener) = listeners.get(&key).and_then(Weak::upgrade) {
        return ReadySignals::new(listener);
    }
    let listener = Arc::new(Listener {
        options: options
            .clone()
            .application_name("aiki listener")
            .disable_statement_logging(),
        channel,
        sender: broadcast::channel(BUFFER).0,
        task: Mutex::new(None),
    });
    listeners.insert(key, Arc::downgrade(&listener));
    ReadySignals::new(listener)
}

/// One listening connection and the hints it heard.
struct Listener {
    options: PgConnectOptions,
    channel: String,
    sender: broadcast::Sender<Ready>,
    /// The task that listens, started by the first subscription (and again by a later one if
    /// the runtime it ran on has shut down).
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

impl ReadySource for Listener {
    fn subscribe(&self) -> broadcast::Receiver<Ready> {
        let receiver = self.sender.subscribe();
        let mut task = self
            .task
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if task.as_ref().is_none_or(|task| task.is_finished()) {
            let listening = tokio::spawn(listen(
                self.options.clone(),
                self.channel.clone(),
                self.sender.clone(),
            ));
            *task = Some(listening.abort_handle());
        }
        receiver
    }

    fn describe(&self) -> String {
        format!("postgres LISTEN \"{}\"", self.channel)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let task = self
            .task
            .get_mut()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(task) = task {
            task.abort();
        }
    }
}

/// Listens until aborted: connects, sends [`Ready::Anything`], forwards every hint, and on any
/// failure reconnects (backing off up to [`MAX_BACKOFF`]).
async fn listen(options: PgConnectOptions, channel: String, sender: broadcast::Sender<Ready>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match connect(&options, &channel).await {
            Ok(mut listener) => {
                backoff = Duration::from_millis(50);
                tracing::debug!(%channel, "listening for ready runs");
                let _ = sender.send(Ready::Anything);
                loop {
                    match listener.try_recv().await {
                        Ok(Some(notification)) => {
                            let _ = sender.send(parse(notification.payload()));
                        }
                        Ok(None) => {
                            tracing::warn!(%channel, "the listening connection was lost; reconnecting");
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(%channel, %error, "the listening connection failed; reconnecting");
                            break;
                        }
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%channel, %error, "could not listen for ready runs; retrying");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn connect(options: &PgConnectOptions, channel: &str) -> Result<PgListener, sqlx::Error> {
    // A pool of one whose connection the listener does not replace itself: a lost connection
    // ends this listener, and `listen` starts a fresh one (and says so with `Ready::Anything`).
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy_with(options.clone());
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    listener.eager_reconnect(false);
    listener.listen(channel).await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_cut_as_postgres_cuts_them() {
        assert_eq!(channel("aiki"), "aiki_ready_aiki");
        let long = "s".repeat(63);
        assert_eq!(channel(&long).len(), 63);
        assert!(channel(&long).starts_with("aiki_ready_sss"));
    }

    #[test]
    fn payloads_name_a_version_and_pool_or_anything() {
        assert_eq!(
            parse("default\torders\t1.0"),
            Ready::Namespace {
                namespace: Namespace::new("orders", "1.0"),
                pool: "default".to_owned(),
            }
        );
        assert_eq!(
            parse("gpu\tmail\tv2\twith\ttabs"),
            Ready::Namespace {
                namespace: Namespace::new("mail", "v2\twith\ttabs"),
                pool: "gpu".to_owned(),
            }
        );
        assert_eq!(parse("something new"), Ready::Anything);
    }
}
