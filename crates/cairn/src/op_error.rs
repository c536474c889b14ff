//! One error type per client operation: what a start, a signal, a cancel/pause/resume, a
//! restart and a read can each fail with, and nothing else, so a caller's `match` is exhaustive
//! over what can really happen. Each converts into the umbrella [`ClientError`] with `?` (or
//! `From`), keeps the store's error (and its source) when the store failed, and answers
//! [`code`](StartError::code) and [`kind`](StartError::kind) as the umbrella does.
//!
//! ```
//! use cairn::{ClientError, ControlError, ErrorKind, RunId};
//! let refused = ControlError::NotPaused { run_id: RunId::new("r-1"), status: cairn::RunStatus::Running };
//! assert_eq!((refused.code(), refused.kind()), (Some("CAIRN-E0305"), ErrorKind::Conflict));
//! let umbrella: ClientError = refused.into();
//! assert!(matches!(umbrella, ClientError::NotPaused { .. }));
//! ```

use crate::error::ClientError;
use cairn_store::{ErrorKind, NameError, RunId, RunStatus, StoreError};
use std::fmt;

/// What starting a run can fail with ([`StartRun`](crate::StartRun), [`Client::start_with`](crate::Client::start_with)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// No live or local worker serves a workflow of that name.
    UnknownWorkflow(String),
    /// The workflow is served, but not in that version.
    UnknownVersion {
        /// Name.
        name: String,
        /// Version asked for.
        version: u32,
    },
    /// The input is not what the workflow accepts, or a store refused what it was given.
    InvalidPayload(String),
    /// The input or a signal's payload is over the size limit.
    PayloadTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The id is taken.
    DuplicateRunId(RunId),
    /// Signal-with-start found the run ended.
    RunFinished {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// The workflow name, the idempotency key or a signal's name breaks its rule.
    InvalidName(NameError),
    /// The fairness key breaks its rule.
    InvalidFairnessKey(String),
    /// The debounce is not valid, or comes with an idempotency key or a signal.
    InvalidDebounce(String),
    /// The timeout is not a duration from 1 ms to 10 years.
    InvalidTimeout(String),
    /// The store failed.
    Store(StoreError),
}

/// What delivering a signal can fail with ([`Client::signal`](crate::Client::signal)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalError {
    /// No such run.
    RunNotFound(RunId),
    /// The run has ended.
    RunFinished {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// The signal's name breaks its rule.
    InvalidName(NameError),
    /// The payload is not JSON, or the store refused it.
    InvalidPayload(String),
    /// The payload is over the size limit.
    PayloadTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The store failed.
    Store(StoreError),
}

/// What a cancel, a pause or a resume can fail with ([`Client::cancel`](crate::Client::cancel),
/// [`Client::pause`](crate::Client::pause), [`Client::resume`](crate::Client::resume)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlError {
    /// No such run.
    RunNotFound(RunId),
    /// The run has ended.
    RunFinished {
        /// The run.
        run_id: RunId,
        /// How it ended.
        status: RunStatus,
    },
    /// A resume of a run that is not paused.
    NotPaused {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// The reason given breaks its rule ([`Reason`](cairn_store::Reason)).
    InvalidName(NameError),
    /// The store failed.
    Store(StoreError),
}

/// What a restart can fail with ([`Client::restart`](crate::Client::restart)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestartError {
    /// No such run.
    RunNotFound(RunId),
    /// The run has not ended.
    NotEnded {
        /// The run.
        run_id: RunId,
        /// Its status.
        status: RunStatus,
    },
    /// The run's journal holds no such step.
    UnknownStep {
        /// The run.
        run_id: RunId,
        /// The path asked for.
        path: String,
    },
    /// The store refused the new run.
    InvalidPayload(String),
    /// The reason given breaks its rule ([`Reason`](cairn_store::Reason)).
    InvalidName(NameError),
    /// The store failed.
    Store(StoreError),
}

/// What reading runs can fail with: [`Client::get`](crate::Client::get), `list`, `journal`,
/// `vars`, `signals`, `children`, `restarts`, `newest`, `workflow_counts`, `result` and `events`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadError {
    /// No such run.
    RunNotFound(RunId),
    /// [`result`](crate::Client::result): the run ended without an output.
    RunDidNotComplete {
        /// The run.
        run_id: RunId,
        /// `failed`, `cancelled` or `paused`.
        status: RunStatus,
        /// Its error or reason.
        message: String,
    },
    /// [`result`](crate::Client::result): the output is not of the type asked for; or a filter
    /// the store refused.
    InvalidPayload(String),
    /// [`events`](crate::Client::events): the topic asked for is not one events are published to.
    InvalidTopic(cairn_journal::topic::TopicError),
    /// The store failed.
    Store(StoreError),
}

/// The conversions every operation's error has: into the umbrella (variant by variant), from
/// the store (the store's refusals this operation can meet become its own variants; any other
/// store error is kept whole as its `Store`), and `Display`, `Error`, `code` and `kind` as the
/// umbrella answers them.
macro_rules! operation_error {
    ($op:ident { $($variant:ident $fields:tt),* $(,)? }
     from store { $($store:ident $store_fields:tt => $mine:ident $mine_fields:tt),* $(,)? }) => {
        impl From<$op> for ClientError {
            fn from(error: $op) -> Self {
                match error {
                    $($op::$variant $fields => ClientError::$variant $fields,)*
                }
            }
        }

        impl From<StoreError> for $op {
            fn from(error: StoreError) -> Self {
                match error {
                    $(StoreError::$store $store_fields => $op::$mine $mine_fields,)*
                    other => $op::Store(other),
                }
            }
        }

        impl $op {
            /// The stable code of this error (`CAIRN-E0301`; see `docs/errors.md`), if it has one.
            pub fn code(&self) -> Option<&'static str> {
                ClientError::from(self.clone()).code()
            }

            /// The HTTP API's snake_case code for this error (`run_not_found`, …).
            pub fn name(&self) -> &'static str {
                ClientError::from(self.clone()).name()
            }

            /// What kind of failure this is (the HTTP API answers with the status of its kind).
            pub fn kind(&self) -> ErrorKind {
                ClientError::from(self.clone()).kind()
            }
        }

        impl fmt::Display for $op {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&ClientError::from(self.clone()), f)
            }
        }

        /// No source, as [`ClientError`]: the message holds the causes.
        impl std::error::Error for $op {}
    };
}

operation_error!(StartError {
    UnknownWorkflow(name),
    UnknownVersion { name, version },
    InvalidPayload(message),
    PayloadTooLarge { size, limit },
    DuplicateRunId(id),
    RunFinished { run_id, status },
    InvalidName(error),
    InvalidFairnessKey(message),
    InvalidDebounce(message),
    InvalidTimeout(message),
    Store(error),
} from store {
    DuplicateRunId(id) => DuplicateRunId(id),
    RunFinished { run_id, status } => RunFinished { run_id, status },
    InvalidInput(message) => InvalidPayload(message),
});

operation_error!(SignalError {
    RunNotFound(id),
    RunFinished { run_id, status },
    InvalidName(error),
    InvalidPayload(message),
    PayloadTooLarge { size, limit },
    Store(error),
} from store {
    RunNotFound(id) => RunNotFound(id),
    RunFinished { run_id, status } => RunFinished { run_id, status },
    InvalidInput(message) => InvalidPayload(message),
});

operation_error!(ControlError {
    RunNotFound(id),
    RunFinished { run_id, status },
    NotPaused { run_id, status },
    InvalidName(error),
    Store(error),
} from store {
    RunNotFound(id) => RunNotFound(id),
    RunFinished { run_id, status } => RunFinished { run_id, status },
    NotPaused { run_id, status } => NotPaused { run_id, status },
});

operation_error!(RestartError {
    RunNotFound(id),
    NotEnded { run_id, status },
    UnknownStep { run_id, path },
    InvalidPayload(message),
    InvalidName(error),
    Store(error),
} from store {
    RunNotFound(id) => RunNotFound(id),
    InvalidInput(message) => InvalidPayload(message),
});

operation_error!(ReadError {
    RunNotFound(id),
    RunDidNotComplete { run_id, status, message },
    InvalidPayload(message),
    InvalidTopic(error),
    Store(error),
} from store {
    RunNotFound(id) => RunNotFound(id),
    InvalidInput(message) => InvalidPayload(message),
});

/// A payload refused before anything is stored: not one every store keeps, or over the size
/// limit. Each operation that takes a payload makes it its own error.
#[derive(Debug)]
pub(crate) enum PayloadRefused {
    Invalid(String),
    TooLarge { size: usize, limit: usize },
}

/// The refusals checks shared by several operations make, as each such operation's own error.
macro_rules! shared_refusals {
    ($($op:ident),*) => {$(
        impl From<PayloadRefused> for $op {
            fn from(refused: PayloadRefused) -> Self {
                match refused {
                    PayloadRefused::Invalid(message) => $op::InvalidPayload(message),
                    PayloadRefused::TooLarge { size, limit } => $op::PayloadTooLarge { size, limit },
                }
            }
        }

        impl From<NameError> for $op {
            fn from(error: NameError) -> Self {
                $op::InvalidName(error)
            }
        }
    )*};
}

shared_refusals!(StartError, SignalError, ClientError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_error_reads_as_its_umbrella_and_converts_both_ways() {
        let id = RunId::new("r");
        let finished = ClientError::RunFinished { run_id: id.clone(), status: RunStatus::Completed };
        let signal = SignalError::from(StoreError::RunFinished { run_id: id.clone(), status: RunStatus::Completed });
        assert_eq!(signal, SignalError::RunFinished { run_id: id.clone(), status: RunStatus::Completed });
        assert_eq!(
            (signal.to_string(), signal.code(), signal.kind()),
            (finished.to_string(), finished.code(), finished.kind())
        );
        assert_eq!(ClientError::from(signal), finished);
        // The store's refusals become the operation's own, as the umbrella maps them.
        assert_eq!(ControlError::from(StoreError::RunNotFound(id.clone())), ControlError::RunNotFound(id.clone()));
        let paused = StoreError::NotPaused { run_id: id.clone(), status: RunStatus::Running };
        assert!(matches!(ControlError::from(paused), ControlError::NotPaused { .. }));
        assert!(matches!(ReadError::from(StoreError::backend("disk")), ReadError::Store(_)));
        let timeout = StartError::InvalidTimeout("soon".into());
        assert_eq!(timeout.code(), Some("CAIRN-E0317"));
        assert_eq!(RestartError::UnknownStep { run_id: id.clone(), path: "a".into() }.code(), Some("CAIRN-E0307"));
        // A store error the operation has no variant of stays whole, with its own code.
        let fenced = StartError::from(StoreError::Fenced { run_id: id, held: 1, current: 2 });
        assert!(matches!(fenced, StartError::Store(StoreError::Fenced { .. })));
        assert_eq!(fenced.code(), Some("CAIRN-E0201"));
    }

    #[test]
    fn a_store_failure_keeps_its_cause_and_a_chain_says_it_once() {
        /// A driver's error whose own cause says why, as tokio-postgres's "error connecting".
        #[derive(Debug)]
        struct Driver(std::io::Error);
        impl std::fmt::Display for Driver {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error connecting to server")
            }
        }
        impl std::error::Error for Driver {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let driver = Driver(std::io::Error::other("connection reset"));
        let store = StoreError::caused_by("reading run `r`", driver);
        let read = ReadError::from(store.clone());
        let client = ClientError::from(store.clone());
        // As an error reporter prints them: each error and its sources (anyhow's `{:#}`).
        let reported = |error: anyhow::Error| format!("{error:#}");
        for text in [reported(store.clone().into()), reported(read.into()), reported(client.into())] {
            assert!(text.contains("reading run `r`: error connecting to server: connection reset"), "{text}");
            assert_eq!(text.matches("connection reset").count(), 1, "{text}");
            assert_eq!(text.matches("error connecting").count(), 1, "{text}");
        }
        // The driver's error is kept, to inspect.
        let Some(cause) = store.cause() else { panic!("no cause kept") };
        assert!(cause.downcast_ref::<Driver>().is_some());
    }
}
