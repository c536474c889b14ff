//! What can go wrong talking to a server.

/// What went wrong talking to the server.
///
/// Its message says everything, the causes' text included (`cause` fields), so it has no
/// [`source`](std::error::Error::source) and an error chain prints each cause once.
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
    #[error("cannot reach cairn serve at {server}: {}", chain(cause.as_ref()))]
    Unreachable {
        /// `host:port`.
        server: String,
        /// The connection's error.
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The request failed on the way (the connection broke).
    #[error("{method} {path} failed: {}", chain(cause.as_ref()))]
    Request {
        /// The request's method.
        method: &'static str,
        /// Its path.
        path: String,
        /// What broke.
        cause: Box<dyn std::error::Error + Send + Sync>,
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
    #[error("{method} {path}: unexpected answer: {cause}")]
    Decode {
        /// The request's method.
        method: &'static str,
        /// Its path.
        path: String,
        /// Why it did not decode.
        cause: serde_json::Error,
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

/// `error`'s text followed by its sources' (`a: b: c`): a connection's error says why only in
/// its sources.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
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
