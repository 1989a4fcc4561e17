use crate::{RunId, RunStatus};

/// Everything a store can fail with. Every backend maps its own errors onto these kinds, and
/// the conformance suite checks kinds, never messages.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The thing asked for does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What was looked for, e.g. `run 3f2a…`.
        what: String,
    },
    /// The run's revision moved on since the writer last saw it: another executor owns the run
    /// now, or an operator paused or cancelled it. The writer must stop and write nothing more.
    #[error(
        "revision conflict on run {run_id}: expected revision {expected}, found {actual}; another \
         executor or an operator changed the run, so this executor must stop working on it"
    )]
    RevisionConflict {
        /// The run.
        run_id: RunId,
        /// The revision the writer expected.
        expected: u64,
        /// The revision the store holds.
        actual: u64,
    },
    /// An operator asked to pause the run while it was running: the write starting a new task
    /// attempt is refused, and the run's executor moves it to `paused` once the tasks in
    /// flight have recorded their results.
    #[error(
        "a pause was requested for run {run_id}: no new task starts; its executor pauses it \
         once the tasks in flight have finished"
    )]
    PauseRequested {
        /// The run.
        run_id: RunId,
    },
    /// A request the store cannot serve as given (a malformed cursor, say); the message says
    /// what is wrong.
    #[error("invalid request: {message}")]
    Invalid {
        /// What is wrong, and what to do.
        message: String,
    },
    /// The status table forbids this move.
    #[error("run {run_id} cannot move from `{from}` to `{to}`")]
    InvalidTransition {
        /// The run.
        run_id: RunId,
        /// Its current status.
        from: RunStatus,
        /// The refused target.
        to: RunStatus,
    },
    /// A record with the same key already exists.
    #[error("{what} already exists")]
    AlreadyExists {
        /// What collided.
        what: String,
    },
    /// The store cannot be reached (or went away mid-call), or cannot serve the call for now
    /// (busy). Workers retry with back-off. The message says what did not answer (the
    /// database, or the aiki server at its URL) and what to check.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The driver's error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Migrating the schema failed.
    #[error("migration failed: {message}")]
    Migration {
        /// What happened and what to do.
        message: String,
    },
    /// The database's schema is not one this release reads and writes: it holds no Aiki
    /// schema, or one older than this release reads, or one a newer release migrated that does
    /// not admit this release. The message names both versions and what to do.
    #[error("{message}")]
    Schema {
        /// What was found, what this release needs, and what to do.
        message: String,
    },
    /// A store URL with a scheme no enabled backend serves.
    #[error(
        "unsupported store url `{url}`: {reason}; a store URL is `sqlite://path/to/file.db`, \
         `sqlite::memory:`, `memory:`, `postgres://user@host/db` or an aiki server's \
         `http://host:port`"
    )]
    UnsupportedUrl {
        /// The URL given.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// The store's URL is well formed but the store cannot be opened there (a SQLite file in a
    /// folder that does not exist).
    #[error("cannot open the store at `{url}`: {reason}")]
    CannotOpen {
        /// The URL given.
        url: String,
        /// Why, and what to do.
        reason: String,
    },
    /// A record holds a value this release does not know (a status or kind written by a newer
    /// release, during a rolling upgrade): not corruption, a newer worker can read it.
    #[error("record written by a newer release: {message}; upgrade this process to read it")]
    Incompatible {
        /// What was not understood.
        message: String,
    },
    /// A stored value could not be read back (corrupt or foreign data).
    #[error("corrupt record: {message}")]
    Corrupt {
        /// What could not be decoded.
        message: String,
    },
    /// An aiki server refused the request's API key: none was sent, or it is malformed,
    /// unknown, of another secret, or revoked. The message says which.
    #[error("unauthorized: {message}")]
    Unauthorized {
        /// Why, and what to do.
        message: String,
    },
    /// An aiki server refused the request: its API key does not hold the scope the operation
    /// needs (the message names both).
    #[error("forbidden: {message}")]
    Forbidden {
        /// Why, and what to do.
        message: String,
    },
    /// An aiki server refused the request for now: its API key sent more requests than the
    /// server's per-key rate allows. Transient: retried after a pause, as an outage is.
    #[error("rate limited: {message}")]
    RateLimited {
        /// The limit, and when the next request may come.
        message: String,
    },
    /// A payload (a run's input, a task's or a run's output, an event's payload, a child's, a
    /// fork's or a schedule's input), or a whole request to an aiki server, is over the size
    /// the store keeps (see [`crate::limit`]); nothing was written. Sending it again is refused
    /// again: keep large data elsewhere and pass a reference to it.
    #[error(
        "{what} is {}, over the limit of {}; keep large data (files, documents, result sets) \
         in storage of your own and pass a reference to it (a key or a URL) instead",
        crate::limit::size(*bytes),
        crate::limit::size(*limit)
    )]
    TooLarge {
        /// What is too large: `the output of run 3f2a…`, `the payload of event \`approved\` …`.
        what: String,
        /// Its size, in bytes of JSON text.
        bytes: u64,
        /// The limit it is over, in bytes.
        limit: u64,
    },
    /// An operation id (an idempotency key) sent again with a different request than the one
    /// it first named: not a repeat, so neither done nor answered with the first answer. Send
    /// each new operation with an id of its own.
    #[error("idempotency key reused: {message}")]
    KeyReused {
        /// Which key, and what to do.
        message: String,
    },
    /// An aiki server refused the request by a rule of the runtime's own, not the store's: an
    /// input or an event payload its catalog refuses (`invalid_input`), an event the workflow
    /// version does not declare (`unknown_event`), a version no worker has published
    /// (`not_in_catalog`). Nothing was written; sending it again is refused again. `aiki`'s
    /// `ClientError` reads it back as its own kind (see [`crate::RUNTIME_CODES`]).
    #[error("{message}")]
    Refused {
        /// The runtime's code, one of [`crate::RUNTIME_CODES`].
        code: &'static str,
        /// What is wrong and what to do.
        message: String,
        /// The kind's fields, as the server sent them.
        details: serde_json::Value,
    },
    /// Any other backend error.
    #[error("store backend error: {source}")]
    Backend {
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// `true` for [`StoreError::Unavailable`]: worth retrying after a pause.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::Unavailable { .. } | StoreError::RateLimited { .. }
        )
    }

    /// `true` for [`StoreError::RevisionConflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::RevisionConflict { .. })
    }

    /// The [`StoreError::Invalid`] of a change-stream cursor the store did not hand out.
    pub fn bad_cursor(cursor: &crate::ChangeCursor) -> Self {
        StoreError::Invalid {
            message: format!(
                "`{cursor}` is not a change-stream cursor of this store; start from the empty \
                 cursor or pass back the `next` of a page"
            ),
        }
    }

    /// A [`StoreError::NotFound`] for a run.
    pub fn run_not_found(id: RunId) -> Self {
        StoreError::NotFound {
            what: format!("run {id}"),
        }
    }
}

/// `url` with its secrets replaced by `***`, for error messages and logs, which end up in
/// terminals: the password of its user info (`postgres://user:secret@host`), the values of query
/// parameters that name a secret (`password=`, `sslpassword=`, any name holding `password`,
/// `secret` or `token`), and those of the URLs a parameter carries (`aiki_listen_url=`, read
/// percent-encoded), redacted alike.
pub(crate) fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut redacted = redact_user_info(base);
    if let Some(query) = query {
        let pairs: Vec<String> = query.split('&').map(redact_parameter).collect();
        redacted.push('?');
        redacted.push_str(&pairs.join("&"));
    }
    redacted
}

/// `url` (without its query) with the password of its user info replaced by `***`.
fn redact_user_info(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((user_info, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match user_info.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
        None => url.to_owned(),
    }
}

/// A query parameter `name=value` with a secret value replaced by `***`, and a URL value
/// redacted.
fn redact_parameter(pair: &str) -> String {
    let Some((name, value)) = pair.split_once('=') else {
        return pair.to_owned();
    };
    let lower = name.to_ascii_lowercase();
    if ["password", "secret", "token"]
        .iter()
        .any(|secret| lower.contains(secret))
    {
        return format!("{name}=***");
    }
    let Ok(decoded) = percent_encoding::percent_decode_str(value).decode_utf8() else {
        return pair.to_owned();
    };
    if !decoded.contains("://") {
        return pair.to_owned();
    }
    // Readable, yet one value of the query: what would end or split it stays encoded.
    const IN_A_VALUE: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
        .add(b' ')
        .add(b'#')
        .add(b'%')
        .add(b'&')
        .add(b'+')
        .add(b'=');
    let inner = redact(&decoded);
    format!(
        "{name}={}",
        percent_encoding::utf8_percent_encode(&inner, IN_A_VALUE)
    )
}

#[cfg(test)]
mod redaction {
    use super::redact;

    #[test]
    fn passwords_are_left_out_of_urls() {
        assert_eq!(
            redact("postgres://app:s3cr3t@db:5432/runs?aiki_x=1"),
            "postgres://app:***@db:5432/runs?aiki_x=1"
        );
        assert_eq!(redact("postgres://app@db/runs"), "postgres://app@db/runs");
        assert_eq!(redact("sqlite://a@b.db"), "sqlite://a@b.db");
        assert_eq!(redact("memory:"), "memory:");
    }

    #[test]
    fn passwords_in_the_query_and_in_the_urls_it_carries_are_left_out() {
        let url = "postgres://app@db/runs?sslmode=disable&password=s3cr3t&SSLPassword=k3y\
                   &aiki_listen_url=postgres%3A%2F%2Fapp%3As3cr3t%40direct%2Fruns%3Fpassword%3Dx";
        let redacted = redact(url);
        assert_eq!(
            redacted,
            "postgres://app@db/runs?sslmode=disable&password=***&SSLPassword=***\
             &aiki_listen_url=postgres://app:***@direct/runs?password%3D***"
        );
        assert!(!redacted.contains("s3cr3t") && !redacted.contains("k3y"));
        // Not encoded, the same.
        assert_eq!(
            redact("postgres://db/runs?aiki_listen_url=postgres://app:s3cr3t@direct/runs"),
            "postgres://db/runs?aiki_listen_url=postgres://app:***@direct/runs"
        );
        assert_eq!(
            redact("postgres://db/runs?aiki_schema=a&application_name=x"),
            "postgres://db/runs?aiki_schema=a&application_name=x"
        );
    }
}
