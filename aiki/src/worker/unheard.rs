//! What a worker cannot work without, said on stderr when no `tracing` subscriber would say it:
//! an application that installs none still learns that its worker cannot reach its store or
//! server, or that the server refuses its API key. The first such error is said at once, then
//! at most one a minute.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use aiki_store::StoreError;

/// How often, at most, the errors are said again.
const EVERY: Duration = Duration::from_secs(60);

/// When a worker last said such an error on stderr.
#[derive(Debug, Default)]
pub(super) struct Unheard {
    said: Mutex<Option<Instant>>,
}

impl Unheard {
    /// Says `error`, which kept worker `worker` from claiming, on stderr, unless a `tracing`
    /// subscriber is installed (it logs the error itself) or one was said within a minute.
    pub(super) fn claim_failed(&self, worker: &str, error: &StoreError) {
        if tracing::dispatcher::has_been_set() {
            return;
        }
        let mut said = self
            .said
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if said.is_some_and(|at| at.elapsed() < EVERY) {
            return;
        }
        *said = Some(Instant::now());
        eprintln!("{}", line(worker, error));
    }
}

/// What is said of `error`: what it means for the worker, the error, and what to do.
fn line(worker: &str, error: &StoreError) -> String {
    let what = match error {
        StoreError::Unauthorized { .. } | StoreError::Forbidden { .. } => {
            "the aiki server refuses this worker's API key (check `AIKI_API_KEY` or \
             `HttpStore::with_key`, and that the key holds the `executor` scope)"
        }
        error if error.is_transient() => "cannot reach its store; it keeps trying",
        _ => "cannot claim runs; it keeps trying",
    };
    format!(
        "aiki: worker {worker} {what}: {error} (said again at most once a minute; install a \
         `tracing` subscriber to see every error)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_key_and_an_outage_are_told_apart() {
        let refused = line(
            "w1",
            &StoreError::Unauthorized {
                message: "unknown key".to_owned(),
            },
        );
        assert!(
            refused.contains("refuses this worker's API key"),
            "{refused}"
        );
        let down = line(
            "w1",
            &StoreError::Unavailable {
                message: "connection refused".to_owned(),
                source: None,
            },
        );
        assert!(down.contains("cannot reach its store"), "{down}");
    }
}
