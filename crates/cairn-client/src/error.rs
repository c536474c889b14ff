//! What can go wrong talking to a server.

/// What went wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server's URL cannot be used.
    #[error("--url {url:?}: {why}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why not.
        why: String,
    },
    /// No connection could be made.
    #[error("cannot reach cairn serve at {server}: {source}")]
    Unreachable {
        /// `host:port`.
        server: String,
        /// The connection's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The request failed on the way (the connection broke).
    #[error("{method} {path} failed: {source}")]
    Request {
        /// The request's method.
        method: &'static str,
        /// Its path.
        path: String,
        /// What broke.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The API refused the request or failed: its error answer.
    #[error("{message}")]
    Api {
        /// The HTTP status (`404`, `400`, `401`, …).
        status: u16,
        /// The API's stable snake_case code (`run_not_found`, …); empty if the answer had none.
        code: String,
        /// For people.
        message: String,
    },
    /// The answer was not what the API documents.
    #[error("{method} {path}: unexpected answer: {source}")]
    Decode {
        /// The request's method.
        method: &'static str,
        /// Its path.
        path: String,
        /// Why it did not decode.
        source: serde_json::Error,
    },
    /// [`Client::result_as`](crate::Client::result_as): the run ended without completing, or had not ended in time.
    #[error("run {run} did not complete: it is {status}{}", error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default())]
    NotCompleted {
        /// The run's id.
        run: String,
        /// Its status then.
        status: String,
        /// Its error, if it failed.
        error: Option<String>,
    },
}

impl Error {
    /// The API's code for a refused request (`run_not_found`, …), if the server answered one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } if !code.is_empty() => Some(code),
            _ => None,
        }
    }
}

impl cairn_api::Coded for Error {
    fn code(&self) -> Option<&str> {
        Error::code(self)
    }
}
