//! A command that did not succeed: the one line to print and the exit code, from any error.

use std::any::Any;

use aiki::{ClientError, StoreError};

use crate::{EXIT_ERROR, EXIT_UNREACHABLE};

/// A failed command: the one line to print, and the exit code.
///
/// A failure with code 0 and no message is a command whose reader went away (standard output
/// closed: `aiki runs list | head -1`): it ends quietly, with exit code 0.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong, and what to do.
    pub message: String,
    /// The exit code.
    pub code: u8,
}

impl Failure {
    pub(crate) fn error(message: impl std::fmt::Display) -> Self {
        Failure {
            message: message.to_string(),
            code: EXIT_ERROR,
        }
    }

    pub(crate) fn usage(message: impl std::fmt::Display) -> Self {
        Failure {
            message: message.to_string(),
            code: crate::EXIT_USAGE,
        }
    }

    /// The reader of standard output went away: nothing more to say.
    pub(crate) fn reader_gone() -> Self {
        Failure {
            message: String::new(),
            code: 0,
        }
    }

    /// Whether this is [`reader_gone`](Failure::reader_gone).
    pub(crate) fn is_reader_gone(&self) -> bool {
        self.code == 0 && self.message.is_empty()
    }
}

/// Whether `error` says the store could not be reached (worth trying again later), as opposed
/// to a failure that trying again does not change.
pub(crate) fn is_unreachable(error: &(dyn Any + 'static)) -> bool {
    if let Some(error) = error.downcast_ref::<StoreError>() {
        return error.is_transient();
    }
    matches!(
        error.downcast_ref::<ClientError>(),
        Some(ClientError::Store(error)) if error.is_transient()
    )
}

/// Whether `error` is a write to a pipe whose reader has gone.
pub(crate) fn is_broken_pipe(error: &(dyn Any + 'static)) -> bool {
    error
        .downcast_ref::<std::io::Error>()
        .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
}

impl<E: std::error::Error + 'static> From<E> for Failure {
    /// The error's message; exit code [`EXIT_UNREACHABLE`] when the store could not be
    /// reached, [`EXIT_ERROR`] otherwise; a broken pipe ends the command quietly.
    fn from(error: E) -> Self {
        let any: &dyn Any = &error;
        if is_broken_pipe(any) {
            return Failure::reader_gone();
        }
        Failure {
            message: error.to_string(),
            code: if is_unreachable(any) {
                EXIT_UNREACHABLE
            } else {
                EXIT_ERROR
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_store_has_its_own_exit_code() {
        let down = || StoreError::Unavailable {
            message: "connection refused".into(),
            source: None,
        };
        assert_eq!(Failure::from(down()).code, EXIT_UNREACHABLE);
        assert_eq!(
            Failure::from(ClientError::Store(down())).code,
            EXIT_UNREACHABLE
        );
        let gone = StoreError::NotFound { what: "run".into() };
        assert_eq!(Failure::from(gone).code, EXIT_ERROR);
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(Failure::from(pipe).is_reader_gone());
        let full = std::io::Error::other("disk full");
        assert_eq!(Failure::from(full).code, EXIT_ERROR);
    }
}
