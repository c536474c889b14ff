//! What an operation of the API fails with in process: a request the API itself refuses (a
//! malformed query, cursor or duration, before anything is read) or what the client refused or
//! failed with, each with the API's code and the HTTP status it answers.

use crate::error::ClientError;
use crate::op_error::{ControlError, ReadError, RestartError, SignalError, StartError};
use cairn_store::ErrorKind;

/// Why an operation of [`cairn_api::Operations`] failed on the embedded client.
///
/// ```
/// use cairn::api::OperationError;
/// let refused = OperationError::invalid("invalid_query", "limit 0 is not between 1 and 1000");
/// assert_eq!((refused.status(), refused.code()), (400, "invalid_query"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum OperationError {
    /// The request breaks a rule of the API (`invalid_query`, `invalid_cursor`, `invalid_run_id`,
    /// …): nothing was read or changed.
    #[error("{message}")]
    Invalid {
        /// The API's code.
        code: &'static str,
        /// For people.
        message: String,
    },
    /// What the client refused or failed with.
    #[error(transparent)]
    Client(#[from] ClientError),
}

impl OperationError {
    /// A request that breaks a rule of the API: `400` with `code`.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        OperationError::Invalid { code, message: message.into() }
    }

    /// The HTTP status it answers: `400` for an invalid request, and by its [`ErrorKind`] for
    /// the client's errors (a store that failed is `500`).
    pub fn status(&self) -> u16 {
        match self {
            OperationError::Invalid { .. } => 400,
            // Every kind has its status: a new kind does not compile until it is given one.
            OperationError::Client(error) => match error.kind() {
                ErrorKind::NotFound => 404,
                ErrorKind::Invalid => 400,
                ErrorKind::TooLarge => 413,
                ErrorKind::Conflict => 409,
                ErrorKind::Unavailable | ErrorKind::Corrupt => 500,
            },
        }
    }

    /// Whether the store failed (the cause is the operator's to read, not every caller's).
    pub fn is_store_failure(&self) -> bool {
        self.status() == 500
    }

    /// The API's code.
    pub fn code(&self) -> &'static str {
        match self {
            OperationError::Invalid { code, .. } => code,
            OperationError::Client(error) => error.name(),
        }
    }

    /// What the API answers of it: its code, and its message, or for a store that failed only
    /// where the cause is (the cause is logged at warn).
    pub fn detail(&self) -> cairn_api::ErrorDetail {
        let message = match self.is_store_failure() {
            true => {
                tracing::warn!(error = %self, "a request failed in the store: {self}");
                "the store failed to answer this request; the server's log has the cause".to_owned()
            }
            false => self.to_string(),
        };
        cairn_api::ErrorDetail { code: self.code().to_owned(), message }
    }
}

impl cairn_api::Coded for OperationError {
    fn code(&self) -> Option<&str> {
        Some(OperationError::code(self))
    }
}

/// Each operation's own error fails an operation as the umbrella it converts into.
macro_rules! through_client_error {
    ($($operation:ty),*) => {$(
        impl From<$operation> for OperationError {
            fn from(error: $operation) -> Self {
                OperationError::Client(ClientError::from(error))
            }
        }
    )*};
}

through_client_error!(StartError, SignalError, ControlError, RestartError, ReadError);
